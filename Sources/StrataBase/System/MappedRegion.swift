#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// An owned `mmap` of (part of) a file, unmapped when the value goes away — or handed over to a
/// ``PixelStorage`` whose release action unmaps it when the last image using it is gone.
///
/// Non-copyable, so exactly one owner unmaps. Cost: one `mmap` (plus the page-table work of
/// `populate`), one `munmap` at the end. Touching a page of a file mapping beyond the file's end
/// raises `SIGBUS`: check the file's length before mapping, and never truncate a mapped file.
public struct MappedRegion: ~Copyable, @unchecked Sendable {
    /// Start of the mapping (page aligned).
    public let base: UnsafeMutableRawPointer
    /// Length in bytes as passed to `mmap`.
    public let count: Int

    /// Maps `length` bytes of `file` from `offset` (a multiple of the page size).
    ///
    /// - Parameters:
    ///   - file: The open file to map (it may be closed once mapped).
    ///   - length: Bytes to map (more than 0).
    ///   - offset: Where the mapping starts in the file, a multiple of the page size.
    ///   - writable: `PROT_READ | PROT_WRITE` and `MAP_SHARED` (writes reach the file) instead
    ///     of `PROT_READ` and `MAP_SHARED`.
    ///   - populate: `MAP_POPULATE`: build the page tables for every page now (one syscall
    ///     instead of one fault per page group when the caller will touch all of it).
    public init(
        file: borrowing FileDescriptor, length: Int, offset: Int = 0,
        writable: Bool = false, populate: Bool = false
    ) throws(SystemCallError) {
        precondition(length > 0, "cannot map an empty region")
        let prot = writable ? (PROT_READ | PROT_WRITE) : PROT_READ
        let flags = MAP_SHARED | (populate ? MAP_POPULATE : 0)
        let fd = file.rawValue
        // Through `Syscall`, so that a SyscallFaults rule can fail it (MAP_FAILED is -1).
        let address = try Syscall.retrying("mmap", path: file.path) {
            Int(bitPattern: mmap(nil, length, prot, flags, fd, off_t(offset)))
        }
        self.base = UnsafeMutableRawPointer(bitPattern: address)!
        self.count = length
    }

    deinit { _ = munmap(base, count) }

    /// Drops this process's page-table entries for `length` bytes at `start` (page aligned) of
    /// a *shared file* mapping (`madvise(MADV_DONTNEED)`): the pages leave the process's
    /// resident set, written ones stay dirty in the page cache and reach the file as usual, and
    /// a later access maps them again from the page cache. For a writer that streams far more
    /// than it keeps. Never for private or anonymous memory (it would read back as zeros).
    package static func dropResidentPages(_ start: UnsafeMutableRawPointer, length: Int) {
        _ = madvise(start, length, MADV_DONTNEED)  // advice only: nothing to do when it fails
    }

    /// Gives the mapping to a ``PixelStorage`` (kind `kind`) that unmaps it when deallocated.
    public consuming func intoPixelStorage(kind: PixelStorage.Kind = .fileMapping, writable: Bool = false) -> PixelStorage {
        let base = self.base, count = self.count
        discard self
        return PixelStorage(borrowing: base, count: count, kind: kind, writable: writable) { pointer, length in
            _ = munmap(pointer, length)
        }
    }

    /// Read-only view of the mapped bytes; the pointer must not escape `body`.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// The system page size.
    public static let pageSize: Int = Int(sysconf(Int32(_SC_PAGESIZE)))
}
