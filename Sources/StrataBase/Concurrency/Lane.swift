/// The priority class of a ``BlockingPool`` job.
///
/// - ``urgent``: work someone is waiting for (an image about to be shown). Urgent jobs start in
///   the order they were queued, on any free thread, up to the pool's width at once.
/// - ``prefetch``: speculative work (warming a cache ahead of need). At most one prefetch job
///   runs at a time, and one is started only when no urgent job is queued, so prefetching
///   pauses while urgent work waits and never holds more than one thread.
///
/// A job that has started always runs to the end: lanes decide the order in which queued jobs
/// start, never interrupt one.
public enum Lane: Sendable, Hashable, Comparable {
    case urgent
    case prefetch

    /// `.prefetch < .urgent`: a coalesced operation runs at the highest of its waiters' lanes.
    public static func < (a: Lane, b: Lane) -> Bool { a == .prefetch && b == .urgent }
}

/// A handle on one ``BlockingPool/run(lane:ticket:_:)`` call's job, made by the caller before the
/// call, for moving the job between lanes while it is still queued — typically when an urgent
/// request joins work that was started as a prefetch: `ticket.move(to: .urgent)`.
///
/// A ticket serves one `run` call: giving it to a second one is a programming error (it traps).
/// A move made before `run` has queued the job is remembered, and `run` queues the job in that
/// lane instead of the one it was given (so a request that joins early is not lost to a race).
///
/// Cost: one small object and its ``Lock``; every query or move takes that lock, and a move also
/// takes the pool's lock. Moving is O(1).
public final class LaneTicket: Sendable {
    /// Where the job is.
    package enum Phase {
        /// Not queued yet: `run` has not got to it.
        case waiting
        /// In the queue of ``State/lane``; `sequence` finds its slot there.
        case queued(sequence: UInt64)
        /// A thread has taken the job (it may have finished since).
        case started
        /// It will never run: its `run` was cancelled before a thread took it, or refused.
        case withdrawn
    }

    /// The pool that queued the job, as far as a ticket needs to know it.
    package protocol Scheduler: AnyObject, Sendable {
        /// Moves the ticket's queued job to the back of `lane`'s queue; returns whether it moved.
        func move(_ ticket: LaneTicket, to lane: Lane) -> Bool
    }

    package struct State {
        package var phase = Phase.waiting
        /// The lane the job is queued in (or ran in); before it is queued, the lane asked for.
        package var lane = Lane.urgent
        /// Whether ``LaneTicket/move(to:)`` was called before the job was queued.
        package var laneChosen = false
        /// Whether a `run` call has taken this ticket.
        package var claimed = false
        /// The pool, while the job is queued there (cleared when it starts or is withdrawn, so
        /// that a kept ticket does not keep a pool alive).
        package var scheduler: (any Scheduler)?
    }

    /// Guarded by its own lock. A pool holding its own lock may take this one; a ticket never
    /// takes the pool's lock while holding this one.
    package let state = Lock(State())

    /// A ticket for one `run` call.
    public init() {}

    /// The lane the job is queued in, or ran in once started. Before `run` has queued it, the
    /// lane given to ``move(to:)`` if any, else ``Lane/urgent``.
    public var lane: Lane { state.withLock { $0.lane } }

    /// Whether a thread has taken the job (it stays `true` after the job has finished).
    public var hasStarted: Bool {
        state.withLock { if case .started = $0.phase { true } else { false } }
    }

    /// Moves the job to the back of `lane`'s queue if it is still queued, so that it starts after
    /// the jobs already queued in `lane` (and, moved to ``Lane/urgent``, before every queued
    /// prefetch job). Its `run` call can still be cancelled as before.
    ///
    /// Returns `false`, doing nothing, when the job has started (or finished), its `run` was
    /// cancelled or refused, or it is already queued in `lane`. Before `run` has queued the job,
    /// records `lane` for it and returns `true`.
    @discardableResult
    public func move(to lane: Lane) -> Bool {
        // Either answered here, or the pool that has the job queued must move it.
        let (answer, scheduler): (Bool?, (any Scheduler)?) = state.withLock { s in
            switch s.phase {
            case .waiting:
                s.lane = lane
                s.laneChosen = true
                return (true, nil)
            case .queued:
                return s.lane == lane ? (false, nil) : (nil, s.scheduler)
            case .started, .withdrawn:
                return (false, nil)
            }
        }
        if let answer { return answer }
        // The job may start or be cancelled meanwhile: the pool checks again under its lock.
        return scheduler?.move(self, to: lane) ?? false
    }

    /// Takes the ticket for one `run` call; traps if another call already took it.
    package func claim() {
        state.withLock { s in
            precondition(!s.claimed, "a LaneTicket serves one BlockingPool.run call")
            s.claimed = true
        }
    }
}
