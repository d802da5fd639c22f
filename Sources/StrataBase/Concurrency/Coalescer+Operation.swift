/// Handed to `work`: the operation's current priority (the highest of its remaining waiters) and a way to hear changes.
///
/// A ``Coalescer`` makes one per operation and hands it to the shared work, which uses it to
/// order its own steps (say, its place in a decode queue): the priority rises when a waiter with
/// a higher priority joins and falls when the highest one leaves. To miss no change, register
/// the handler first, then read ``priority``.
///
/// Cost: reading ``priority`` is one ``Lock`` hand-off; a change is one more hand-off inside
/// the coalescer's lock, and one per call of the handler (made outside every lock).
public final class CoalescedOperation<Priority: Comparable & Sendable>: Sendable {
    private struct State {
        var priority: Priority
        var handler: (@Sendable (Priority) -> Void)?
        /// Changes not yet handed to the handler, oldest first.
        var undelivered: [Priority] = []
        /// Whether a thread is handing `undelivered` to the handler (only one at a time, so the
        /// handler sees the changes one by one and in order).
        var delivering = false
    }

    private let state: Lock<State>

    package init(priority: Priority) { state = Lock(State(priority: priority)) }

    /// The effective priority: the highest of the operation's remaining waiters'.
    public var priority: Priority { state.withLock { $0.priority } }

    /// Calls `body` (outside any lock) whenever the effective priority changes; replaces an earlier handler.
    ///
    /// Calls are made one at a time, in the order of the changes, on the thread of the call that
    /// changed the priority (a joining caller, a leaving caller's cancellation) or of one that
    /// changed it meanwhile. Changes made before a handler is registered are not replayed.
    public func onPriorityChange(_ body: @escaping @Sendable (Priority) -> Void) {
        state.withLock { $0.handler = body }
    }

    /// Records a new priority (the coalescer calls it with its own lock held, so changes are
    /// queued in the order it made them). Returns whether the caller must call
    /// ``deliverChanges()`` once it has released its lock.
    package func setPriority(_ priority: Priority) -> Bool {
        state.withLock { s in
            guard s.priority != priority else { return false }
            s.priority = priority
            guard s.handler != nil else { return false }
            s.undelivered.append(priority)
            guard !s.delivering else { return false }
            s.delivering = true
            return true
        }
    }

    /// Hands the queued changes to the handler, one call at a time, until none is left.
    package func deliverChanges() {
        while true {
            let next = state.withLock { s -> ((@Sendable (Priority) -> Void), Priority)? in
                guard let handler = s.handler, !s.undelivered.isEmpty else {
                    s.delivering = false
                    return nil
                }
                return (handler, s.undelivered.removeFirst())
            }
            guard let (handler, priority) = next else { return }
            handler(priority)
        }
    }
}
