import CStrataLinux
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A private, unnamed file that a large original is copied into, then read as one
/// mapped buffer (``mapped(count:)``): a pass over a file of hundreds of megabytes holds in
/// memory only the pages it reads now, never the whole file, and no other process can truncate
/// what it reads (a mapping of the original itself would raise `SIGBUS` if an operator
/// rewrote it in place).
///
/// `O_TMPFILE` in `directory`, or where the filesystem has none, a fresh name unlinked at once:
/// a process killed mid-build leaves nothing behind. The file's pages live in the page cache,
/// written back or dropped by the kernel as memory requires. Cost: one `pwrite` per part (or
/// the `copy_file_range` calls of ``copy(from:offset:count:)``), one `mmap`, and the file's size
/// on `directory`'s filesystem while it lives.
package final class SpoolFile: Sendable {
    private let file: FileDescriptor

    /// Creates the file in `directory` (which must exist), readable only by this user.
    package init(directory: String) throws(SystemCallError) {
        do {
            file = try FileDescriptor(open: directory, flags: strata_O_TMPFILE | O_RDWR, mode: 0o600)
        } catch  where [EOPNOTSUPP, EISDIR, EINVAL].contains(error.errno) {
            // A filesystem without O_TMPFILE (EOPNOTSUPP; EISDIR or EINVAL from older kernels).
            let path = directory + "/.spool-" + String(UInt64.random(in: 0...UInt64.max), radix: 16)
            let named = try FileDescriptor(open: path, flags: O_CREAT | O_EXCL | O_RDWR, mode: 0o600)
            try FileDescriptor.unlink(path: path)
            file = named
        }
    }

    /// Writes `bytes` at `offset` (the parts in any order; a gap reads as zeros).
    package func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(SystemCallError) {
        try file.write(bytes, at: offset)
    }

    /// Copies up to `count` bytes of `source` from `offset` to the same offset here, in the
    /// kernel (`copy_file_range`: nothing passes through this process, and a filesystem that
    /// shares blocks may clone them), or with `pread` and `pwrite` through a 1 MiB buffer where
    /// the kernel will not (another filesystem, an older kernel). Returns the bytes copied:
    /// fewer than `count` only when the source ends first.
    package func copy(from source: borrowing FileDescriptor, offset: Int, count: Int) throws(SystemCallError) -> Int {
        var done = 0
        while done < count {
            var from = Int64(offset + done), to = Int64(offset + done)
            let copied: Int
            do {
                copied = try Syscall.retrying("copy_file_range", path: source.path) {
                    strata_copy_file_range(source.rawValue, &from, file.rawValue, &to, count - done)
                }
            } catch  where [EXDEV, EINVAL, ENOSYS, EOPNOTSUPP].contains(error.errno) {
                return done + (try copyBuffered(from: source, offset: offset + done, count: count - done))
            }
            if copied == 0 { break }
            done += copied
        }
        return done
    }

    private func copyBuffered(from source: borrowing FileDescriptor, offset: Int, count: Int) throws(SystemCallError) -> Int {
        var buffer = [UInt8](repeating: 0, count: min(count, 1 << 20))
        var done = 0
        while done < count {
            let wanted = min(buffer.count, count - done)
            let got = try rethrowingTyped(SystemCallError.self) {
                try buffer.withUnsafeMutableBytes { raw in
                    try source.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[..<wanted]), at: offset + done)
                }
            }
            if got == 0 { break }
            try rethrowingTyped(SystemCallError.self) {
                try buffer.withUnsafeBytes { raw in try file.write(UnsafeRawBufferPointer(rebasing: raw[..<got]), at: offset + done) }
            }
            done += got
        }
        return done
    }

    /// Maps the first `count` bytes (more than 0, all written) read-only. The mapping keeps
    /// the file alive after this value is gone.
    package func mapped(count: Int) throws(SystemCallError) -> MappedFile {
        MappedFile(region: try MappedRegion(file: file, length: count))
    }
}

/// A file mapped read-only whose pages a sequential reader hands back behind itself
/// (``release(_:)``): its resident set is the part being read, however large the file.
/// Safe to share between threads (nothing in it changes; `madvise` is thread-safe).
package final class MappedFile: Sendable {
    private let region: MappedRegion

    fileprivate init(region: consuming MappedRegion) { self.region = region }

    /// The mapped length.
    package var count: Int { region.count }

    /// The bytes; the pointer must not escape `body`.
    package func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try region.withUnsafeBytes(body)
    }

    /// Drops the whole pages inside `range` from this process's resident set
    /// (`madvise(MADV_DONTNEED)`): a later read maps them again from the page cache (or reads
    /// them back from the file). Advice only: nothing to do when it fails.
    package func release(_ range: Range<Int>) {
        let page = MappedRegion.pageSize
        let start = (max(range.lowerBound, 0) + page - 1) / page * page
        let end = range.upperBound >= region.count ? region.count : range.upperBound / page * page
        guard end > start else { return }
        MappedRegion.dropResidentPages(region.base + start, length: end - start)
    }
}
