#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Anonymous private memory that a producer fills front to back while its consumer reads it
/// behind: the pages already read are handed back to the kernel (`madvise(MADV_DONTNEED)`), so
/// the resident set is the part in between, however large the mapping. For a library that
/// insists on one whole-image output buffer but writes it in order (libwebp's incremental
/// decoder). Non-copyable; its owner never lets ``base`` escape. Cost: one `mmap`
/// (`MAP_NORESERVE`: the size is address space, not a commitment), one `madvise` per release,
/// one `munmap`.
package struct ScratchMapping: ~Copyable {
    /// Start of the mapping (page aligned).
    package let base: UnsafeMutableRawPointer
    /// Length in bytes.
    package let count: Int
    /// Bytes from the start already handed back (a multiple of the page size, or `count`).
    package private(set) var released = 0

    /// Maps `count` zero-filled bytes (more than 0).
    package init(count: Int) throws(SystemCallError) {
        precondition(count > 0, "cannot map an empty region")
        let address = try Syscall.retrying("mmap") {
            Int(bitPattern: mmap(nil, count, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0))
        }
        base = UnsafeMutableRawPointer(bitPattern: address)!
        self.count = count
    }

    deinit { _ = munmap(base, count) }

    /// Hands back every whole page below byte `offset`: they read as zeros from now on, so the
    /// producer must be past them and the consumer done with them. Advice only: nothing to do
    /// when it fails.
    package mutating func release(upTo offset: Int) {
        let end = offset >= count ? count : offset / MappedRegion.pageSize * MappedRegion.pageSize
        guard end > released else { return }
        _ = madvise(base + released, end - released, MADV_DONTNEED)
        released = end
    }

    /// Bytes of the mapping resident now (`mincore`): what a test checks of a streaming reader.
    /// A page walk of the mapping; 0 when the call fails.
    package var residentBytes: Int {
        let page = MappedRegion.pageSize
        var pages = [UInt8](repeating: 0, count: (count + page - 1) / page)
        guard mincore(base, count, &pages) == 0 else { return 0 }
        return pages.reduce(0) { $0 + Int($1 & 1) } * page
    }
}
