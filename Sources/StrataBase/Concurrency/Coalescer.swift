/// Joins identical in-flight work: one operation per group+descriptor match, many waiters.
///
/// Use it where several callers may ask for the same expensive result at the same time (a
/// decode, a source load, a table fill) and should share one run of the work rather than each
/// doing it. ``run(group:descriptor:priority:joining:ticket:work:)`` joins an operation already in
/// flight whose descriptor the caller accepts, or starts a new one. Modelled on Nuke's
/// `ImagePipeline`:
/// - every caller waits on its own and may leave on its own: cancelling its task makes its call
///   throw ``CoalescerError/cancelled`` at once, while the others still get the value;
/// - an operation is cancelled when its last waiter leaves (reference-counted cancellation) and
///   forgotten at once, so that a later call starts afresh;
/// - an operation's priority is the highest of its remaining waiters' (``CoalescedOperation``);
/// - nothing is cached: a finished or failed operation is forgotten before its waiters are
///   resumed, so the next call runs the work again.
///
/// Groups partition the operations (typically one per key: an image); descriptors tell the
/// operations of one group apart (say, the size being decoded) and are matched by each caller's
/// `joining` predicate, so a request can join work that is good enough for it, not only
/// identical work.
///
/// Cost: one ``Lock`` hand-off to join or start (the predicate is called once per in-flight
/// operation of the group, in start order, until one accepts) and one to finish; per call, one
/// continuation and one small waiter object; per operation, one unstructured `Task`. Leaving is
/// O(1), or O(waiters of the operation) when a waiter with the operation's priority leaves.
public final class Coalescer<
    Group: Hashable & Sendable, Descriptor: Sendable, Priority: Comparable & Sendable, Value: Sendable, Failure: Error
