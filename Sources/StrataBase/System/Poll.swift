#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `poll(2)` over a few descriptors, for the dedicated threads that wait on an eventfd, an
/// inotify instance or a pipe (never on Swift's cooperative pool).
public enum Poll {
    /// Sets `revents` of each entry of `descriptors` and returns how many are ready: waits until
    /// one is, or until `timeout` milliseconds pass (0: returns at once; -1: no limit). `EINTR`
    /// is retried with the whole timeout again; a negative `fd` is ignored, as `poll` does.
    public static func wait(_ descriptors: inout [pollfd], timeout: Int32) throws(SystemCallError) -> Int {
        let count = nfds_t(descriptors.count)
        return Int(
            try descriptors.withUnsafeMutableBufferPointer { buffer throws(SystemCallError) in
                try Syscall.retrying("poll") { Glibc.poll(buffer.baseAddress, count, timeout) }
            })
    }

    /// A `pollfd` asking for input on `fd` (`POLLIN`).
    public static func input(_ fd: Int32) -> pollfd { pollfd(fd: fd, events: Int16(POLLIN), revents: 0) }
}
