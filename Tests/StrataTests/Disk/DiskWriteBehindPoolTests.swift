import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// Write-behind on a shared ``BlockingPool``: one drain job at a time on its prefetch lane, no
/// writer thread; flush and close help instead of waiting for a job queued behind them.
@Suite("Disk write-behind on a pool", .timeLimit(.minutes(3)))
struct DiskWriteBehindPoolTests {
    static let box = SizeQuery(box: PixelSize(width: 64, height: 64))

    /// Holds one thread of a pool in a job of `lane` until ``release()``.
    final class Blocker: Sendable {
        let released = Lock(false)

        init(_ pool: BlockingPool<Void>, lane: Lane) throws {
            try pool.submit(lane: lane) { [released] _ in released.withLock(waitingUntil: { $0 }) { _ in } }
        }

        func release() {
            released.withLock { $0 = true }
            released.broadcast()
        }
    }

    @Test("Given a pool, the tier starts no writer: its stores are published by prefetch jobs on that pool")
    func storesRunOnThePool() async throws {
        let scratch = ScratchDirectory()
        let pool = try BlockingPool<Void>(width: 2, name: "test-dwb-lanes") {}
        defer { pool.shutdown() }
        let lanes = Lock<[Lane]>([])
        pool.observeJobStarts { lane, _ in lanes.withLock { $0.append(lane) } }
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration(), pool: pool)
        defer { tier.close() }
        #expect(!tier.ownsWriterThread)
        for i in 0..<5 { #expect(tier.store(patternImage(width: 64, height: 64, seed: UInt8(i)), forKey: "k\(i)")) }
        // No flush: only the pool publishes.
        #expect(await eventually { tier.statistics.stores == 5 })
        let started = lanes.withLock { $0 }
        #expect(!started.isEmpty && started.allSatisfy { $0 == .prefetch }, "\(started)")

        let standalone = ScratchDirectory()
        let own = try DiskTier(directory: standalone.path, configuration: quietConfiguration())
        #expect(own.ownsWriterThread)
        own.store(patternImage(width: 64, height: 64, seed: 9), forKey: "k")
        #expect(await eventually { own.statistics.stores == 1 })
        own.close()
    }

    @Test("Stores queued while the pool is busy wait as one drain job, land in order, and requeue the drain every batch")
    func oneDrainJobInOrder() async throws {
        let scratch = ScratchDirectory()
        let pool = try BlockingPool<Void>(width: 1, name: "test-dwb-one") {}
        defer { pool.shutdown() }
        let drains = Lock(0)
        pool.observeJobStarts { lane, _ in if lane == .prefetch { drains.withLock { $0 += 1 } } }
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration(), pool: pool)
        defer { tier.close() }
        let blocker = try Blocker(pool, lane: .urgent)
        #expect(await eventually { pool.runningCounts.urgent == 1 })
        let image = patternImage(width: 64, height: 64, seed: 1)
        for version in 1...10 { #expect(tier.store(image, forKey: "same", sourceVersion: UInt64(version))) }
        #expect(pool.queueDepths.prefetch == 1)
        #expect(tier.statistics.stores == 0)
        blocker.release()
        #expect(await eventually { tier.statistics.stores == 10 })
        // The same file, published ten times: the last store queued is the one that stays.
        #expect(try tier.hit(forKey: "same", matching: Self.box)?.sourceVersion == 10)
        // A batch, then its successor queued behind whatever came meanwhile, for the rest.
        #expect(DiskTier.Core.drainBatch < 10)
        #expect(drains.withLock { $0 } == 2)
    }

