#if canImport(Glibc)
import Glibc
#endif

/// A fixed set of dedicated threads for blocking C work (decoding, file I/O), so that it never
/// occupies Swift's cooperative pool. Use it for work that blocks a thread or runs long in C;
/// plain Swift computation belongs on the cooperative pool. One pool can serve every tier's
/// blocking work, urgent and speculative alike, through its two lanes.
///
/// Each thread owns one `Context` made by the factory on that thread (for example a decoder
/// with its reusable buffers); a job receives the context of the thread it runs on, so
/// per-thread state needs no lock.
///
/// Lanes (``Lane``): every job is queued in one of two first-in, first-out queues.
/// - ``Lane/urgent`` jobs start in queue order on any free thread, up to ``widths`` `.urgent` at
///   once (default: every thread).
/// - ``Lane/prefetch`` jobs start in queue order, up to ``widths`` `.prefetch` at a time (default
///   one), and only when no urgent job is queued: prefetching pauses while urgent work waits, and
///   leaves the other threads to urgent work.
/// - ``setWidths(urgent:prefetch:)`` changes both while the pool runs (starting threads when a
///   lane needs more than there are; a narrowed lane lets its running jobs finish).
/// - A job that has started is never interrupted, whatever its lane (so with `width` 1 a running
///   prefetch job delays urgent work until it ends).
/// - A ``LaneTicket`` given to ``run(lane:ticket:_:)`` moves that job between lanes while it is
///   queued (a prefetch that an urgent request joins becomes urgent).
///
/// Modelled on swift-nio's `NIOThreadPool`:
/// - a job is let go of the moment a thread takes it and has run it (whatever it captured — an
///   original of hundreds of MiB, a pinned table slot — is released then, not later);
/// - ``run(lane:ticket:_:)`` suspends the calling task until its job has finished; cancelling
///   that task while the job is still queued, in either lane, removes the job (it never runs)
///   and `run` throws ``BlockingPoolError/cancelled``; a job that has started is never
///   interrupted;
/// - after ``shutdown()`` new work is refused with ``BlockingPoolError/shutDown`` (no trap);
///   the jobs queued before it, in both lanes, still run.
///
/// The threads keep the pool alive until ``shutdown()`` (see `BlockingPoolOwner`).
/// Cost: one ``Lock`` hand-off per job and a futex wake when a thread sleeps; `run` adds a
/// ticket (a ``LaneTicket``, made for it unless the caller gives one: three small allocations)
/// whose lock is taken inside the pool's when the job is queued and taken. Cancelling or moving a
/// queued job is O(1).
public final class BlockingPool<Context>: @unchecked Sendable {
    /// What a queued job is handed: the context of the thread running it, or word that it
    /// will never run (its `run` call was cancelled while it was queued).
    package enum Turn {
        case run(Context)
        case cancelled
    }
    package typealias Job = @Sendable (Turn) -> Void

    /// A queued job, and the ticket of its `run` call (`nil` for `submit`).
    package struct Entry {
        package var job: Job
        package var ticket: LaneTicket?
    }

    /// Whom to wake after a change to the state.
    package enum Wake {
        case none, one, all
    }

    private struct State {
        var urgent = LaneQueue<Entry>()
        var prefetch = LaneQueue<Entry>()
        /// Jobs taken by a thread and not yet finished, per lane.
        var running: (urgent: Int, prefetch: Int) = (0, 0)
        /// The most jobs of each lane that may run at once.
        var limits: (urgent: Int, prefetch: Int)
        var stopping = false
        var threadsLeft = 0
        /// The workers' thread ids, so `shutdown` called from a worker does not wait for itself.
        var workerThreads: [pthread_t] = []

        /// Runs `body` on the queue of `lane` (in place: no copy of the queue).
        mutating func withQueue<R>(_ lane: Lane, _ body: (inout LaneQueue<Entry>) -> R) -> R {
            switch lane {
            case .urgent: body(&urgent)
            case .prefetch: body(&prefetch)
            }
        }

