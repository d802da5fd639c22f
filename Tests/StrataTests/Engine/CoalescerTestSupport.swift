import Testing
@testable import Strata
import StrataTestSupport

/// The coalescer the tests drive, its replies, and helpers that start calls and wait for their
/// outcomes with a bound; work is held with the engine tests' ``Gate``.
extension CoalescerTests {
    enum TestError: Error, Equatable { case boom(Int) }

    /// Groups are strings, descriptors and priorities and values are integers.
    typealias TestCoalescer = Coalescer<String, Int, Int, Int, TestError>

    /// What a call returned, comparable.
    struct Reply: Equatable, Sendable {
        var value: Int
        var joined: Bool
    }
    typealias Outcome = Result<Reply, CoalescerError<TestError>>

    /// The first value offered to it.
    final class Slot<T: Sendable>: Sendable {
        private let state = Lock<(value: T?, taken: Bool, waiter: CheckedContinuation<T, Never>?)>((nil, false, nil))

        func offer(_ value: T) {
            let waiter = state.withLock { s -> CheckedContinuation<T, Never>? in
                guard !s.taken else { return nil }
                s.taken = true
                guard let waiter = s.waiter else {
                    s.value = value
                    return nil
                }
                s.waiter = nil
                return waiter
            }
            waiter?.resume(returning: value)
        }

        /// Waits for the first value (one waiter at most).
        var value: T {
            get async {
                await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
                    let now = state.withLock { s -> T? in
                        if let value = s.value { return value }
                        s.waiter = continuation
                        return nil
                    }
                    if let now { continuation.resume(returning: now) }
                }
            }
        }
    }

    /// `body`'s result, or `nil` if it takes longer than 150 s (a hang shows as a failure rather
    /// than as a stuck test; `body` is left running then). Not shorter: in the whole suite on 2
    /// cores, other tests' blocking work can hold Swift's cooperative threads for over a minute,
    /// and a task started here waits for one (seen failing at 60 s).
    static func bounded<T: Sendable>(_ body: @escaping @Sendable () async -> T) async -> T? {
        let slot = Slot<T?>()
        let worker = Task { slot.offer(await body()) }
        let timer = Task {
            try? await Task.sleep(for: .seconds(150))
            slot.offer(nil)
        }
        let result = await slot.value
        timer.cancel()
        _ = worker
        return result
    }

    /// The shared work of a test: counts its runs and hands out its operations; each run waits
    /// at `gate` (or until its task is cancelled, which it reports), then returns or throws.
    final class Probe: Sendable {
        let gate = Gate()
        /// Fires when the task of a run is cancelled (seen by `withTaskCancellationHandler`).
        let sawCancellation = Gate()
        /// Fires when a run has started.
        let started = Gate()
        private let state = Lock<(runs: Int, cancelled: Int, operations: [CoalescedOperation<Int>])>((0, 0, []))

        var runs: Int { state.withLock { $0.runs } }
        var cancelledRuns: Int { state.withLock { $0.cancelled } }
        var operations: [CoalescedOperation<Int>] { state.withLock { $0.operations } }

        func work(
            returning value: Int, throwing failure: TestError? = nil
        )
            -> @Sendable (CoalescedOperation<Int>) async throws(TestError) -> Int
        {
            { [self] (operation: CoalescedOperation<Int>) async throws(TestError) -> Int in
                state.withLock {
                    $0.runs += 1
                    $0.operations.append(operation)
                }
                started.open()
                await withTaskCancellationHandler {
                    _ = await gate.wait()
                } onCancel: {
                    state.withLock { $0.cancelled += 1 }
                    sawCancellation.open()
                }
                if let failure { throw failure }
                return value
            }
        }
    }

    /// Starts a call of `coalescer.run` in a task of its own.
    static func call(
        _ coalescer: TestCoalescer, group: String = "g", descriptor: Int = 0, priority: Int = 0,
        accepts: @escaping @Sendable (Int) -> Bool = { _ in true },
        work: @escaping @Sendable (CoalescedOperation<Int>) async throws(TestError) -> Int
    ) -> Task<Outcome, Never> {
        Task {
            do throws(CoalescerError<TestError>) {
                let reply = try await coalescer.run(group: group, descriptor: descriptor, priority: priority, joining: accepts, work: work)
                return .success(Reply(value: reply.value, joined: reply.joined))
            } catch {
                return .failure(error)
            }
        }
    }

    /// Starts a call and waits until it is registered (`group` then has `waiters` waiters).
    static func join(
        _ coalescer: TestCoalescer, waiters: Int, group: String = "g", descriptor: Int = 0, priority: Int = 0,
        accepts: @escaping @Sendable (Int) -> Bool = { _ in true },
        work: @escaping @Sendable (CoalescedOperation<Int>) async throws(TestError) -> Int
    ) async -> Task<Outcome, Never> {
        let task = call(coalescer, group: group, descriptor: descriptor, priority: priority, accepts: accepts, work: work)
        #expect(await eventually { coalescer.waiterCount(group: group) == waiters }, "waiter \(waiters) registered")
        return task
    }

    /// The outcome of a call, or `nil` if it does not come within 60 s.
    static func outcome(_ task: Task<Outcome, Never>) async -> Outcome? {
        await bounded { await task.value }
    }
}

extension Gate {
    /// Waits until the gate opens, for at most 150 s; returns whether it opened.
    func waitBounded() async -> Bool {
        await CoalescerTests.bounded { await self.wait() } ?? false
    }
}
