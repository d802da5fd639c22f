import Synchronization
import Testing
@testable import Strata
import StrataTestSupport

/// The lanes of ``BlockingPool``: which queued job starts next, moving jobs between lanes, and
/// cancelling and shutting down across lanes.
///
/// Workers are held at ``BlockingPoolTests/Gate``s the tests open; the order in which jobs start
/// is read from a log each job appends to as it starts. Every wait is bounded.
@Suite struct BlockingPoolLaneTests {
    typealias Gate = BlockingPoolTests.Gate

    /// The names of the jobs in the order they started, and what the prefetch jobs saw.
    ///
    /// With more than one thread, the order of two entries made on different threads need not be
    /// the order in which the pool handed out their jobs (a thread can be held up between taking
    /// a job and logging it). So such tests check what each prefetch job saw as it started: no
    /// urgent job queued (if one is queued then, none can have been taken since, and there was
    /// one when it was taken).
    final class Log: Sendable {
        private struct Entries {
            var names: [String] = []
            var urgentQueuedAtPrefetchStarts: [Int] = []
        }
        private let entries = Lock(Entries())
        func append(_ name: String) { entries.withLock { $0.names.append(name) } }
        /// Logs a prefetch job's start, and the urgent jobs queued in `pool` then.
        func appendPrefetch(_ name: String, in pool: BlockingPool<Void>) {
            let urgentQueued = pool.queueDepths.urgent
            entries.withLock {
                $0.names.append(name)
                $0.urgentQueuedAtPrefetchStarts.append(urgentQueued)
            }
        }
        var names: [String] { entries.withLock { $0.names } }
        /// Whether every prefetch job logged with ``appendPrefetch(_:in:)`` started with no urgent
        /// job queued.
        var prefetchJobsStartedWithNoUrgentJobQueued: Bool {
            entries.withLock { $0.urgentQueuedAtPrefetchStarts.allSatisfy { $0 == 0 } }
        }
    }

    /// Occupies every thread of `pool` with an urgent job held at `gate`; returns once all have
    /// started.
    static func occupyAllThreads(of pool: BlockingPool<Void>, at gate: Gate) async throws -> Bool {
        for _ in 0..<pool.width { try pool.submit { _ in gate.pass() } }
        return await eventually { gate.waiting == pool.width }
    }