        /// The lane whose front job a free thread takes now, if any: urgent first, below its
        /// limit; prefetch only when no urgent job is queued and below its own limit.
        var nextLane: Lane? {
            if !urgent.isEmpty { return running.urgent < limits.urgent ? .urgent : nil }
            if !prefetch.isEmpty && running.prefetch < limits.prefetch { return .prefetch }
            return nil
        }

        /// Nothing queued in either lane (jobs may still be running).
        var isDrained: Bool { urgent.isEmpty && prefetch.isEmpty }

        /// Whom to wake after a change that may have made work startable (or, when stopping,
        /// drained the queues so that the threads may exit). While stopping, `shutdown` sleeps on
        /// the same lock as the workers, so a single signal could reach it instead of a worker:
        /// then everyone is woken.
        var wakeAfterChange: Wake {
            if stopping { return isDrained || nextLane != nil ? .all : .none }
            return nextLane != nil ? .one : .none
        }

        /// Queues `entry` in `lane` (or in the lane its ticket was moved to before), unless the
        /// pool is stopping or the ticket's `run` was cancelled already; then the ticket (if any)
        /// is withdrawn and the refusal returned. `pool` is the ticket's pool from now on.
        mutating func enqueue<E>(_ entry: Entry, in lane: Lane, pool: any LaneTicket.Scheduler) -> BlockingPoolError<E>? {
            guard let ticket = entry.ticket else {
                if stopping { return .shutDown }
                _ = withQueue(lane) { $0.append(entry) }
                return nil
            }
            return ticket.state.withLock { t in
                guard case .waiting = t.phase else {
                    // The cancellation handler ran before the job could be queued.
                    return .cancelled
                }
                if stopping {
                    t.phase = .withdrawn
                    return .shutDown
                }
                if !t.laneChosen { t.lane = lane }
                t.phase = .queued(sequence: withQueue(t.lane) { $0.append(entry) })
                t.scheduler = pool
                return nil
            }
        }
    }

    /// The queues and the workers' bookkeeping; workers sleep on it until work arrives.
    private let state: Lock<State>
    /// Threads started so far (they only grow, under `threadStart`'s lock).
    private let threadStart: Lock<Int>
    private let name: String
    private let makeContext: @Sendable () -> Context

    /// The most jobs of each lane that run at once (see ``setWidths(urgent:prefetch:)``).
    public var widths: (urgent: Int, prefetch: Int) { state.withLock { $0.limits } }
    /// Urgent jobs that may run at once (``widths``' first member).
    public var width: Int { widths.urgent }
    /// Threads the pool has started (the widest lane's width, or more after a lane narrowed).
    public var threadCount: Int { threadStart.withLock { $0 } }
    /// Told the lane of every job as a thread starts it (tests of the lanes' order).
    private let jobStartObserver = Lock<(@Sendable (Lane, Bool) -> Void)?>(nil)

    /// Calls `body` with the lane of every job a thread starts from now on, and whether a caller
    /// awaits it (a `run`; `false` for a `submit`: a helper, a write-behind) (`nil` stops).
    package func observeJobStarts(_ body: (@Sendable (Lane, _ awaited: Bool) -> Void)?) {
        jobStartObserver.withLock { $0 = body }
    }

    /// Starts `width` threads named `name`, each calling `makeContext` once on itself; urgent
    /// jobs run on up to `width` of them, prefetch jobs on up to `prefetchWidth` (default 1).
    /// Throws when the system refuses a thread (the threads already started are stopped).
    public init(
        width: Int, prefetchWidth: Int = 1, name: String, makeContext: @escaping @Sendable () -> Context
    ) throws(SystemCallError) {
        precondition(width > 0 && prefetchWidth > 0, "a pool needs at least one thread per lane")
        self.state = Lock(State(limits: (width, prefetchWidth)))
        self.threadStart = Lock(0)
        self.name = name
        self.makeContext = makeContext
        do {
            try startThreads(upTo: Swift.max(width, prefetchWidth))
        } catch {
            shutdown()
            throw error
        }
    }

