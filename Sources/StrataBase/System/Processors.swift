#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The machine's processors (and its memory), asked of the system in one place.
package enum Processors {
    /// The machine's physical memory in bytes (`_SC_PHYS_PAGES` × the page size), at least one page.
    package static var physicalMemory: Int {
        Swift.max(1, Int(sysconf(Int32(_SC_PHYS_PAGES)))) * Int(sysconf(Int32(_SC_PAGESIZE)))
    }

    /// The online cores now (`sysconf(_SC_NPROCESSORS_ONLN)`, at least 1). It reads a file in
    /// /sys: callers on a hot path keep the answer.
    package static var online: Int { Swift.max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The processors the system was configured with (`sysconf(_SC_NPROCESSORS_CONF)`, at
    /// least 1): every id `sched_getcpu` can answer is below it, online or not.
    package static var configured: Int { Swift.max(1, Int(sysconf(Int32(_SC_NPROCESSORS_CONF)))) }
}
