#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `CLOCK_MONOTONIC` in nanoseconds, asked of the system in one place (vDSO, no syscall). An
/// `Int64`, unlike a `ContinuousClock.Instant`, has a fixed layout, so an async function keeps it
/// in its frame rather than in a task allocation of its own.
package enum MonotonicClock {
    package static func nanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}
