import Strata

/// At most `limit` holders at once; the others wait in arrival order. Waiting is a suspension
/// (no thread is blocked), and a waiter whose task is cancelled leaves the queue at once.
///
/// ``HTTPSource`` takes one permit per request to its origin.
final class ConcurrencyLimit: Sendable {
    private struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Bool, Never>
    }

    private struct State {
        var available: Int
        var waiters = RingBuffer<Waiter>()
        /// Waiters that have an id and no answer yet (queued, or about to be).
        var pending: Set<UInt64> = []
        /// Waiters that left on cancellation (skipped when their turn comes).
        var cancelled: Set<UInt64> = []
        var nextID: UInt64 = 0
    }

    private let state: Lock<State>
    let limit: Int

    init(limit: Int) {
        precondition(limit >= 1, "a concurrency limit must be at least 1")
        self.limit = limit
        state = Lock(State(available: limit))
    }

    /// Holders right now (for tests and statistics).
    var inUse: Int { state.withLock { limit - $0.available } }

    /// Runs `body` holding one permit; throws `CancellationError` when the task is cancelled
    /// while waiting for one.
    func withPermit<T: Sendable, E: Error>(_ body: () async throws(E) -> T) async throws -> T {
        try await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async throws {
        let id: UInt64? = state.withLock { s in
            if s.available > 0 {
                s.available -= 1
                return nil
            }
            s.nextID += 1
            s.pending.insert(s.nextID)
            return s.nextID
        }
        guard let id else { return }
        let granted = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let resumeNow: Bool? = state.withLock { s in
                    if s.cancelled.remove(id) != nil { return false }
                    if s.available > 0 {
                        s.pending.remove(id)
                        s.available -= 1
                        return true
                    }
                    s.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Bool, Never>? = state.withLock { s in
                // Already granted: nothing to undo (the permit is released after the body).
                guard s.pending.remove(id) != nil else { return nil }
                s.cancelled.insert(id)
                for i in 0..<s.waiters.count where s.waiters[i].id == id {
                    // Queued: answered here; `release` skips it when its turn comes.
                    return s.waiters[i].continuation
                }
                // Not queued yet: the continuation sees the mark and returns at once.
                return nil
            }
            continuation?.resume(returning: false)
        }
        if !granted { throw CancellationError() }
    }

    private func release() {
        let next: CheckedContinuation<Bool, Never>? = state.withLock { s in
            while let waiter = s.waiters.popFirst() {
                if s.cancelled.remove(waiter.id) != nil { continue }
                s.pending.remove(waiter.id)
                return waiter.continuation
            }
            s.available += 1
            return nil
        }
        next?.resume(returning: true)
    }
}
