import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

@Suite struct BlockingPoolTests {
    /// A worker's context: the thread that made it and the jobs it ran.
    final class Worker: @unchecked Sendable {
        let thread = pthread_self()
        var jobs = 0
    }

    /// An object a job captures, to see when the pool lets go of the job.
    final class Payload: Sendable {}

    /// A gate a job can wait at until the test opens it. The wait is bounded (120 s, longer
    /// than any ``eventually(_:)``, so that it cannot open by itself while a test still waits
    /// for something else) so that a broken test cannot hang.
    final class Gate: Sendable {
        private let open = Atomic<Bool>(false)
        private let arrived = Atomic<Int>(0)
        func pass() {
            arrived.add(1, ordering: .relaxed)
            _ = waitUntil(seconds: 300) { open.load(ordering: .acquiring) }
        }
        func release() { open.store(true, ordering: .releasing) }
        var waiting: Int { arrived.load(ordering: .relaxed) }
    }

    @Test func everyRunExecutesOnceOnAThreadWithThatThreadsContext() async throws {
        let workers = Lock<[Worker]>([])
        let pool = try BlockingPool(width: 2, name: "test-pool") { () -> Worker in
            let worker = Worker()
            workers.withLock { $0.append(worker) }
            return worker
        }
        let results = await withTaskGroup(of: (Int, Bool).self) { group in
            for i in 0..<100 {
                group.addTask {
                    try! await pool.run { (worker: Worker) -> (Int, Bool) in
                        worker.jobs += 1
                        return (i, pthread_equal(worker.thread, pthread_self()) != 0)
                    }
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        pool.shutdown()
        #expect(results.map(\.0).sorted() == Array(0..<100), "each job ran once and its result reached its caller")
        let withForeignContext = results.filter { !$0.1 }.count
        #expect(withForeignContext == 0, "jobs got the context of another thread")
        let counts = workers.withLock { $0.map(\.jobs) }
        #expect(counts.count == 2)
        #expect(counts.reduce(0, +) == 100)
    }

    @Test func aOneThreadPoolRunsJobsInSubmissionOrder() throws {
        let order = Lock<[Int]>([])
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        for i in 0..<500 { try pool.submit { _ in order.withLock { $0.append(i) } } }
        pool.shutdown()
        #expect(order.withLock { $0 } == Array(0..<500))
    }

    /// Job i waits until the jobs of its wave (i / width) have all started: with `width`
    /// threads every wave runs at once, so the peak is exactly `width`; more threads than
    /// `width` would show as a higher peak, fewer as a wave that never completes.
    @Test(arguments: [1, 3, 4])
    func widthIsHonouredAndReached(width: Int) throws {
        let jobs = width * 6
        let running = Atomic<Int>(0), peak = Atomic<Int>(0), started = Atomic<Int>(0), ran = Atomic<Int>(0)
        let waveCompleted = Atomic<Int>(0)
        let pool = try BlockingPool(width: width, name: "test-pool") {}
        for i in 0..<jobs {
            try pool.submit { _ in
                let now = running.add(1, ordering: .sequentiallyConsistent).newValue
                peak.max(now, ordering: .sequentiallyConsistent)
                started.add(1, ordering: .sequentiallyConsistent)
                let waveEnd = (i / width + 1) * width
                if waitUntil({ started.load(ordering: .sequentiallyConsistent) >= waveEnd }) != nil {
                    waveCompleted.add(1, ordering: .relaxed)
                }
                ran.add(1, ordering: .relaxed)
                running.subtract(1, ordering: .sequentiallyConsistent)
            }
        }
        pool.shutdown()
        #expect(ran.load(ordering: .relaxed) == jobs)
        #expect(waveCompleted.load(ordering: .relaxed) == jobs, "some wave never had \(width) jobs running at once")
        #expect(peak.load(ordering: .relaxed) == width)
    }

    @Test func errorsReachTheCaller() async throws {
        struct Nope: Error, Equatable {}
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        defer { pool.shutdown() }
        await #expect(throws: BlockingPoolError.failed(Nope())) {
            try await pool.run { (_) throws(Nope) -> Int in throw Nope() }
        }
    }

    @Test func shutdownFinishesQueuedJobs() throws {
        let done = Atomic<Int>(0)
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        for _ in 0..<50 { try pool.submit { _ in done.add(1, ordering: .relaxed) } }
        pool.shutdown()
        #expect(done.load(ordering: .relaxed) == 50)
    }

    @Test func shutdownFromAWorkerDoesNotDeadlock() async throws {
        let pool = try BlockingPool(width: 2, name: "test-pool") {}
        let finished = try await pool.run { _ in
            pool.shutdown()
            return true
        }
        #expect(finished)
    }
}

// MARK: - Releasing, refusing and cancelling jobs

extension BlockingPoolTests {
    /// Runs a job that captures a fresh payload and returns a weak reference to it.
    static func runCapturing(on pool: BlockingPool<Void>) async throws -> () -> Payload? {
        let payload = Payload()
        weak let weakPayload = payload
        try await pool.run { _ in withExtendedLifetime(payload) {} }
        return { weakPayload }
    }

    @Test func aJobIsReleasedAsSoonAsItHasRun() async throws {
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        defer { pool.shutdown() }
        let ranJob = try await Self.runCapturing(on: pool)
        // The single worker lets go of a job before it takes the next one.
        try await pool.run { _ in }
        #expect(ranJob() == nil, "the pool still holds a finished job")

        let payload = Payload()
        weak let submitted = payload
        try pool.submit { _ in withExtendedLifetime(payload) {} }
        _ = consume payload
        try await pool.run { _ in }
        #expect(submitted == nil, "the pool still holds a finished submitted job")
    }

    @Test func runAndSubmitAfterShutdownThrow() async throws {
        let pool = try BlockingPool(width: 2, name: "test-pool") {}
        pool.shutdown()
        let ran = Atomic<Bool>(false)
        await #expect(throws: BlockingPoolError<Never>.shutDown) {
            try await pool.run { _ in ran.store(true, ordering: .relaxed) }
        }
        #expect(throws: BlockingPoolError<Never>.shutDown) {
            try pool.submit { _ in ran.store(true, ordering: .relaxed) }
        }
        #expect(ran.load(ordering: .relaxed) == false)
    }

