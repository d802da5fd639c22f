#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
    public init(
        openAt directory: borrowing FileDescriptor, name: String, flags: Int32, mode: mode_t = 0o644
    )
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
