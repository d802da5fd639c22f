#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CStrataLinux

/// Space, size and locks of an open file.
extension FileDescriptor {
    /// `posix_fallocate`: reserves `[offset, offset + length)` on disk, extending the file, so
    /// that a mapping of it cannot `SIGBUS` on a full disk (fails with `ENOSPC` instead).
    public func allocate(offset: Int, length: Int) throws(SystemCallError) {
        try Syscall.retryingReturnedErrno("posix_fallocate", path: path) {
            posix_fallocate(rawValue, off_t(offset), off_t(length))
        }
    }

    /// `ftruncate` to `length` bytes.
    public func truncate(to length: Int) throws(SystemCallError) {
        try Syscall.retrying("ftruncate", path: path) { ftruncate(rawValue, off_t(length)) }
    }

    /// `fchmod`.
    public func setPermissions(_ mode: mode_t) throws(SystemCallError) {
        try Syscall.retrying("fchmod", path: path) { fchmod(rawValue, mode) }
    }

    /// Whole-file advisory lock kinds for ``lockFile(_:wait:)``.
    public enum FileLock: Sendable { case shared, exclusive, unlock }

    /// `flock`: takes (or drops) the whole-file lock. With `wait` false a held lock gives `false`
    /// instead of blocking. Blocking variants belong on a dedicated thread.
    @discardableResult
    public func lockFile(_ kind: FileLock, wait: Bool = true) throws(SystemCallError) -> Bool {
        var operation: Int32
        switch kind {
        case .shared: operation = LOCK_SH
        case .exclusive: operation = LOCK_EX
        case .unlock: operation = LOCK_UN
        }
        if !wait { operation |= LOCK_NB }
        do throws(SystemCallError) {
            try Syscall.retrying("flock", path: path) { strata_flock(rawValue, operation) }
            return true
        } catch  where !wait && error.errno == EWOULDBLOCK {
            return false
        }
    }

    /// Tries to take a write lock (`exclusive`) or drop the lock on byte `offset` with an
    /// open-file-description lock (`F_OFD_SETLK`): per open file, never per process, released when
    /// the last descriptor of that open file closes — also when the process is killed. Never
    /// blocks: a lock held elsewhere gives `false`.
    public func tryByteLock(at offset: Int, exclusive: Bool) throws(SystemCallError) -> Bool {
        var lock = Glibc.flock()
        lock.l_type = Int16(exclusive ? F_WRLCK : F_UNLCK)
        lock.l_whence = Int16(SEEK_SET)
        lock.l_start = off_t(offset)
        lock.l_len = 1
        lock.l_pid = 0
        do throws(SystemCallError) {
            try Syscall.retrying("fcntl(F_OFD_SETLK)", path: path) { fcntl(rawValue, strata_F_OFD_SETLK, &lock) }
            return true
        } catch  where error.errno == EAGAIN || error.errno == EACCES {
            return false
        }
    }

    /// One `read` at the current position (for eventfd, inotify and pipes); 0 at end of file.
    /// `EAGAIN` on a non-blocking descriptor is thrown like any other error.
    public func readOnce(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        try Syscall.retrying("read", path: path) { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// One `write` at the current position (for eventfd and pipes).
    public func writeOnce(_ bytes: UnsafeRawBufferPointer) throws(SystemCallError) -> Int {
        try Syscall.retrying("write", path: path) { Glibc.write(rawValue, bytes.baseAddress, bytes.count) }
    }

    /// A new `eventfd` (close-on-exec; non-blocking when asked).
    public static func eventFD(initialValue: UInt32 = 0, nonBlocking: Bool = false) throws(SystemCallError) -> FileDescriptor {
        let flags = strata_EFD_CLOEXEC | (nonBlocking ? strata_EFD_NONBLOCK : 0)
        let fd = try Syscall.retrying("eventfd") { strata_eventfd(initialValue, flags) }
        return FileDescriptor(adopting: fd, path: "eventfd")
    }

    /// `getdents64` into `buffer`: the number of bytes of `linux_dirent64` records, 0 at the end.
    public func readDirectoryEntries(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> Int {
        try Syscall.retrying("getdents64", path: path) { strata_getdents64(rawValue, buffer.baseAddress, buffer.count) }
    }
}