    @Test(arguments: [1, 2])
    func prefetchJobsWaitWhileUrgentJobsAreQueued(width: Int) async throws {
        let pool = try BlockingPool(width: width, name: "lanes") {}
        let log = Log()
        let blockers = Gate()
        #expect(try await Self.occupyAllThreads(of: pool, at: blockers))
        try pool.submit(lane: .prefetch) { _ in log.appendPrefetch("p1", in: pool) }
        for i in 1...3 { try pool.submit(lane: .urgent) { _ in log.append("u\(i)") } }
        try pool.submit(lane: .prefetch) { _ in log.appendPrefetch("p2", in: pool) }
        #expect(pool.queueDepths == (3, 2))
        #expect(pool.runningCounts == (width, 0))
        blockers.release()
        pool.shutdown()
        #expect(log.prefetchJobsStartedWithNoUrgentJobQueued, "a prefetch job started while urgent jobs were queued")
        let order = log.names
        #expect(order.filter { $0.hasPrefix("p") } == ["p1", "p2"])
        #expect(Set(order) == ["u1", "u2", "u3", "p1", "p2"] && order.count == 5)
        if width == 1 { #expect(order == ["u1", "u2", "u3", "p1", "p2"]) }
    }

    /// Threads freed one at a time each take an urgent job, although the prefetch job was queued
    /// first; it starts only once the urgent queue is empty.
    @Test func aFreedThreadTakesUrgentWorkBeforeAnEarlierPrefetchJob() async throws {
        let pool = try BlockingPool(width: 2, name: "lanes") {}
        let log = Log()
        let first = Gate(), second = Gate(), urgentJobs = Gate()
        try pool.submit { _ in first.pass() }
        #expect(await eventually { first.waiting == 1 })
        try pool.submit { _ in second.pass() }
        #expect(await eventually { second.waiting == 1 })
        try pool.submit(lane: .prefetch) { _ in log.append("p1") }
        try pool.submit { _ in
            log.append("u1")
            urgentJobs.pass()
        }
        try pool.submit { _ in
            log.append("u2")
            urgentJobs.pass()
        }

        first.release()
        #expect(await eventually { urgentJobs.waiting == 1 })
        #expect(log.names == ["u1"])
        #expect(pool.queueDepths == (1, 1))
        second.release()
        #expect(await eventually { urgentJobs.waiting == 2 })
        #expect(log.names == ["u1", "u2"])
        #expect(pool.queueDepths == (0, 1))
        #expect(pool.runningCounts == (2, 0))
        urgentJobs.release()
        pool.shutdown()
        #expect(log.names == ["u1", "u2", "p1"])
    }

    /// Prefetch waits for queued urgent work, not for running urgent work: a free thread takes it.
    @Test func aPrefetchJobRunsBesideRunningUrgentJobs() async throws {
        let pool = try BlockingPool(width: 2, name: "lanes") {}
        defer { pool.shutdown() }
        let urgent = Gate(), prefetch = Gate()
        try pool.submit { _ in urgent.pass() }
        try pool.submit(lane: .prefetch) { _ in prefetch.pass() }
        #expect(await eventually { urgent.waiting == 1 && prefetch.waiting == 1 })
        #expect(pool.runningCounts == (1, 1))
        urgent.release()
        prefetch.release()
    }

    /// Four threads, three of them free, four prefetch jobs: one runs, the others wait for it.
    @Test func onlyOnePrefetchJobRunsAtATime() async throws {
        let pool = try BlockingPool(width: 4, name: "lanes") {}
        let log = Log()
        let gate = Gate()
        let running = Atomic<Int>(0), peak = Atomic<Int>(0)
        for i in 1...4 {
            try pool.submit(lane: .prefetch) { _ in
                peak.max(running.add(1, ordering: .sequentiallyConsistent).newValue, ordering: .sequentiallyConsistent)
                log.append("p\(i)")
                gate.pass()
                running.subtract(1, ordering: .sequentiallyConsistent)
            }
        }
        #expect(await eventually { gate.waiting == 1 })
        // Urgent jobs pass by on the free threads, and prefetch work still does not spread to them.
        for _ in 0..<8 { try await pool.run(lane: .urgent) { _ in } }
        #expect(gate.waiting == 1)
        #expect(pool.queueDepths == (0, 3))
        #expect(pool.runningCounts.prefetch == 1)
        gate.release()
        pool.shutdown()
        let peakPrefetching = peak.load(ordering: .sequentiallyConsistent)
        #expect(peakPrefetching == 1)
        #expect(log.names == ["p1", "p2", "p3", "p4"])
    }

    @Test func urgentJobsRunInParallelUpToTheWidth() async throws {
        let pool = try BlockingPool(width: 3, name: "lanes") {}
        let log = Log()
        let gate = Gate()
        for i in 1...4 {
            try pool.submit { _ in
                log.append("u\(i)")
                gate.pass()
            }
        }
        try pool.submit(lane: .prefetch) { _ in log.appendPrefetch("p1", in: pool) }
        #expect(await eventually { gate.waiting == 3 })
        #expect(Set(log.names) == ["u1", "u2", "u3"])
        #expect(pool.runningCounts == (3, 0))
        #expect(pool.queueDepths == (1, 1))
        gate.release()
        pool.shutdown()
        #expect(log.prefetchJobsStartedWithNoUrgentJobQueued)
        #expect(Set(log.names) == ["u1", "u2", "u3", "u4", "p1"])
    }
}

// MARK: - Moving jobs between lanes

extension BlockingPoolLaneTests {
    @Test func aQueuedPrefetchJobMovedToUrgentRunsBeforeTheOtherPrefetchJobs() async throws {
        let pool = try BlockingPool(width: 1, name: "lanes") {}
        let log = Log()
        let blocker = Gate()
        #expect(try await Self.occupyAllThreads(of: pool, at: blocker))
        try pool.submit(lane: .prefetch) { _ in log.append("p1") }
        let ticket = LaneTicket()
        let joined = Task { try await pool.run(lane: .prefetch, ticket: ticket) { _ in log.append("p2") } }
        #expect(await eventually { pool.queueDepths.prefetch == 2 })
        try pool.submit(lane: .prefetch) { _ in log.append("p3") }
        try pool.submit(lane: .urgent) { _ in log.append("u1") }
        #expect(ticket.lane == .prefetch && !ticket.hasStarted)

        #expect(ticket.move(to: .urgent))
        #expect(ticket.lane == .urgent)
        #expect(pool.queueDepths == (2, 2))
        #expect(!ticket.move(to: .urgent), "a job already queued in that lane does not move")
        blocker.release()
        try await joined.value
        pool.shutdown()
        // It joins the back of the urgent queue.
        #expect(log.names == ["u1", "p2", "p1", "p3"])
        #expect(ticket.hasStarted && ticket.lane == .urgent)
    }

