#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whether a process that left a file behind is still running: the writer of a temporary file
/// records its pid and the identity of its pid namespace and kernel (``namespaceTag``), so that
/// another process can tell a writer that crashed (SIGKILL, OOM kill) from one still writing.
package enum ProcessLiveness {
    /// A 64-bit tag of this kernel boot and this pid namespace (FNV-1a of the boot id and the
    /// namespace's inode): two processes that see the same pids have the same tag. 0 when
    /// neither can be read (then no pid is ever judged dead by it).
    package static let namespaceTag: UInt64 = {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        var known = false
        func mix(_ bytes: some Sequence<UInt8>) {
            for byte in bytes {
                hash ^= UInt64(byte)
                hash = hash &* 0x0000_0100_0000_01B3
            }
        }
        if let file = try? FileDescriptor(open: "/proc/sys/kernel/random/boot_id", flags: O_RDONLY),
            let bytes = try? file.readAll(), !bytes.isEmpty
        {
            mix(bytes)
            known = true
        }
        if let st = try? FileDescriptor.status(ofPath: "/proc/self/ns/pid") {
            mix((0..<8).map { UInt8(truncatingIfNeeded: UInt64(st.st_ino) >> (8 * $0)) })
            known = true
        }
        return known ? (hash == 0 ? 1 : hash) : 0
    }()

    /// Whether `pid`, recorded under `tag`, is certainly gone: the tag is this process's
    /// (same kernel, same pid namespace), the pid is not this process's, and `kill(pid, 0)`
    /// says no such process. A reused pid reads as alive (the caller keeps the file; a stale
    /// rule by age removes it later).
    package static func isCertainlyGone(pid: pid_t, tag: UInt64) -> Bool {
        guard tag != 0, tag == namespaceTag, pid > 0, pid != getpid() else { return false }
        return kill(pid, 0) == -1 && errno == ESRCH
    }
}
