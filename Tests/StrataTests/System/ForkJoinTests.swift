import Foundation
import Synchronization
import Testing

@testable import Strata
import StrataTestSupport

@Suite("ForkJoin", .timeLimit(.minutes(5)))
struct ForkJoinTests {
    /// A one-shot latch for blocking threads.
    final class Latch: Sendable {
        private let isOpen = Lock(false)
        func open() {
            isOpen.withLock { $0 = true }
            isOpen.broadcast()
        }
        func wait() { isOpen.withLock(waitingUntil: { $0 }) { _ in } }
    }

    @Test func everyPartRunsOnceAndHelpersAreThePoolsJobsInTheForkingLane() throws {
        for lane in [Lane.urgent, .prefetch] {
            // A pool per lane: helpers of one fork that found nothing left may still start after
            // it returns, and must not be counted as the next fork's.
            let pool = try BlockingPool<Void>(width: 4, prefetchWidth: 4, name: "fj") {}
            defer { pool.shutdown() }
            let lanes = Lock<[Lane]>([])
            pool.observeJobStarts { lane, awaited in if !awaited { lanes.withLock { $0.append(lane) } } }
            let runs = Lock<[Int: Int]>([:])
            let names = Lock<Set<String>>([])
            let latch = Latch()
            ForkJoin.pool(pool, lane: lane).forEach(4) { part in
                runs.withLock { $0[part, default: 0] += 1 }
                names.withLock { _ = $0.insert(currentThreadName()) }
                // Part 0 waits until another part has started on another thread, so helpers
                // must run beside the caller (the pool has idle threads; the suite's time limit
                // fails a fork that ran every part on one thread).
                if part == 0 { latch.wait() } else { latch.open() }
            }
            pool.observeJobStarts(nil)
            #expect(runs.withLock { $0 } == [0: 1, 1: 1, 2: 1, 3: 1])
            #expect(names.withLock { $0.contains { $0.hasPrefix("fj-") } }, "no part ran on the pool")
            #expect(lanes.withLock { !$0.isEmpty && $0.allSatisfy { $0 == lane } }, "\(lanes.withLock { $0 })")
        }
    }

    @Test func aBusyPoolLeavesEveryPartToTheCaller() throws {
        // One thread, and it is the caller: the helpers stay queued until the parts are done,
        // then find nothing left (no deadlock, no part run twice or after the return).
        let pool = try BlockingPool<Void>(width: 1, name: "fj-busy") {}
        defer { pool.shutdown() }
        let runs = Atomic<Int>(0)
        let returned = Atomic<Bool>(false)
        let threads = Lock<Set<String>>([])
        let done = Latch()
        try pool.submit { _ in
            ForkJoin.pool(pool, lane: .urgent).forEach(8) { _ in
                let late = returned.load(ordering: .acquiring)
                #expect(!late)
                runs.add(1, ordering: .relaxed)
                threads.withLock { _ = $0.insert(currentThreadName()) }
            }
            returned.store(true, ordering: .releasing)
            done.open()
        }
        done.wait()
        pool.shutdown()
        #expect(runs.load(ordering: .relaxed) == 8)
        #expect(threads.withLock { $0.count } == 1)
    }

    @Test func aShutDownPoolRefusesHelpersAndTheCallerDoesTheWork() throws {
        let pool = try BlockingPool<Void>(width: 2, name: "fj-down") {}
        pool.shutdown()
        let runs = Atomic<Int>(0)
        ForkJoin.pool(pool, lane: .urgent).forEach(5) { _ in runs.add(1, ordering: .relaxed) }
        #expect(runs.load(ordering: .relaxed) == 5)
    }
}