    /// Starts threads until there are `count`.
    private func startThreads(upTo count: Int) throws(SystemCallError) {
        try threadStart.withLock { (started: inout Int) throws(SystemCallError) in
            while started < count, !state.withLock({ $0.stopping }) {
                let index = started
                _ = try OSThread(name: "\(name)-\(index)") { [self] in
                    state.withLock { $0.workerThreads.append(pthread_self()) }
                    self.work(makeContext())
                }
                state.withLock { $0.threadsLeft += 1 }
                started += 1
            }
        }
    }

    /// Changes how many jobs of each lane may run at once (each ≥ 1), while the pool runs:
    /// threads are started when a lane is wider than the threads there are; a narrower lane
    /// starts no new job until its running ones fall below the new width (none is interrupted).
    /// Throws when a lane width is below 1 or the system refuses a thread (the widths stay as
    /// they were; threads started meanwhile stay and idle). After ``shutdown()`` it starts
    /// nothing.
    public func setWidths(urgent: Int, prefetch: Int) throws(ConfigurationError) {
        if urgent < 1 { throw .init(key: "urgent", value: "\(urgent)", reason: "must be ≥ 1 thread") }
        if prefetch < 1 { throw .init(key: "prefetch", value: "\(prefetch)", reason: "must be ≥ 1 thread") }
        do {
            try startThreads(upTo: Swift.max(urgent, prefetch))
        } catch {
            throw .init(key: "urgent", value: "\(urgent)", reason: "cannot start more threads: \(error)")
        }
        let wake: Wake = state.withLock { s in
            s.limits = (urgent, prefetch)
            return s.nextLane != nil ? .all : .none
        }
        self.wake(wake)
    }