    @Test func cancellingAQueuedRunRemovesItsJob() async throws {
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        defer { pool.shutdown() }
        let gate = Gate()
        let blocker = Task { try await pool.run { _ in gate.pass() } }
        #expect(await eventually { gate.waiting == 1 }, "the first job never started")

        let secondRan = Atomic<Bool>(false)
        let secondReturned = Atomic<Bool>(false)
        let payload = Payload()
        weak let captured = payload
        let second = Task {
            defer { secondReturned.store(true, ordering: .relaxed) }
            try await pool.run { _ in
                withExtendedLifetime(payload) {}
                secondRan.store(true, ordering: .relaxed)
            }
        }
        _ = consume payload
        #expect(await eventually { pool.queuedJobCount == 1 }, "the second job was never queued")
        second.cancel()
        // While the only worker is still blocked, the cancelled run returns and lets go of its job.
        #expect(await eventually { secondReturned.load(ordering: .relaxed) }, "the cancelled run did not return")
        #expect(captured == nil, "the cancelled job is still held")
        gate.release()
        try await blocker.value
        // A third job queued after the second runs after it would have: the second never ran.
        let sawSecond = try await pool.run { _ in secondRan.load(ordering: .relaxed) }
        #expect(!sawSecond)
        await #expect(throws: BlockingPoolError<Never>.cancelled) { try await second.value }
        #expect(pool.queuedJobCount == 0)
    }