    @Test func aQueuedUrgentJobMovedToPrefetchIsDeferred() async throws {
        let pool = try BlockingPool(width: 1, name: "lanes") {}
        let log = Log()
        let blocker = Gate()
        #expect(try await Self.occupyAllThreads(of: pool, at: blocker))
        let ticket = LaneTicket()
        let deferred = Task { try await pool.run(lane: .urgent, ticket: ticket) { _ in log.append("u1") } }
        #expect(await eventually { pool.queueDepths.urgent == 1 })
        try pool.submit(lane: .urgent) { _ in log.append("u2") }
        try pool.submit(lane: .prefetch) { _ in log.append("p1") }

        #expect(ticket.move(to: .prefetch))
        #expect(ticket.lane == .prefetch)
        #expect(pool.queueDepths == (1, 2))
        blocker.release()
        try await deferred.value
        pool.shutdown()
        #expect(log.names == ["u2", "p1", "u1"])
    }

    @Test func aMoveAfterTheJobHasStartedReturnsFalse() async throws {
        let pool = try BlockingPool(width: 2, name: "lanes") {}
        defer { pool.shutdown() }
        let gate = Gate()
        let ticket = LaneTicket()
        let task = Task {
            try await pool.run(lane: .prefetch, ticket: ticket) { _ -> Int in
                gate.pass()
                return 7
            }
        }
        #expect(await eventually { gate.waiting == 1 })
        #expect(ticket.hasStarted)
        #expect(!ticket.move(to: .urgent))
        #expect(ticket.lane == .prefetch)
        #expect(pool.runningCounts == (0, 1))
        gate.release()
        #expect(try await task.value == 7)
        #expect(!ticket.move(to: .urgent), "a finished job moved")
        #expect(ticket.lane == .prefetch)
        #expect(await eventually { pool.runningCounts == (0, 0) })
    }