    /// Runs `body` on one of the pool's threads with that thread's context and returns its
    /// result. The job is queued in `lane` — or, when `ticket` was moved before this call queued
    /// the job, in the ticket's lane; `ticket` (one per call) moves it between lanes while it is
    /// queued.
    ///
    /// Throws ``BlockingPoolError/failed(_:)`` with the error `body` threw;
    /// ``BlockingPoolError/cancelled`` when the calling task is cancelled before a thread has
    /// taken the job (the job never runs, and is released at once); ``BlockingPoolError/shutDown``
    /// when the pool was shut down before the call. A job that has started runs to the end
    /// even if the task is cancelled meanwhile, and its result is returned.
    public func run<T: Sendable, E: Error>(
        lane: Lane = .urgent,
        ticket: LaneTicket? = nil,
        _ body: @escaping @Sendable (Context) throws(E) -> T
    ) async throws(BlockingPoolError<E>) -> T {
        let ticket = ticket ?? LaneTicket()
        ticket.claim()
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, BlockingPoolError<E>>, Never>) in
                let job: Job = { turn in
                    let result: Result<T, BlockingPoolError<E>>
                    switch turn {
                    case .run(let context):
                        do throws(E) {
                            result = .success(try body(context))
                        } catch {
                            result = .failure(.failed(error))
                        }
                    case .cancelled:
                        result = .failure(.cancelled)
                    }
                    ThreadSanitizerHooks.release(before: ticket)
                    continuation.resume(returning: result)
                }
                let (refusal, wake): (BlockingPoolError<E>?, Wake) = state.withLock { s in
                    let refusal: BlockingPoolError<E>? = s.enqueue(Entry(job: job, ticket: ticket), in: lane, pool: self)
                    return (refusal, refusal == nil ? s.wakeAfterChange : .none)
                }
                if let refusal {
                    continuation.resume(returning: .failure(refusal))
                } else {
                    self.wake(wake)
                }
            }
        } onCancel: {
            cancel(ticket)
        }
        ThreadSanitizerHooks.acquire(after: ticket)
        return try result.get()
    }

    /// Queues `job` in `lane` without waiting for it; it runs even if the pool is shut down after
    /// this call. Throws ``BlockingPoolError/shutDown`` (and drops `job`) after ``shutdown()``.
    public func submit(lane: Lane = .urgent, _ job: @escaping @Sendable (Context) -> Void) throws(BlockingPoolError<Never>) {
        let entry = Entry(job: { turn in if case .run(let context) = turn { job(context) } }, ticket: nil)
        let (refusal, wake): (BlockingPoolError<Never>?, Wake) = state.withLock { s in
            let refusal: BlockingPoolError<Never>? = s.enqueue(entry, in: lane, pool: self)
            return (refusal, refusal == nil ? s.wakeAfterChange : .none)
        }
        if let refusal { throw refusal }
        self.wake(wake)
    }

    /// Refuses new work, lets the queued jobs of both lanes finish (by the lanes' rules), then
    /// stops the threads (waiting for them, unless called from one of them). Further `run` and
    /// `submit` calls throw ``BlockingPoolError/shutDown``. Calling it again does nothing more.
    public func shutdown() {
        let me = pthread_self()
        let fromWorker = state.withLock { s in
            s.stopping = true
            return s.workerThreads.contains { pthread_equal($0, me) != 0 }
        }
        state.broadcast()
        // From one of the pool's own threads (say, the last reference to an owner dropped
        // inside a job), waiting would wait for ourselves: the workers stop on their own.
        if fromWorker { return }
        state.withLock(waitingUntil: { $0.threadsLeft == 0 }) { _ in }
    }

    /// Jobs queued and not yet taken by a thread, per lane, not counting jobs whose `run` was
    /// cancelled. A snapshot: it may change as soon as it is read.
    public var queueDepths: (urgent: Int, prefetch: Int) {
        state.withLock { ($0.urgent.count, $0.prefetch.count) }
    }

    /// Jobs running now, per lane (a job counts until its thread has returned from it, which
    /// may be a moment after its `run` call has returned). A snapshot.
    public var runningCounts: (urgent: Int, prefetch: Int) {
        state.withLock { $0.running }
    }

    /// Jobs queued and not yet taken by a thread, both lanes, cancelled ones excluded (for tests).
    package var queuedJobCount: Int { state.withLock { $0.urgent.count + $0.prefetch.count } }

    /// Whether ``shutdown()`` has been called (for tests).
    package var isShuttingDown: Bool { state.withLock { $0.stopping } }

    /// The cancellation handler of a `run` call: takes its job out of its lane's queue if no
    /// thread has taken it yet, and tells it so (outside the locks).
    private func cancel(_ ticket: LaneTicket) {
        let (job, wake): (Job?, Wake) = state.withLock { s in
            let entry: Entry? = ticket.state.withLock { t in
                switch t.phase {
                case .waiting:
                    // Not queued yet: `run` will see this and not queue it.
                    t.phase = .withdrawn
                    return nil
                case .queued(let sequence):
                    t.phase = .withdrawn
                    t.scheduler = nil
                    return s.withQueue(t.lane) { $0.remove(sequence: sequence) }
                case .started, .withdrawn:
                    return nil
                }
            }
            guard let entry else { return (nil, .none) }
            // Removing an urgent job may let a prefetch job start; when stopping, may let the
            // threads exit.
            return (entry.job, s.wakeAfterChange)
        }
        self.wake(wake)
        job?(.cancelled)
    }

    private func wake(_ wake: Wake) {
        switch wake {
        case .none: break
        case .one: state.signal()
        case .all: state.broadcast()
        }
    }

    private func work(_ context: Context) {
        /// The lane of the job this thread has just run: it stops counting as running the next
        /// time the thread holds the lock, before it looks for work (a finished prefetch job
        /// lets the next one start).
        var finished: Lane?
        while true {
            let (taken, wake): ((job: Job, lane: Lane, awaited: Bool)?, Wake) = state.withLock(waitingUntil: { s in
                switch finished {
                case .urgent?: s.running.urgent -= 1
                case .prefetch?: s.running.prefetch -= 1
                case nil: break
                }
                finished = nil
                return s.nextLane != nil || (s.stopping && s.isDrained)
            }) { s in
                guard let lane = s.nextLane else {
                    // Stopping, and nothing is queued: this thread exits.
                    s.threadsLeft -= 1
                    return (nil, .all)
                }
                let tookLastUrgent = lane == .urgent && s.urgent.count == 1
                // `nextLane` saw a job in that queue.
                let entry = s.withQueue(lane) { $0.popFirst() }!
                switch lane {
                case .urgent: s.running.urgent += 1
                case .prefetch: s.running.prefetch += 1
                }
                entry.ticket?.state.withLock { t in
                    t.phase = .started
                    t.scheduler = nil
                }
                // Each queued job woke a thread when it became startable; the one exception is a
                // prefetch job that waited for the urgent queue to empty, which it just did.
                let wake: Wake = s.stopping ? s.wakeAfterChange : (tookLastUrgent && s.nextLane == .prefetch ? .one : .none)
                return ((entry.job, lane, entry.ticket != nil), wake)
            }
            self.wake(wake)
            guard let taken else { return }
            jobStartObserver.withLock { $0 }?(taken.lane, taken.awaited)
            // The queue no longer refers to the job: it (and all it captured) is released at
            // the end of this iteration, before the next job is taken.
            taken.job(.run(context))
            finished = taken.lane
        }
    }
}

