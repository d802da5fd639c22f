/// A bound on the bytes that work in flight holds (decodes, resamples, encodes): each job
/// reserves its estimate before it allocates and gives it back when it ends. A job whose
/// estimate does not fit waits, blocking its thread, in its lane's order: urgent jobs first in
/// the order they asked, prefetch jobs only while no urgent one waits. A job larger than the
/// whole budget is refused at once (``MemoryBudgetError``), since no wait would let it in.
///
/// Waits happen on the engine's dedicated threads (``BlockingPool``), never on Swift's
/// cooperative pool: holders are running jobs that never wait for a budget twice, so a wait
/// always ends. Use it for work on such threads; a limit of `Int.max` admits everything.
/// Cost: one lock hand-off to reserve and one to release (plus a wake-up of the waiters when
/// some wait).
public final class MemoryBudget: Sendable {
    /// What ``statistics`` reports.
    public struct Statistics: Sendable, Hashable {
        /// The most bytes in flight (`Int.max`: no limit).
        public var limit: Int
        /// Bytes reserved now.
        public var inUse: Int
        /// The most bytes reserved at once since the start.
        public var peak: Int
        /// Jobs waiting now.
        public var waiting: Int
        /// Reservations that had to wait, and those refused as larger than the limit, since the start.
        public var waits, refusals: Int
    }

    private struct State {
        var limit: Int
        var inUse = 0
        var peak = 0
        var waits = 0, refusals = 0
        /// Ticket dispensers and the ticket served next, per lane (first come, first served).
        var next: (urgent: Int, prefetch: Int) = (0, 0)
        var serving: (urgent: Int, prefetch: Int) = (0, 0)

        var waiting: Int { next.urgent - serving.urgent + next.prefetch - serving.prefetch }

        /// Whether the holder of `ticket` is first in `lane`'s line (a prefetch job only while
        /// no urgent one waits).
        func isFirst(_ ticket: Int, lane: Lane) -> Bool {
            switch lane {
            case .urgent: return ticket == serving.urgent
            case .prefetch: return ticket == serving.prefetch && serving.urgent == next.urgent
            }
        }

        /// Whether the holder of `ticket` in `lane` may take `bytes` now.
        func admits(_ bytes: Int, ticket: Int, lane: Lane) -> Bool {
            inUse <= limit - bytes && isFirst(ticket, lane: lane)
        }
    }

    private let state: Lock<State>

    /// A budget of `limit` bytes (`Int.max`: unlimited).
    public init(limit: Int) {
        state = Lock(State(limit: max(0, limit)))
    }

    /// The most bytes in flight. Raising it lets waiting jobs in; lowering it makes new jobs wait
    /// (those holding bytes keep them) and refuses waiting ones now larger than it.
    public var limit: Int {
        get { state.withLock { $0.limit } }
        set {
            state.withLock { $0.limit = max(0, newValue) }
            state.broadcast()
        }
    }

    public var statistics: Statistics {
        state.withLock {
            Statistics(limit: $0.limit, inUse: $0.inUse, peak: $0.peak, waiting: $0.waiting, waits: $0.waits, refusals: $0.refusals)
        }
    }

    /// Reserves `bytes`, waiting (blocking this thread) in `lane`'s order until they fit, runs
    /// `body`, and gives them back however `body` ends. Throws ``MemoryBudgetError`` without
    /// running `body` when `bytes` are more than the limit.
    public func withReservation<T, E: Error>(
        _ bytes: Int, lane: Lane, _ body: () throws(E) -> T
    ) throws(MemoryBudgetFailure<E>) -> T {
        do {
            try reserve(bytes, lane: lane)
        } catch {
            throw .refused(error)
        }
        defer { release(bytes) }
        do {
            return try body()
        } catch {
            throw .failed(error)
        }
    }

    /// Reserves `bytes` (see ``withReservation(_:lane:_:)``); give them back with ``release(_:)``.
    public func reserve(_ bytes: Int, lane: Lane) throws(MemoryBudgetError) {
        let bytes = max(0, bytes)
        enum First {
            case admitted
            case refused(MemoryBudgetError)
            case waits(ticket: Int)
        }
        let first: First = state.withLock { s in
            if bytes > s.limit {
                s.refusals += 1
                return .refused(MemoryBudgetError(bytes: bytes, limit: s.limit))
            }
            let ticket: Int
            switch lane {
            case .urgent:
                ticket = s.next.urgent
                s.next.urgent += 1
            case .prefetch:
                ticket = s.next.prefetch
                s.next.prefetch += 1
            }
            if s.admits(bytes, ticket: ticket, lane: lane) {
                Self.take(bytes, lane: lane, &s)
                return .admitted
            }
            s.waits += 1
            return .waits(ticket: ticket)
        }
        let ticket: Int
        switch first {
        case .admitted: return
        case .refused(let error): throw error
        case .waits(let t): ticket = t
        }
        let refused: MemoryBudgetError? = state.withLock(waitingUntil: { s in
            s.isFirst(ticket, lane: lane) && (bytes > s.limit || s.inUse <= s.limit - bytes)
        }) { s in
            if bytes > s.limit {
                // Lowered below this job while it waited: refused, and its turn passes on.
                s.refusals += 1
                Self.advance(lane, &s)
                return MemoryBudgetError(bytes: bytes, limit: s.limit)
            }
            Self.take(bytes, lane: lane, &s)
            return nil
        }
        // The next in line may fit too.
        state.broadcast()
        if let refused { throw refused }
    }

    /// Gives back `bytes` reserved with ``reserve(_:lane:)``.
    public func release(_ bytes: Int) {
        let someoneWaits = state.withLock { s in
            s.inUse -= max(0, bytes)
            return s.waiting > 0
        }
        if someoneWaits { state.broadcast() }
    }

    private static func take(_ bytes: Int, lane: Lane, _ s: inout State) {
        s.inUse += bytes
        s.peak = max(s.peak, s.inUse)
        advance(lane, &s)
    }

    private static func advance(_ lane: Lane, _ s: inout State) {
        switch lane {
        case .urgent: s.serving.urgent += 1
        case .prefetch: s.serving.prefetch += 1
        }
    }
}

/// A job's estimate is larger than the whole ``MemoryBudget``: it can never run under this limit.
public struct MemoryBudgetError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The bytes the job asked for.
    public var bytes: Int
    /// The budget's limit.
    public var limit: Int

    public init(bytes: Int, limit: Int) {
        self.bytes = bytes
        self.limit = limit
    }

    public var description: String {
        "needs about \(bytes >> 20) MiB in flight, more than render.memoryLimit (\(limit >> 20) MiB): raise it, or ask for a smaller size"
    }
}

/// Why ``MemoryBudget/withReservation(_:lane:_:)`` returned no result.
public enum MemoryBudgetFailure<Failure: Error>: Error {
    /// The reservation was refused: the job never ran.
    case refused(MemoryBudgetError)
    /// The job ran and threw this error.
    case failed(Failure)
}