    /// A request that joins before `run` has queued the job is not lost: the job is queued in the
    /// lane the ticket was moved to.
    @Test func aMoveBeforeRunChoosesTheLane() async throws {
        let pool = try BlockingPool(width: 1, name: "lanes") {}
        let log = Log()
        let blocker = Gate()
        #expect(try await Self.occupyAllThreads(of: pool, at: blocker))
        try pool.submit(lane: .prefetch) { _ in log.append("p1") }
        let ticket = LaneTicket()
        #expect(ticket.lane == .urgent)
        #expect(ticket.move(to: .urgent))
        let task = Task { try await pool.run(lane: .prefetch, ticket: ticket) { _ in log.append("joined") } }
        #expect(await eventually { pool.queuedJobCount == 2 })
        #expect(pool.queueDepths == (1, 1))
        #expect(ticket.lane == .urgent)
        blocker.release()
        try await task.value
        pool.shutdown()
        #expect(log.names == ["joined", "p1"])
    }
}

// MARK: - Cancelling and shutting down across lanes

extension BlockingPoolLaneTests {
    /// A job cancelled while queued — in either lane, moved to the other lane first or not —
    /// never runs, is let go of at once, and leaves its neighbours in both lanes queued.
    @Test(arguments: [Lane.urgent, .prefetch], [false, true])
    func aCancelledQueuedJobNeverRuns(lane: Lane, movedFirst: Bool) async throws {
        let pool = try BlockingPool(width: 1, name: "lanes") {}
        let log = Log()
        let blocker = Gate()
        #expect(try await Self.occupyAllThreads(of: pool, at: blocker))
        try pool.submit(lane: .urgent) { _ in log.append("u1") }
        try pool.submit(lane: .prefetch) { _ in log.append("p1") }
        let payload = BlockingPoolTests.Payload()
        weak let captured = payload
        let ticket = LaneTicket()
        let task = Task {
            try await pool.run(lane: lane, ticket: ticket) { _ in
                withExtendedLifetime(payload) {}
                log.append("cancelled job")
            }
        }
        _ = consume payload
        #expect(await eventually { pool.queuedJobCount == 3 })
        let other: Lane = lane == .urgent ? .prefetch : .urgent
        if movedFirst {
            #expect(ticket.move(to: other))
            #expect(ticket.lane == other)
        }
        try pool.submit(lane: .urgent) { _ in log.append("u2") }
        try pool.submit(lane: .prefetch) { _ in log.append("p2") }

        task.cancel()
        await #expect(throws: BlockingPoolError<Never>.cancelled) { try await task.value }
        #expect(captured == nil, "the cancelled job is still held")
        #expect(pool.queueDepths == (2, 2))
        #expect(!ticket.hasStarted)
        #expect(!ticket.move(to: .urgent) && !ticket.move(to: .prefetch), "a cancelled job moved")
        blocker.release()
        pool.shutdown()
        #expect(log.names == ["u1", "u2", "p1", "p2"])
    }

