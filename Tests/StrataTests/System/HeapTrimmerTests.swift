#if canImport(Glibc)
import Glibc
#endif
import Testing

@testable import Strata
import StrataTestSupport

@Suite("HeapTrimmer", .timeLimit(.minutes(1)))
struct HeapTrimmerTests {
    /// Resident pages of `bytes` at `address` (page-aligned inward), by `mincore`.
    private static func residentPages(_ address: UnsafeMutableRawPointer, bytes: Int) -> (resident: Int, pages: Int) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (Int(bitPattern: address) + page - 1) / page * page
        let end = (Int(bitPattern: address) + bytes) / page * page
        let pages = (end - start) / page
        var vector = [UInt8](repeating: 0, count: pages)
        #expect(mincore(UnsafeMutableRawPointer(bitPattern: start), end - start, &vector) == 0)
        return (vector.filter { $0 & 1 != 0 }.count, pages)
    }

    @Test("freed blocks inside the heap stay resident until a trim hands their pages back")
    func trimReleasesFreedPagesInsideTheHeap() throws {
        try #require(HeapTrimmer.isAvailable)
        // Freeing a mapped 8 MiB block raises glibc's mapping threshold above the blocks
        // below, so they come from an arena, as decoded images do after the first few.
        free(malloc(8 << 20))
        let block = 256 << 10
        var blocks: [UnsafeMutableRawPointer] = []
        for _ in 0..<33 {
            let p = try #require(malloc(block))
            memset(p, 1, block)
            blocks.append(p)
        }
        // Free all but the last, which keeps the freed ones from the arena's top (where
        // `free` itself would give them back).
        let freed = blocks.dropLast()
        for p in freed { free(p) }
        let middle = freed[freed.startIndex + 16]
        let before = Self.residentPages(middle, bytes: block)
        #expect(before.resident == before.pages, "a freed block inside the heap is still resident")
        HeapTrimmer.trimNow()
        let after = Self.residentPages(middle, bytes: block)
        #expect(after.resident < after.pages / 2, "after a trim: \(after.resident) of \(after.pages) pages resident")
        free(blocks.last!)
    }

    @Test("it trims on the pool every interval, and stops")
    func trimsOnThePoolEveryInterval() async throws {
        try #require(HeapTrimmer.isAvailable)
        let pool = try BlockingPool<Void>(width: 1, name: "trim-test", makeContext: {})
        defer { pool.shutdown() }
        let started = Lock(0)
        pool.observeJobStarts { lane, _ in if lane == .urgent { started.withLock { $0 += 1 } } }
        let trimmer = HeapTrimmer(interval: .milliseconds(100), pool: pool)
        #expect(await eventually { trimmer.trimCount >= 2 })
        #expect(started.withLock { $0 } >= 2, "each trim is a job on the pool")
        trimmer.stop()
        let stoppedAt = trimmer.trimCount
        try await Task.sleep(for: .milliseconds(400))
        #expect(trimmer.trimCount <= stoppedAt + 1, "at most a trim already running finishes")
    }
}
