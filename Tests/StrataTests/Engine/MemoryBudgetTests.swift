#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import Strata
import StrataTestSupport

// Asynchronous tests that wait with `eventually`: a test that spins or sleeps on one of Swift's
// cooperative threads (two on a 2-core machine) starves every other suite's tasks.
@Suite("MemoryBudget")
struct MemoryBudgetTests {
    @Test("concurrent reservations never hold more than the limit, and all of them run")
    func neverOverLimit() throws {
        let budget = MemoryBudget(limit: 100)
        let holding = Atomic<Int>(0), most = Atomic<Int>(0), done = Atomic<Int>(0)
        let pool = try BlockingPool<Void>(width: 8, name: "budget-test") {}
        defer { pool.shutdown() }
        for i in 0..<64 {
            let bytes = 10 + (i * 7) % 60
            try pool.submit(lane: i % 3 == 0 ? .prefetch : .urgent) { _ in
                try! budget.withReservation(bytes, lane: .urgent) { () throws(Never) in
                    let now = holding.add(bytes, ordering: .relaxed).newValue
                    _ = most.max(now, ordering: .relaxed)
                    usleep(500)
                    holding.subtract(bytes, ordering: .relaxed)
                }
                done.add(1, ordering: .relaxed)
            }
        }
        pool.shutdown()
        #expect(done.load(ordering: .relaxed) == 64)
        #expect(most.load(ordering: .relaxed) <= 100)
        let stats = budget.statistics
        #expect(stats.peak <= 100 && stats.peak > 0)
        #expect(stats.inUse == 0 && stats.waiting == 0)
        #expect(stats.waits > 0)
    }

    @Test("a reservation larger than the whole limit is refused at once, naming both sizes")
    func refused() {
        let budget = MemoryBudget(limit: 64 << 20)
        #expect(throws: MemoryBudgetError(bytes: 65 << 20, limit: 64 << 20)) { try budget.reserve(65 << 20, lane: .urgent) }
        #expect(budget.statistics.refusals == 1 && budget.statistics.inUse == 0)
        let text = "\(MemoryBudgetError(bytes: 65 << 20, limit: 64 << 20))"
        #expect(text.contains("65 MiB") && text.contains("render.memoryLimit (64 MiB)"))
    }

    @Test("urgent waiters go first, in the order they came; prefetch waits while one is waiting")
    func laneOrder() async throws {
        let budget = MemoryBudget(limit: 10)
        try budget.reserve(10, lane: .urgent)
        let order = Lock<[String]>([])
        var threads: [OSThread] = []
        for (name, lane) in [("prefetch-1", Lane.prefetch), ("urgent-1", .urgent), ("urgent-2", .urgent)] {
            threads.append(
                try OSThread(name: name) {
                    try! budget.reserve(10, lane: lane)
                    order.withLock { $0.append(name) }
                    budget.release(10)
                })
            // Each waiter queues before the next starts.
            let expected = threads.count
            #expect(await eventually(30) { budget.statistics.waiting >= expected })
        }
        budget.release(10)
        for thread in threads { thread.join() }
        #expect(order.withLock { $0 } == ["urgent-1", "urgent-2", "prefetch-1"])
    }

    @Test("lowering the limit refuses a waiter now larger than it; raising it lets waiters in")
    func reconfigure() async throws {
        let budget = MemoryBudget(limit: 100)
        try budget.reserve(80, lane: .urgent)
        let outcome = Lock<String?>(nil)
        let big = try OSThread(name: "big") {
            do {
                try budget.reserve(60, lane: .urgent)
                outcome.withLock { $0 = "admitted" }
            } catch {
                outcome.withLock { $0 = "refused" }
            }
        }
        #expect(await eventually(30) { budget.statistics.waiting >= 1 })
        budget.limit = 50
        big.join()
        #expect(outcome.withLock { $0 } == "refused")
        budget.limit = 200
        try budget.reserve(60, lane: .urgent)
        #expect(budget.statistics.inUse == 140)
    }
}