    @Test func aRunFromAnAlreadyCancelledTaskNeverRuns() async throws {
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        defer { pool.shutdown() }
        let ran = Atomic<Bool>(false)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await pool.run { _ in ran.store(true, ordering: .relaxed) }
        }
        await #expect(throws: BlockingPoolError<Never>.cancelled) { try await task.value }
        try await pool.run { _ in }
        #expect(ran.load(ordering: .relaxed) == false)
    }

    @Test func cancellingARunningJobDoesNotInterruptIt() async throws {
        let pool = try BlockingPool(width: 1, name: "test-pool") {}
        defer { pool.shutdown() }
        let gate = Gate()
        let task = Task {
            try await pool.run { _ -> Int in
                gate.pass()
                return 42
            }
        }
        #expect(await eventually { gate.waiting == 1 })
        task.cancel()
        gate.release()
        #expect(try await task.value == 42)
    }
}

extension BlockingPoolTests {
    /// Cancellations landing at every moment (before queueing, while queued, while running,
    /// after): each run either returns after its job ran once, or throws `.cancelled` and its
    /// job never ran.
    @Test func racingCancellationsResolveEveryRunExactlyOnce() async throws {
        let pool = try BlockingPool(width: 2, name: "test-pool") {}
        defer { pool.shutdown() }
        let runs = 2000
        let ran = Lock<[Int]>([])
        var tasks: [Task<Void, any Error>] = []
        for i in 0..<runs {
            tasks.append(Task { @Sendable in try await pool.run { _ in ran.withLock { $0.append(i) } } })
            // Cancel the task just made or one of the four before it.
            let victim = i - (i * 7) % 5
            if i % 2 == 1 && victim >= 0 { tasks[victim].cancel() }
        }
        _ = await expectEachRunResolvedOnce(tasks, ran: ran)
        #expect(pool.queuedJobCount == 0)
    }
}

@Suite struct RingBufferTests {
    final class Box {}

    @Test func staysFirstInFirstOutAcrossGrowthAndWrapAround() {
        var ring = RingBuffer<Int>()
        var expected: [Int] = []
        var next = 0
        for round in 0..<50 {
            for _ in 0..<(round % 7 + 3) {
                ring.append(next)
                expected.append(next)
                next += 1
            }
            for _ in 0..<(round % 5 + 1) where !expected.isEmpty { #expect(ring.popFirst() == expected.removeFirst()) }
            #expect(ring.count == expected.count)
        }
        for (offset, value) in expected.enumerated() { #expect(ring[offset] == value) }
        ring[0] = -1
        expected[0] = -1
        var drained: [Int] = []
        while let value = ring.popFirst() { drained.append(value) }
        #expect(drained == expected && ring.isEmpty && ring.popFirst() == nil)
    }

    @Test func aPoppedElementIsNoLongerReferenced() {
        var ring = RingBuffer<Box>()
        weak var first: Box?
        do {
            let box = Box()
            first = box
            ring.append(box)
            ring.append(Box())
        }
        #expect(first != nil)
        _ = ring.popFirst()
        #expect(first == nil)
        #expect(ring.count == 1)
    }
}

/// Awaits every run of a stress test whose job `i` appends `i` to `ran`: each run either
/// returned (and its job ran exactly once) or was cancelled before its job ran; no other
/// outcome. Returns the runs that returned.
func expectEachRunResolvedOnce(_ tasks: [Task<Void, any Error>], ran: Lock<[Int]>) async -> Set<Int> {
    var returned: Set<Int> = [], otherErrors = 0
    for (i, task) in tasks.enumerated() {
        do {
            try await task.value
            returned.insert(i)
        } catch {
            if error as? BlockingPoolError<Never> != .cancelled { otherErrors += 1 }
        }
    }
    let ranOnce = ran.withLock { $0 }
    #expect(Set(ranOnce).count == ranOnce.count, "a job ran twice")
    #expect(Set(ranOnce) == returned, "returned runs and jobs that ran differ")
    #expect(otherErrors == 0)
    return returned
}