extension BlockingPool: LaneTicket.Scheduler {
    /// Moves `ticket`'s job to the back of `lane`'s queue if it is queued in the other lane.
    package func move(_ ticket: LaneTicket, to lane: Lane) -> Bool {
        let (moved, wake): (Bool, Wake) = state.withLock { s in
            let moved = ticket.state.withLock { t in
                guard case .queued(let sequence) = t.phase, t.lane != lane,
                    let entry = s.withQueue(t.lane, { $0.remove(sequence: sequence) })
                else { return false }
                t.lane = lane
                t.phase = .queued(sequence: s.withQueue(lane) { $0.append(entry) })
                return true
            }
            // A job moved to urgent may start now; one moved to prefetch may leave the urgent
            // queue empty, so that a prefetch job may start.
            return (moved, moved ? s.wakeAfterChange : .none)
        }
        self.wake(wake)
        return moved
    }
}

/// Why ``BlockingPool`` work did not produce a result.
///
/// `Failure` is the error type of the job's body (`Never` for ``BlockingPool/submit(lane:_:)``).
public enum BlockingPoolError<Failure: Error>: Error, CustomStringConvertible {
    /// The pool had been shut down: the job was not queued and never ran.
    case shutDown
    /// The calling task was cancelled while the job was still queued: the job never ran.
    case cancelled
    /// The job ran and threw this error.
    case failed(Failure)

    public var description: String {
        switch self {
        case .shutDown: return "the blocking pool is shut down"
        case .cancelled: return "cancelled before the blocking pool ran the job"
        case .failed(let error): return String(describing: error)
        }
    }
}

extension BlockingPoolError: Equatable where Failure: Equatable {}

extension BlockingPoolError {
    /// The one mapping of a pool's errors into its caller's: the job's own error as it threw
    /// it, and the two ways a job never runs as the caller names them.
    public func resolved(cancelled: @autoclosure () -> Failure, shutDown: @autoclosure () -> Failure) -> Failure {
        switch self {
        case .failed(let error): return error
        case .cancelled: return cancelled()
        case .shutDown: return shutDown()
        }
    }
}

/// Shuts a private ``BlockingPool`` down when the last reference to it goes away — for types
/// that make their own pool when the caller gives none (`DirectorySource`, `ImageTableCache`);
/// the pool's threads would otherwise keep it alive forever.
package final class BlockingPoolOwner<Context>: Sendable {
    package let pool: BlockingPool<Context>
    package init(_ pool: BlockingPool<Context>) { self.pool = pool }
    deinit { pool.shutdown() }
}
