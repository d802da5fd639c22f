import Dispatch

/// Where one blocking job hands parts of its work to run beside it: a split resample's bands,
/// a progressive JPEG's second half, the resample that follows a decode. The calling thread
/// always takes parts itself and never waits for a helper that has not started, so a busy
/// executor only makes the job run on one thread — never a deadlock, never oversubscription.
///
/// ``dispatch`` (the default of a renderer used alone) runs helpers on Dispatch's pool;
/// ``pool(_:lane:)`` (the engine's renders) on the engine's ``BlockingPool``, in the lane of
/// the job that forks, so that helpers obey the lanes' widths like every other job.
///
/// Cost: per fork, one small shared object and a lock hand-off per part; a helper that starts
/// after the parts are all taken returns without touching them.
public struct ForkJoin: Sendable {
    private let start: @Sendable (@escaping @Sendable () -> Void) -> Bool

    /// Helpers run by `start`, which returns whether the helper was accepted (a shut-down pool
    /// refuses).
    package init(start: @escaping @Sendable (@escaping @Sendable () -> Void) -> Bool) {
        self.start = start
    }

    /// Helpers on Dispatch's global pool.
    public static let dispatch = ForkJoin { job in
        DispatchQueue.global().async(execute: job)
        return true
    }

    /// Helpers as jobs of `pool` in `lane`.
    public static func pool(_ pool: BlockingPool<Void>, lane: Lane) -> ForkJoin {
        ForkJoin { job in
            do {
                try pool.submit(lane: lane) { _ in job() }
                return true
            } catch {
                return false
            }
        }
    }

    /// Starts `job` beside the caller; `false` when the executor refused it (it will not run).
    /// The job must decide for itself whether there is still work when it starts.
    package func spawn(_ job: @escaping @Sendable () -> Void) -> Bool { start(job) }

    /// Runs `body(i)` for every `i` in `0..<count`, each exactly once, on this thread and up to
    /// `count - 1` helpers; returns when every part has run. `body` is never called after the
    /// return (a helper that starts late finds nothing left).
    package func forEach(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        guard count > 1 else {
            if count == 1 { body(0) }
            return
        }
        let parts = Parts(count: count, body: body)
        for _ in 1..<count where !spawn({ parts.work() }) { break }
        parts.work()
        parts.waitForRunningParts()
    }

    /// The parts of one ``forEach(_:_:)``: taken in order under a lock; the body is dropped
    /// once all have run.
    private final class Parts: Sendable {
        struct State {
            var next = 0
            var running = 0
            var body: (@Sendable (Int) -> Void)?
        }
        let count: Int
        let state: Lock<State>

        init(count: Int, body: @escaping @Sendable (Int) -> Void) {
            self.count = count
            self.state = Lock(State(body: body))
        }

        /// Takes and runs parts until none is left.
        func work() {
            while true {
                let taken = state.withLock { s -> (Int, @Sendable (Int) -> Void)? in
                    guard s.next < count, let body = s.body else { return nil }
                    defer { s.next += 1 }
                    s.running += 1
                    return (s.next, body)
                }
                guard let (part, body) = taken else { return }
                body(part)
                state.withLock { $0.running -= 1 }
                state.broadcast()
            }
        }

        /// Waits for the parts other threads took (all are taken when the caller's `work`
        /// returns), then drops the body.
        func waitForRunningParts() {
            state.withLock(waitingUntil: { $0.running == 0 }) { s in s.body = nil }
        }
    }
}