>: Sendable {
    package typealias Outcome = Result<(value: Value, joined: Bool), CoalescerError<Failure>>

    /// One call of ``run(group:descriptor:priority:joining:ticket:work:)``. Its mutable fields are
    /// guarded by the coalescer's lock. Its continuation is resumed exactly once, by whoever
    /// removes it from its operation's `waiters` under the lock: the operation finishing, the
    /// call's own cancellation, or ``cancelAll(group:where:)``.
    package final class Waiter: @unchecked Sendable {
        package var priority: Priority
        /// The operation the call waits for; `nil` until it is registered.
        package var operation: UInt64?
        package var continuation: CheckedContinuation<Outcome, Never>?
        /// Whether the call joined an operation another call started.
        package var joined = false

        package init(priority: Priority) { self.priority = priority }
    }

    /// One operation in flight and the calls waiting for it.
    package struct Operation {
        package let group: Group
        package let descriptor: Descriptor
        package let handle: CoalescedOperation<Priority>
        package let task: Task<Void, Never>
        package var waiters: [ObjectIdentifier: Waiter]
        /// The highest priority of `waiters` (the value `handle` was last given).
        package var priority: Priority
    }

    package struct State {
        package var operations: [UInt64: Operation] = [:]
        /// Each group's operations, in start order.
        package var groups: [Group: [UInt64]] = [:]
        package var nextOperation: UInt64 = 0

        /// Forgets operation `id` (no-op if it is gone already); returns it.
        package mutating func remove(_ id: UInt64) -> Operation? {
            guard let operation = operations.removeValue(forKey: id) else { return nil }
            if var ids = groups.removeValue(forKey: operation.group) {
                ids.removeAll { $0 == id }
                if !ids.isEmpty { groups[operation.group] = ids }
            }
            return operation
        }
    }

    private let state = Lock(State())

    /// An empty coalescer.
    public init() {}

    /// The result of `work`, shared with every caller whose request joined the same operation.
    ///
    /// Joins the first in-flight operation of `group` (in start order) for which
    /// `accepts(itsDescriptor)` is true — the predicate is called under the coalescer's lock, so
    /// it must be cheap and must not call back into this coalescer — and otherwise starts `work`
    /// in a new unstructured `Task` (it inherits the starting caller's task priority and task-local
    /// values), recorded with `descriptor`. Returns the value and whether this call joined an
    /// operation someone else started.
    ///
    /// Joining with a `priority` above the operation's raises it (``CoalescedOperation``).
    ///
    /// Throws ``CoalescerError/cancelled`` at once, without waiting for the operation, when the
    /// calling task is cancelled (a caller cancelled before the call neither joins nor starts
    /// anything) or ``cancelAll(group:where:)`` ran; the operation goes on for its other waiters and is
    /// cancelled when the last one leaves. Throws ``CoalescerError/failed(_:)`` with the error
    /// `work` threw, to every waiter; the error is not kept.
    public func run(
        group: Group, descriptor: Descriptor, priority: Priority,
        joining accepts: (Descriptor) -> Bool, ticket: CoalescerTicket? = nil,
        work: @escaping @Sendable (CoalescedOperation<Priority>) async throws(Failure) -> Value
    ) async throws(CoalescerError<Failure>) -> (value: Value, joined: Bool) {
        let waiter = Waiter(priority: priority)
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Outcome, Never>) in
                let (admitted, changed) = state.withLock { s -> (Bool, CoalescedOperation<Priority>?) in
                    // Checked under the lock (this is the only check): a cancellation whose
                    // handler ran before this call registered (at once, for a caller cancelled
                    // already) has set the flag, so it is seen here; one that comes later finds
                    // the waiter registered.
                    if Task.isCancelled { return (false, nil) }
                    waiter.continuation = continuation
                    if let ticket {
                        // A priority set on the ticket before the call registered wins.
                        if let wanted = ticket.pending as? Priority { waiter.priority = wanted }
                        ticket.waiter = waiter
                    }
                    let priority = waiter.priority
                    if let ids = s.groups[group], let id = ids.first(where: { accepts(s.operations[$0]!.descriptor) }) {
                        waiter.operation = id
                        waiter.joined = true
                        s.operations[id]!.waiters[ObjectIdentifier(waiter)] = waiter
                        guard priority > s.operations[id]!.priority else { return (true, nil) }
                        s.operations[id]!.priority = priority
                        let handle = s.operations[id]!.handle
                        return (true, handle.setPriority(priority) ? handle : nil)
                    }
                    let id = s.nextOperation
                    s.nextOperation &+= 1
                    let handle = CoalescedOperation(priority: priority)
                    // Cannot finish before it is recorded: `finish` waits for this lock.
                    let task = Task { [self] in
                        let result: Result<Value, Failure>
                        do throws(Failure) {
                            result = .success(try await work(handle))
                        } catch {
                            result = .failure(error)
                        }
                        finish(id, result)
                    }
                    waiter.operation = id
                    s.operations[id] = Operation(
                        group: group, descriptor: descriptor, handle: handle, task: task,
                        waiters: [ObjectIdentifier(waiter): waiter], priority: priority)
                    s.groups[group, default: []].append(id)
                    return (true, nil)
                }
                if !admitted { continuation.resume(returning: .failure(.cancelled)) }
                changed?.deliverChanges()
            }
        } onCancel: {
            leave(waiter)
        }
        ThreadSanitizerHooks.acquire(after: waiter)
        return try outcome.get()
    }

    /// Cancels every operation of `group` whose descriptor `matches`: each of their waiters throws
    /// ``CoalescerError/cancelled`` at once and each operation's task is cancelled. Operations
    /// started afterwards are not affected.
    public func cancelAll(group: Group, where matches: (Descriptor) -> Bool = { _ in true }) {
        let removed = state.withLock { s -> [Operation] in
            guard let ids = s.groups[group] else { return [] }
            return ids.filter { matches(s.operations[$0]!.descriptor) }.compactMap { s.remove($0) }
        }
        for operation in removed { operation.task.cancel() }
        for operation in removed {
            for waiter in operation.waiters.values {
                ThreadSanitizerHooks.release(before: waiter)
                waiter.continuation!.resume(returning: .failure(.cancelled))
            }
        }
    }

    /// Changes the priority of the call that was given `ticket` while it waits (or, before it
    /// has registered, the priority it will register with): its operation's priority becomes the
    /// highest of its waiters' again, and the operation hears of a change. Returns whether the
    /// call is waiting.
    @discardableResult
    public func setPriority(_ priority: Priority, for ticket: CoalescerTicket) -> Bool {
        let (waiting, changed) = state.withLock { s -> (Bool, CoalescedOperation<Priority>?) in
            // Kept for a later call given this ticket (a request that joined a flight whose
            // answer did not serve it, and starts its own).
            ticket.pending = priority
            guard let waiter = ticket.waiter as? Waiter else { return (false, nil) }
            guard let id = waiter.operation, s.operations[id]?.waiters[ObjectIdentifier(waiter)] != nil else { return (false, nil) }
            waiter.priority = priority
            let highest = s.operations[id]!.waiters.values.lazy.map(\.priority).max()!
            guard highest != s.operations[id]!.priority else { return (true, nil) }
            s.operations[id]!.priority = highest
            let handle = s.operations[id]!.handle
            return (true, handle.setPriority(highest) ? handle : nil)
        }
        changed?.deliverChanges()
        return waiting
    }

    /// Number of calls waiting for the operations of `group` whose descriptor `matches` (for
    /// tests and gauges).
    public func waiterCount(group: Group, where matches: (Descriptor) -> Bool = { _ in true }) -> Int {
        state.withLock { s in
            (s.groups[group] ?? []).reduce(0) { count, id in
                let operation = s.operations[id]!
                return matches(operation.descriptor) ? count + operation.waiters.count : count
            }
        }
    }

    /// Number of operations in flight (for tests and gauges).
    public var operationCount: Int { state.withLock { $0.operations.count } }

    /// Number of calls waiting, for all the operations in flight (for tests and gauges).
    public var waitingCallCount: Int { state.withLock { $0.operations.values.reduce(0) { $0 + $1.waiters.count } } }

    /// The task of operation `id` is done: forget the operation, then hand the result to the
    /// waiters still registered (none when the last one left or ``cancelAll(group:where:)`` ran).
    private func finish(_ id: UInt64, _ result: Result<Value, Failure>) {
        let waiters = state.withLock { s in
            s.remove(id)?.waiters.values.map { ($0, $0.continuation!, $0.joined) } ?? []
        }
        for (waiter, continuation, joined) in waiters {
            ThreadSanitizerHooks.release(before: waiter)
            switch result {
            case .success(let value): continuation.resume(returning: .success((value, joined)))
            case .failure(let error): continuation.resume(returning: .failure(.failed(error)))
            }
        }
    }

    /// A waiter's task was cancelled: resume it with ``CoalescerError/cancelled`` (unless the
    /// operation or ``cancelAll(group:where:)`` already did), cancel the operation when no waiter is
    /// left, and lower its priority when the waiter was the highest.
    private func leave(_ waiter: Waiter) {
        let (continuation, orphan, changed) = state.withLock {
            s -> (CheckedContinuation<Outcome, Never>?, Task<Void, Never>?, CoalescedOperation<Priority>?) in
            guard let id = waiter.operation, s.operations[id]?.waiters.removeValue(forKey: ObjectIdentifier(waiter)) != nil
            else { return (nil, nil, nil) }
            let continuation = waiter.continuation
            if s.operations[id]!.waiters.isEmpty { return (continuation, s.remove(id)!.task, nil) }
            let current = s.operations[id]!.priority
            guard waiter.priority == current else { return (continuation, nil, nil) }
            let highest = s.operations[id]!.waiters.values.lazy.map(\.priority).max()!
            guard highest != current else { return (continuation, nil, nil) }
            s.operations[id]!.priority = highest
            let handle = s.operations[id]!.handle
            return (continuation, nil, handle.setPriority(highest) ? handle : nil)
        }
        orphan?.cancel()
        if let continuation {
            ThreadSanitizerHooks.release(before: waiter)
            continuation.resume(returning: .failure(.cancelled))
        }
        changed?.deliverChanges()
    }
}

