import Strata

/// Suspends callers until opened (once; callers after that go on at once); a caller whose task
/// is cancelled while waiting is released with `false`.
package final class Gate: Sendable {
    private struct State {
        var open = false
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var next: UInt64 = 0
    }
    private let state = Lock(State())

    package init() {}

    package var isOpen: Bool { state.withLock { $0.open } }

    /// Waits until the gate opens (true), at once if it is open, or until the calling task is
    /// cancelled (false).
    package func wait() async -> Bool {
        let id = state.withLock { s -> UInt64 in
            s.next += 1
            return s.next
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let resumeNow: Bool? = state.withLock { s in
                    if s.open { return true }
                    if Task.isCancelled { return false }
                    s.waiters[id] = continuation
                    return nil
                }
                if let resumeNow { continuation.resume(returning: resumeNow) }
            }
        } onCancel: {
            let continuation = state.withLock { $0.waiters.removeValue(forKey: id) }
            continuation?.resume(returning: false)
        }
    }

    package func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.open = true
            defer { s.waiters.removeAll() }
            return Array(s.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }
}