    @Test("A queue more than half full drains in the urgent lane: sustained urgent work cannot starve the writes into drops")
    func aHalfFullQueueDrainsUrgently() async throws {
        let scratch = ScratchDirectory()
        let pool = try BlockingPool<Void>(width: 1, name: "test-dwb-urgent") {}
        defer { pool.shutdown() }
        let drains = Lock<[Lane]>([])
        pool.observeJobStarts { lane, awaited in if !awaited { drains.withLock { $0.append(lane) } } }
        var configuration = quietConfiguration()
        configuration.writeQueueCapacity = 8
        let tier = try DiskTier(directory: scratch.path, configuration: configuration, pool: pool)
        defer { tier.close() }
        // The pool's one thread held by urgent work, and more urgent work queued behind it: no
        // prefetch job can start.
        let blocker = try Blocker(pool, lane: .urgent)
        #expect(await eventually { pool.runningCounts.urgent == 1 })
        let queued = Task { try await pool.run(lane: .urgent) { _ in } }
        #expect(await eventually { pool.queueDepths.urgent == 1 })
        for i in 0..<3 { #expect(tier.store(patternImage(width: 64, height: 64, seed: UInt8(i)), forKey: "k\(i)")) }
        #expect(pool.queueDepths == (urgent: 1, prefetch: 1), "at most half full: the prefetch drain alone")
        for i in 3..<6 { #expect(tier.store(patternImage(width: 64, height: 64, seed: UInt8(i)), forKey: "k\(i)")) }
        #expect(pool.queueDepths.urgent == 2, "more than half full: an urgent drain too")
        blocker.release()
        try await queued.value
        #expect(await eventually { tier.statistics.stores == 6 })
        #expect(drains.withLock { $0.first } == .urgent, "\(drains.withLock { $0 })")
        #expect(tier.statistics.droppedStores == 0)
    }

    @Test("flush and close on the pool's only thread publish the queue there, not waiting for the drain job behind them")
    func flushAndCloseOnThePool() async throws {
        let scratch = ScratchDirectory()
        let pool = try BlockingPool<Void>(width: 1, name: "test-dwb-self") {}
        defer { pool.shutdown() }
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration(), pool: pool)
        let (flushed, closed) = try await pool.run { _ -> (Int, Int) in
            for i in 0..<4 { tier.store(patternImage(width: 64, height: 64, seed: UInt8(i)), forKey: "k\(i)") }
            tier.flush()
            let flushed = tier.statistics.stores
            tier.store(patternImage(width: 64, height: 64, seed: 7), forKey: "last")
            tier.close()
            return (flushed, tier.statistics.stores)
        }
        #expect(flushed == 4)
        #expect(closed == 5)
        #expect(scratch.names().count == 5)
    }

    @Test("While the prefetch lane is held, flush and close publish on the calling thread")
    func flushHelpsPastABusyLane() throws {
        let scratch = ScratchDirectory()
        let pool = try BlockingPool<Void>(width: 2, prefetchWidth: 1, name: "test-dwb-busy") {}
        defer { pool.shutdown() }
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration(), pool: pool)
        let blocker = try Blocker(pool, lane: .prefetch)
        defer { blocker.release() }
        #expect(waitUntil { pool.runningCounts.prefetch == 1 } != nil)
        for i in 0..<3 { tier.store(patternImage(width: 64, height: 64, seed: UInt8(i)), forKey: "k\(i)") }
        #expect(pool.queueDepths.prefetch == 1)
        tier.flush()
        #expect(tier.statistics.stores == 3)
        tier.store(patternImage(width: 64, height: 64, seed: 5), forKey: "k5")
        tier.close()
        #expect(tier.statistics.stores == 4)
        #expect(!tier.store(patternImage(width: 64, height: 64, seed: 6), forKey: "k6"), "a closed tier refuses stores")
    }

    @Test("Once its pool is shut down, a store is published on the caller's thread before it returns")
    func poolShutDown() throws {
        let scratch = ScratchDirectory()
        let pool = try BlockingPool<Void>(width: 1, name: "test-dwb-down") {}
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration(), pool: pool)
        pool.shutdown()
        #expect(tier.store(patternImage(width: 64, height: 64, seed: 3), forKey: "a"))
        #expect(tier.statistics.stores == 1)
        #expect(try tier.image(forKey: "a", matching: Self.box) != nil)
        tier.flush()
        tier.close()
        #expect(tier.statistics.failedStores == 0)
    }

    @Test("Stores from several threads racing the drain's end are all published, without a flush")
    func racingStoresAreNotStranded() async throws {
        let scratch = ScratchDirectory()
        let pool = try BlockingPool<Void>(width: 2, name: "test-dwb-race") {}
        defer { pool.shutdown() }
        let tier = try DiskTier(
            directory: scratch.path, configuration: quietConfiguration { $0.writeQueueCapacity = 10_000 }, pool: pool)
        defer { tier.close() }
        let threads = 4, perThread = 100
        let image = patternImage(width: 8, height: 8, seed: 2)
        let writers = try (0..<threads).map { t in
            try OSThread(name: "test-dwb-\(t)") {
                for i in 0..<perThread {
                    tier.store(image, forKey: "t\(t)-\(i)")
                    // Let the drain catch up now and then, so that it often finds the queue
                    // empty and stops just as the next store arrives.
                    if i % 7 == 0 { sched_yield() }
                }
            }
        }
        for writer in writers { writer.join() }
        #expect(await eventually { tier.statistics.stores + tier.statistics.failedStores == threads * perThread })
        #expect(tier.statistics.droppedStores == 0)
        #expect(tier.statistics.failedStores == 0)
    }
}
