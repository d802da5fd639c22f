import Synchronization
import Glibc
import Testing

@testable import Strata
import StrataTestSupport

/// `BlockingPool.setWidths(urgent:prefetch:)`: lane widths that change while the pool runs.
@Suite struct BlockingPoolWidthTests {
    /// Submits `count` urgent jobs that each hold their thread until released; once `expected`
    /// run together (and a little longer, for any excess to show), releases them and returns
    /// the most that ran at once.
    static func peak(of pool: BlockingPool<Void>, jobs count: Int, expected: Int) async -> Int {
        let running = Atomic<Int>(0)
        let peak = Atomic<Int>(0)
        let released = Atomic<Bool>(false)
        let done = Atomic<Int>(0)
        for _ in 0..<count {
            try? pool.submit { _ in
                let now = running.add(1, ordering: .relaxed).newValue
                peak.max(now, ordering: .relaxed)
                while !released.load(ordering: .acquiring) { usleep(1000) }
                running.subtract(1, ordering: .relaxed)
                done.add(1, ordering: .relaxed)
            }
        }
        _ = await eventually { running.load(ordering: .relaxed) >= expected }
        try? await Task.sleep(for: .milliseconds(300))
        released.store(true, ordering: .releasing)
        _ = await eventually { done.load(ordering: .relaxed) == count }
        return peak.load(ordering: .relaxed)
    }

    @Test func wideningStartsThreadsAndNarrowingLimitsWhatRuns() async throws {
        let pool = try BlockingPool(width: 1, name: "test-widths") {}
        defer { pool.shutdown() }
        #expect(await Self.peak(of: pool, jobs: 4, expected: 1) == 1)
        try pool.setWidths(urgent: 3, prefetch: 1)
        #expect(pool.threadCount == 3)
        #expect(pool.widths == (3, 1))
        #expect(await Self.peak(of: pool, jobs: 6, expected: 3) == 3, "three urgent jobs at once after widening")
        try pool.setWidths(urgent: 2, prefetch: 1)
        #expect(pool.threadCount == 3, "threads stay; the width limits what runs")
        #expect(await Self.peak(of: pool, jobs: 6, expected: 2) == 2, "two at once after narrowing")
    }

    @Test func aWidthBelowOneIsRefusedAndChangesNothing() throws {
        let pool = try BlockingPool(width: 2, name: "test-widths") {}
        defer { pool.shutdown() }
        #expect(throws: ConfigurationError.self) { try pool.setWidths(urgent: 0, prefetch: 1) }
        #expect(throws: ConfigurationError.self) { try pool.setWidths(urgent: 2, prefetch: 0) }
        #expect(pool.widths == (2, 1))
    }

    @Test func afterShutdownNoThreadIsStarted() throws {
        let pool = try BlockingPool(width: 1, name: "test-widths") {}
        pool.shutdown()
        try pool.setWidths(urgent: 4, prefetch: 1)
        #expect(pool.threadCount == 1)
    }
}
