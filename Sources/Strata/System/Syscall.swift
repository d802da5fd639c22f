#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A failed system call: which call, on which path (if any), and the errno it returned.
///
/// Every syscall Strata makes goes through ``Syscall`` so that `EINTR` is retried in one place
/// and failures carry enough to act on ("open(/var/cache/x): No space left on device").
public struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The call that failed, e.g. `"open"`.
    public var call: String
    /// The path the call was about, when there is one.
    public var path: String?
    /// The `errno` value.
    public var errno: Int32

    public init(call: String, path: String? = nil, errno: Int32) {
        self.call = call
        self.path = path
        self.errno = errno
    }

    /// The C library's text for ``errno``.
    public var reason: String { String(cString: strerror(errno)) }

    public var description: String {
        if let path { return "\(call)(\(path)): \(reason) (errno \(errno))" }
        return "\(call): \(reason) (errno \(errno))"
    }
}

/// The one place Strata calls the C library's syscall wrappers.
public enum Syscall {
    /// Runs `body` (a C call returning -1 and setting `errno` on failure), retrying on `EINTR`,
    /// and throws a ``SystemCallError`` naming `call` and `path` on any other failure.
    @inlinable
    @discardableResult
    public static func retrying<T: FixedWidthInteger>(
        _ call: String, path: String? = nil, _ body: () -> T
    ) throws(SystemCallError) -> T {
        while true {
            let result = body()
            if result != -1 { return result }
            let code = Glibc.errno
            if code == EINTR { continue }
            throw SystemCallError(call: call, path: path, errno: code)
        }
    }

    /// For calls such as `posix_fallocate` that return the error number instead of setting
    /// `errno`: retries on `EINTR`, throws on any other non-zero result.
    @inlinable
    public static func retryingReturnedErrno(
        _ call: String, path: String? = nil, _ body: () -> Int32
    ) throws(SystemCallError) {
        while true {
            let code = body()
            if code == 0 { return }
            if code == EINTR { continue }
            throw SystemCallError(call: call, path: path, errno: code)
        }
    }
}

/// An owned file descriptor, closed when the value goes away. Non-copyable, so it has exactly
/// one owner; I/O loops handle short reads and writes and `EINTR`.
public struct FileDescriptor: ~Copyable, @unchecked Sendable {
    /// The raw descriptor, for the few calls that are not wrapped here.
    public let rawValue: Int32
    /// The path it was opened with, for error messages.
    public let path: String

    /// Opens `path` with `flags` (`O_CLOEXEC` is always added) and `mode` for creation.
    public init(open path: String, flags: Int32, mode: mode_t = 0o644) throws(SystemCallError) {
        self.rawValue = try Syscall.retrying("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
        self.path = path
    }

    /// Opens `name` relative to the directory descriptor `directory` (`openat`).
    public init(openAt directory: borrowing FileDescriptor, name: String, flags: Int32, mode: mode_t = 0o644)
        throws(SystemCallError)
    {
        let dirFD = directory.rawValue
        self.path = directory.path + "/" + name
        self.rawValue = try Syscall.retrying("openat", path: directory.path + "/" + name) {
            Glibc.openat(dirFD, name, flags | O_CLOEXEC, mode)
        }
    }

    /// Adopts an already open descriptor.
    public init(adopting rawValue: Int32, path: String) {
        self.rawValue = rawValue
        self.path = path
    }

    deinit { _ = Glibc.close(rawValue) }

    /// Reads up to `buffer.count` bytes at `offset`, looping over short reads; returns the
    /// number read (less than asked only at end of file).
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(SystemCallError) -> Int {
        var done = 0
        while done < buffer.count {
            let n = try Syscall.retrying("pread", path: path) {
                pread(rawValue, buffer.baseAddress! + done, buffer.count - done, off_t(offset + done))
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Writes all of `bytes` at `offset`, looping over short writes.
    public func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            let n = try Syscall.retrying("pwrite", path: path) {
                pwrite(rawValue, bytes.baseAddress! + done, bytes.count - done, off_t(offset + done))
            }
            done += n
        }
    }

    /// Reads the whole file from offset 0.
    public func readAll() throws(SystemCallError) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = 1 << 16
        if let size = try? self.size(), size > 0 { chunk = size + 1 }
        var offset = 0
        while true {
            let old = result.count
            result.reserveCapacity(old + chunk)
            result.append(contentsOf: repeatElement(0, count: chunk))
            let n = try rethrowingTyped(SystemCallError.self) {
                try result.withUnsafeMutableBytes { raw in
                    try read(into: UnsafeMutableRawBufferPointer(rebasing: raw[old...]), at: offset)
                }
            }
            result.removeLast(chunk - n)
            offset += n
            if n < chunk { return result }
            chunk = Swift.max(chunk, 1 << 16)
        }
    }

    /// The file's size in bytes (`fstat`).
    public func size() throws(SystemCallError) -> Int {
        var st = stat()
        try Syscall.retrying("fstat", path: path) { fstat(rawValue, &st) }
        return Int(st.st_size)
    }

    /// Flushes the file's data and metadata to the device.
    public func sync() throws(SystemCallError) {
        try Syscall.retrying("fsync", path: path) { fsync(rawValue) }
    }
}