    /// Shutdown refuses new work at once, then runs what both lanes hold (urgent first, prefetch
    /// one at a time), `run` calls included, before the threads stop.
    @Test func shutdownRunsTheQueuedJobsOfBothLanes() async throws {
        let pool = try BlockingPool(width: 2, name: "lanes") {}
        let log = Log()
        let blockers = Gate()
        #expect(try await Self.occupyAllThreads(of: pool, at: blockers))
        try pool.submit(lane: .prefetch) { _ in log.appendPrefetch("p1", in: pool) }
        try pool.submit(lane: .urgent) { _ in log.append("u1") }
        let prefetchRun = Task {
            try await pool.run(lane: .prefetch) { _ -> String in
                log.appendPrefetch("p2", in: pool)
                return "p2"
            }
        }
        #expect(await eventually { pool.queueDepths.prefetch == 2 })
        let urgentRun = Task {
            try await pool.run(lane: .urgent) { _ -> String in
                log.append("u2")
                return "u2"
            }
        }
        #expect(await eventually { pool.queueDepths.urgent == 2 })

        let stopped = Atomic<Bool>(false)
        let stopper = try OSThread(name: "stopper") {
            pool.shutdown()
            stopped.store(true, ordering: .releasing)
        }
        #expect(await eventually { pool.isShuttingDown })
        #expect(throws: BlockingPoolError<Never>.shutDown) { try pool.submit(lane: .prefetch) { _ in log.append("late") } }
        await #expect(throws: BlockingPoolError<Never>.shutDown) { try await pool.run(lane: .urgent) { _ in log.append("late") } }
        // Shutdown waits for the threads, which are still held.
        let stoppedEarly = stopped.load(ordering: .acquiring)
        #expect(!stoppedEarly)
        #expect(pool.queueDepths == (2, 2))

        blockers.release()
        #expect(await eventually { stopped.load(ordering: .acquiring) }, "shutdown did not finish")
        stopper.join()
        #expect(try await prefetchRun.value == "p2")
        #expect(try await urgentRun.value == "u2")
        #expect(log.prefetchJobsStartedWithNoUrgentJobQueued)
        let order = log.names
        #expect(Set(order) == ["u1", "u2", "p1", "p2"] && order.count == 4)
        #expect(order.filter { $0.hasPrefix("p") } == ["p1", "p2"])
        #expect(pool.queueDepths == (0, 0) && pool.runningCounts == (0, 0))
    }
}

// MARK: - Everything at once

extension BlockingPoolLaneTests {
    /// Runs in both lanes, with moves and cancellations landing at every moment (before a job
    /// is queued, while it is, while threads are taking jobs, after): each run either returns
    /// after its job ran once, or throws `.cancelled` and its job never ran; no two jobs ran in
    /// the prefetch lane at once; nothing is left queued or counted as running.
    @Test func racingMovesAndCancellationsResolveEveryRunExactlyOnce() async throws {
        let pool = try BlockingPool(width: 3, name: "lanes") {}
        defer { pool.shutdown() }
        let blockers = Gate()
        #expect(try await Self.occupyAllThreads(of: pool, at: blockers))
        let runs = 1500
        let ran = Lock<[Int]>([])
        let prefetching = Atomic<Int>(0), prefetchPeak = Atomic<Int>(0)
        var tickets: [LaneTicket] = []
        var tasks: [Task<Void, any Error>] = []
        var submitted = 0, cancelledEarly = 0
        for i in 0..<runs {
            let ticket = LaneTicket()
            tickets.append(ticket)
            tasks.append(
                Task { @Sendable in
                    try await pool.run(lane: i % 3 == 0 ? .urgent : .prefetch, ticket: ticket) { _ in
                        // Once started, the ticket's lane is the lane the job runs in.
                        let inPrefetch = ticket.lane == .prefetch
                        if inPrefetch {
                            prefetchPeak.max(
                                prefetching.add(1, ordering: .sequentiallyConsistent).newValue, ordering: .sequentiallyConsistent)
                        }
                        ran.withLock { $0.append(i) }
                        if inPrefetch { prefetching.subtract(1, ordering: .sequentiallyConsistent) }
                    }
                })
            if i % 4 == 1 {
                try pool.submit(lane: .prefetch) { _ in }
                submitted += 1
            }
            // While the threads are held: move and cancel runs, queued or not yet.
            let moved = i - (i * 5) % 4
            if i % 5 == 0 && moved >= 0 { tickets[moved].move(to: i % 2 == 0 ? .urgent : .prefetch) }
            let victim = i - (i * 7) % 5
            if i % 17 == 1 && victim >= 0 && !tasks[victim].isCancelled {
                tasks[victim].cancel()
                cancelledEarly += 1
            }
        }
        #expect(await eventually { pool.queuedJobCount == runs - cancelledEarly + submitted })
        // Now while the threads take jobs.
        blockers.release()
        for i in 0..<runs {
            tickets[i * 7919 % runs].move(to: i % 2 == 0 ? .urgent : .prefetch)
            if i % 3 == 0 { tasks[i * 104_729 % runs].cancel() }
            if i % 100 == 0 { await Task.yield() }
        }
        let returned = await expectEachRunResolvedOnce(tasks, ran: ran)
        let peakPrefetching = prefetchPeak.load(ordering: .sequentiallyConsistent)
        #expect(peakPrefetching <= 1, "prefetch jobs ran side by side")
        #expect(tickets.enumerated().allSatisfy { returned.contains($0.offset) == $0.element.hasStarted })
        #expect(await eventually { pool.queueDepths == (0, 0) && pool.runningCounts == (0, 0) })
    }
}