/// A caller's handle on its own call of ``Coalescer/run(group:descriptor:priority:joining:ticket:work:)``,
/// for changing that call's priority while it waits (``Coalescer/setPriority(_:for:)``): an
/// urgent request that scrolled off screen becomes a prefetch, a prefetch the user now looks at
/// becomes urgent, and the shared operation follows its highest waiter. A ticket follows one
/// call at a time; given to a later call, that call registers with the last priority set.
/// Its fields are guarded by the coalescer's lock.
public final class CoalescerTicket: @unchecked Sendable {
    /// The registered call's waiter (an object of the coalescer's own type).
    package var waiter: AnyObject?
    /// The last priority set: the one a call registers with.
    package var pending: Any?

    public init() {}
}

/// Why a ``Coalescer`` call produced no value.
///
/// `Failure` is the error type of the shared work.
public enum CoalescerError<Failure: Error>: Error, CustomStringConvertible {
    /// The calling task was cancelled, or ``Coalescer/cancelAll(group:where:)`` cancelled its group.
    case cancelled
    /// The shared work threw this error (every waiter of the operation gets it).
    case failed(Failure)

    public var description: String {
        switch self {
        case .cancelled: return "cancelled while waiting for coalesced work"
        case .failed(let error): return String(describing: error)
        }
    }
}

extension CoalescerError: Equatable where Failure: Equatable {}
