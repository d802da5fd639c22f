import Synchronization
import Testing
@testable import Strata

@Suite struct BlockingPoolTests {
    final class Counter { var jobs = 0 }

    @Test func runsJobsWithPerThreadContextAndReturnsResults() async throws {
        let made = Atomic<Int>(0)
        let pool = try BlockingPool(width: 2, name: "test-pool") { () -> Counter in
            made.add(1, ordering: .relaxed)
            return Counter()
        }
        defer { pool.shutdown() }
        let sum = await withTaskGroup(of: Int.self) { group in
            for i in 1...100 {
                group.addTask { await pool.run { (counter: Counter) -> Int in counter.jobs += 1; return i } }
            }
            return await group.reduce(0, +)
        }
        #expect(sum == 5050)
        #expect(made.load(ordering: .relaxed) == 2)
        let perThread = await pool.run { (counter: Counter) -> Int in counter.jobs }
        #expect(perThread >= 1 && perThread <= 101)
    }

    @Test func errorsReachTheCaller() async throws {
        struct Nope: Error, Equatable {}
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        defer { pool.shutdown() }
        await #expect(throws: Nope.self) {
            try await pool.run { (_) throws(Nope) -> Int in throw Nope() }
        }
    }

    @Test func shutdownFinishesQueuedJobs() throws {
        let done = Atomic<Int>(0)
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        for _ in 0..<50 { pool.submit { _ in done.add(1, ordering: .relaxed) } }
        pool.shutdown()
        #expect(done.load(ordering: .relaxed) == 50)
    }
}

extension BlockingPoolTests {
    @Test func shutdownFromAWorkerDoesNotDeadlock() async throws {
        let pool = try BlockingPool(width: 2, name: "test-pool") {}
        let finished = await pool.run { _ in
            pool.shutdown()
            return true
        }
        #expect(finished)
    }
}
