#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension FileDescriptor {
    /// A second descriptor (close-on-exec) for the same open file, known under `path` — for a
    /// file created under a temporary name and renamed into place, so that later errors and
    /// checks name where it now lives. Cost: one `fcntl(F_DUPFD_CLOEXEC)`.
    public func duplicate(path newPath: String? = nil) throws(SystemCallError) -> FileDescriptor {
        let fd = try Syscall.retrying("fcntl(F_DUPFD_CLOEXEC)", path: path) { fcntl(rawValue, F_DUPFD_CLOEXEC, 0) }
        return FileDescriptor(adopting: fd, path: newPath ?? path)
    }
}
