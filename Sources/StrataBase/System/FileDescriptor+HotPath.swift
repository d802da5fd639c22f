#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CStrataLinux
import Synchronization

/// Calls for paths that run per cache hit and must not allocate: the file's path, needed only
/// for a ``SyscallFaults`` rule or an error, is built only then.
extension Syscall {
    /// ``retrying(_:path:_:)`` with the path built by `path` only when a fault rule is installed
    /// or the call fails.
    @inlinable
    @discardableResult
    public static func retrying<T: FixedWidthInteger>(
        _ call: String, lazyPath path: () -> String, _ body: () -> T
    ) throws(SystemCallError) -> T {
        if SyscallFaults.armed.load(ordering: .relaxed) != 0 { try injectedFault(call, path()) }
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemCallError(call: call, path: path(), errno: code)
        }
    }
}

extension FileDescriptor {
    /// Opens the NUL-terminated `name` relative to `directory` (`openat`) without building a
    /// `String`: the descriptor's ``path`` is the directory's (shared, not copied); an error
    /// names the file.
    public init(openAt directory: borrowing FileDescriptor, cName name: UnsafePointer<CChar>, flags: Int32) throws(SystemCallError) {
        let directoryFD = directory.rawValue
        let directoryPath = directory.path
        let fd = try Syscall.retrying("openat", lazyPath: { directoryPath + "/" + String(cString: name) }) {
            Glibc.openat(directoryFD, name, flags | O_CLOEXEC)
        }
        self.init(adopting: fd, path: directoryPath)
    }

    /// One `pread` of up to `buffer.count` bytes at `offset` (no loop: a short count is the
    /// caller's to interpret); 0 at end of file.
    public func readOnce(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(SystemCallError) -> Int {
        try Syscall.retrying("pread", path: path) { pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// ``init(openAt:cName:flags:)`` only when the name resolves from the kernel's dentry cache
    /// (`openat2` with `RESOLVE_CACHED`): never waits for the disk. Throws EAGAIN when it would
    /// have to, and ENOSYS/EINVAL/E2BIG where the kernel lacks it (before Linux 5.12).
    public init(openCachedAt directory: borrowing FileDescriptor, cName name: UnsafePointer<CChar>, flags: Int32) throws(SystemCallError) {
        let directoryFD = directory.rawValue
        let directoryPath = directory.path
        let fd = try Syscall.retrying("openat2", lazyPath: { directoryPath + "/" + String(cString: name) }) {
            strata_openat_cached(directoryFD, name, flags)
        }
        self.init(adopting: fd, path: directoryPath)
    }

    /// ``readOnce(into:at:)`` of only what is in the page cache (`preadv2` with `RWF_NOWAIT`):
    /// throws EAGAIN when none of it is (then a plain read would wait for the disk); may return a
    /// short count when part is.
    public func readCachedOnce(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(SystemCallError) -> Int {
        try Syscall.retrying("preadv2", path: path) { strata_pread_nowait(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }
}
