import Testing
@testable import Strata
import StrataTestSupport

@Suite(.timeLimit(.minutes(3))) struct CoalescerTests {
    // MARK: - Joining

    @Test func concurrentIdenticalCallsRunTheWorkOnceAndAllGetItsValue() async {
        let coalescer = TestCoalescer()
        let probe = Probe()
        let callers = (0..<8).map { _ in Self.call(coalescer, work: probe.work(returning: 42)) }
        #expect(await eventually { coalescer.waiterCount(group: "g") == 8 })
        #expect(coalescer.operationCount == 1)
        probe.gate.open()
        var joined = 0
        for caller in callers {
            let outcome = await Self.outcome(caller)
            guard case .success(let reply)? = outcome else {
                Issue.record("expected a value, got \(String(describing: outcome))")
                continue
            }
            #expect(reply.value == 42)
            if reply.joined { joined += 1 }
        }
        #expect(joined == 7, "all but the call that started the work joined")
        #expect(probe.runs == 1)
        #expect(coalescer.operationCount == 0)
        #expect(coalescer.waiterCount(group: "g") == 0)
    }

    @Test func aCallThatAcceptsNoInFlightDescriptorStartsItsOwnOperation() async {
        let coalescer = TestCoalescer()
        let one = Probe(), two = Probe(), other = Probe(), unused = Probe()
        let a = await Self.join(coalescer, waiters: 1, descriptor: 1, accepts: { $0 == 1 }, work: one.work(returning: 1))
        let b = await Self.join(coalescer, waiters: 2, descriptor: 2, accepts: { $0 == 2 }, work: two.work(returning: 2))
        #expect(coalescer.operationCount == 2)
        // Joins the first operation of the group (in start order) it accepts, asking in that order.
        let asked = Lock<[Int]>([])
        let c = await Self.join(coalescer, waiters: 3, descriptor: 3, accepts: { _ in true }, work: unused.work(returning: -1))
        let d = await Self.join(
            coalescer, waiters: 4, descriptor: 4,
            accepts: { descriptor in
                asked.withLock { $0.append(descriptor) }
                return descriptor == 2
            }, work: unused.work(returning: -1))
        #expect(asked.withLock { $0 } == [1, 2])
        // The same descriptor in another group is other work.
        let e = await Self.join(coalescer, waiters: 1, group: "h", descriptor: 1, accepts: { $0 == 1 }, work: other.work(returning: 7))
        #expect(coalescer.operationCount == 3)
        #expect(coalescer.waiterCount(group: "g") == 4)

        one.gate.open()
        two.gate.open()
        other.gate.open()
        #expect(await Self.outcome(a) == .success(Reply(value: 1, joined: false)))
        #expect(await Self.outcome(b) == .success(Reply(value: 2, joined: false)))
        #expect(await Self.outcome(c) == .success(Reply(value: 1, joined: true)))
        #expect(await Self.outcome(d) == .success(Reply(value: 2, joined: true)))
        #expect(await Self.outcome(e) == .success(Reply(value: 7, joined: false)))
        #expect([one.runs, two.runs, other.runs, unused.runs] == [1, 1, 1, 0])
        #expect(coalescer.operationCount == 0)
    }

    // MARK: - Cancellation

    @Test func aCancelledWaiterLeavesAtOnceAndTheOthersStillGetTheValue() async {
        let coalescer = TestCoalescer()
        let probe = Probe()
        let a = await Self.join(coalescer, waiters: 1, work: probe.work(returning: 5))
        let b = await Self.join(coalescer, waiters: 2, work: probe.work(returning: -1))
        let c = await Self.join(coalescer, waiters: 3, work: probe.work(returning: -1))
        b.cancel()
        // The work is still held at its gate: b must not wait for it.
        #expect(await Self.outcome(b) == .failure(.cancelled))
        #expect(coalescer.waiterCount(group: "g") == 2)
        #expect(coalescer.operationCount == 1)
        probe.gate.open()
        #expect(await Self.outcome(a) == .success(Reply(value: 5, joined: false)))
        #expect(await Self.outcome(c) == .success(Reply(value: 5, joined: true)))
        #expect(probe.runs == 1)
        #expect(probe.cancelledRuns == 0, "the work went on for the remaining waiters")
        #expect(coalescer.operationCount == 0)
    }

    @Test func theLastWaiterLeavingCancelsTheOperationAndALaterCallStartsAfresh() async {
        let coalescer = TestCoalescer()
        let probe = Probe()
        let a = await Self.join(coalescer, waiters: 1, work: probe.work(returning: 1))
        let b = await Self.join(coalescer, waiters: 2, work: probe.work(returning: 1))
        #expect(await probe.started.waitBounded())
        a.cancel()
        #expect(await Self.outcome(a) == .failure(.cancelled))
        #expect(!probe.sawCancellation.isOpen, "one waiter is left")
        #expect(coalescer.operationCount == 1)
        b.cancel()
        #expect(await Self.outcome(b) == .failure(.cancelled))
        #expect(coalescer.operationCount == 0, "forgotten when its last waiter left")
        #expect(coalescer.waiterCount(group: "g") == 0)
        #expect(await probe.sawCancellation.waitBounded(), "the work's task was cancelled")
        #expect(probe.cancelledRuns == 1)

        probe.gate.open()
        let later = Self.call(coalescer, work: probe.work(returning: 2))
        #expect(await Self.outcome(later) == .success(Reply(value: 2, joined: false)))
        #expect(probe.runs == 2)
    }

    @Test func aCallerCancelledBeforeItCallsGetsCancelledAtOnceAndStartsNothing() async {
        let coalescer = TestCoalescer()
        let probe = Probe()
        let cancelled = Task { () -> Outcome in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(CoalescerError<TestError>) {
                let reply = try await coalescer.run(
                    group: "g", descriptor: 0, priority: 0, joining: { _ in true }, work: probe.work(returning: 1))
                return .success(Reply(value: reply.value, joined: reply.joined))
            } catch {
                return .failure(error)
            }
        }
        #expect(await Self.outcome(cancelled) == .failure(.cancelled))
        #expect(probe.runs == 0)
        #expect(coalescer.operationCount == 0)

        // Nor does it join an operation in flight.
        let a = await Self.join(coalescer, waiters: 1, work: probe.work(returning: 3))
        let late = Task { () -> Outcome in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(CoalescerError<TestError>) {
                let reply = try await coalescer.run(
                    group: "g", descriptor: 0, priority: 9, joining: { _ in true }, work: probe.work(returning: -1))
                return .success(Reply(value: reply.value, joined: reply.joined))
            } catch {
                return .failure(error)
            }
        }
        #expect(await Self.outcome(late) == .failure(.cancelled))
        #expect(coalescer.waiterCount(group: "g") == 1)
        probe.gate.open()
        #expect(await Self.outcome(a) == .success(Reply(value: 3, joined: false)))
        #expect(probe.operations.map(\.priority) == [0], "the cancelled caller's priority was never counted")
        #expect(probe.runs == 1)
    }

    @Test func cancelAllCancelsEveryWaiterAndOperationOfTheGroupOnly() async {
        let coalescer = TestCoalescer()
        let one = Probe(), two = Probe(), other = Probe()
        let a = await Self.join(coalescer, waiters: 1, descriptor: 1, accepts: { $0 == 1 }, work: one.work(returning: 1))
        let b = await Self.join(coalescer, waiters: 2, descriptor: 1, accepts: { $0 == 1 }, work: one.work(returning: 1))
        let c = await Self.join(coalescer, waiters: 3, descriptor: 2, accepts: { $0 == 2 }, work: two.work(returning: 2))
        let h = await Self.join(coalescer, waiters: 1, group: "h", work: other.work(returning: 7))
        #expect(coalescer.operationCount == 3)

        coalescer.cancelAll(group: "g")
        for caller in [a, b, c] { #expect(await Self.outcome(caller) == .failure(.cancelled)) }
        #expect(coalescer.waiterCount(group: "g") == 0)
        #expect(coalescer.operationCount == 1)
        #expect(await one.sawCancellation.waitBounded())
        #expect(await two.sawCancellation.waitBounded())
        coalescer.cancelAll(group: "nothing in flight")

        other.gate.open()
        #expect(await Self.outcome(h) == .success(Reply(value: 7, joined: false)))
        #expect(other.cancelledRuns == 0)
        // A later call of the group starts afresh.
        one.gate.open()
        #expect(await Self.outcome(Self.call(coalescer, work: one.work(returning: 8))) == .success(Reply(value: 8, joined: false)))
        #expect(one.runs == 2)
        #expect(coalescer.operationCount == 0)
    }

    // MARK: - Results are not kept

    @Test func anErrorReachesEveryWaiterAndIsNotKept() async {
        let coalescer = TestCoalescer()
        let probe = Probe()
        let callers = [
            await Self.join(coalescer, waiters: 1, work: probe.work(returning: 0, throwing: .boom(1))),
            await Self.join(coalescer, waiters: 2, work: probe.work(returning: 0, throwing: .boom(2))),
            await Self.join(coalescer, waiters: 3, work: probe.work(returning: 0, throwing: .boom(3))),
        ]
        probe.gate.open()
        for caller in callers { #expect(await Self.outcome(caller) == .failure(.failed(.boom(1)))) }
        #expect(coalescer.operationCount == 0)
        let next = Self.call(coalescer, work: probe.work(returning: 4))
        #expect(await Self.outcome(next) == .success(Reply(value: 4, joined: false)), "the work ran again")
        #expect(probe.runs == 2)
    }

    @Test func aFinishedOperationIsForgotten() async {
        let coalescer = TestCoalescer()
        let probe = Probe()
        probe.gate.open()
        for value in 1...3 {
            #expect(
                await Self.outcome(Self.call(coalescer, work: probe.work(returning: value))) == .success(Reply(value: value, joined: false))
            )
            #expect(coalescer.operationCount == 0)
        }
        #expect(probe.runs == 3)
    }

    // MARK: - Priority

    /// A ticket given to a later call: that call registers with the last priority set on the
    /// ticket (the engine's request whose joined flight did not serve it starts a flight of its
    /// own, at the priority the request was moved to meanwhile).
    @Test func aTicketCarriesItsLastPriorityIntoALaterCall() async {
        let coalescer = TestCoalescer()
        let probe = Probe()
        let ticket = CoalescerTicket()
        let first = Task { () -> Int? in
            try? await coalescer.run(
                group: "g", descriptor: 0, priority: 1, joining: { _ in true }, ticket: ticket, work: probe.work(returning: 1)
            ).value
        }
        #expect(await eventually { coalescer.waiterCount(group: "g") == 1 })
        #expect(coalescer.setPriority(4, for: ticket))
        probe.gate.open()
        #expect(await first.value == 1)
        let second = try? await coalescer.run(
            group: "g", descriptor: 0, priority: 1, joining: { _ in false }, ticket: ticket, work: probe.work(returning: 2))
        #expect(second?.value == 2)
        #expect(probe.operations.map(\.priority) == [4, 4], "the first moved to 4; the second registered with it")
    }

    @Test func thePriorityIsTheHighestOfTheRemainingWaiters() async {
        let coalescer = TestCoalescer()
        let gate = Gate(), ready = Gate()
        let changes = Lock<[Int]>([])
        let operation = Lock<CoalescedOperation<Int>?>(nil)
        let work = { @Sendable (op: CoalescedOperation<Int>) async throws(TestError) -> Int in
            op.onPriorityChange { priority in Issue.record("a replaced handler heard \(priority)") }
            op.onPriorityChange { priority in changes.withLock { $0.append(priority) } }
            operation.withLock { $0 = op }
            ready.open()
            _ = await gate.wait()
            return op.priority
        }
        var current: Int? { operation.withLock { $0 }?.priority }
        func heard(_ expected: [Int]) async -> Bool { await eventually { changes.withLock { $0 } == expected } }

        let a = await Self.join(coalescer, waiters: 1, priority: 1, work: work)
        #expect(await ready.waitBounded())
        #expect(current == 1)
        let b = await Self.join(coalescer, waiters: 2, priority: 3, work: work)
        #expect(current == 3, "raised by a higher waiter")
        #expect(await heard([3]))
        let c = await Self.join(coalescer, waiters: 3, priority: 2, work: work)
        let d = await Self.join(coalescer, waiters: 4, priority: 3, work: work)
        #expect(current == 3)
        b.cancel()
        #expect(await Self.outcome(b) == .failure(.cancelled))
        #expect(current == 3, "another waiter has the same priority")
        d.cancel()
        #expect(await Self.outcome(d) == .failure(.cancelled))
        #expect(current == 2, "lowered when the highest left")
        #expect(await heard([3, 2]))
        c.cancel()
        #expect(await Self.outcome(c) == .failure(.cancelled))
        #expect(current == 1)
        #expect(await heard([3, 2, 1]))
        gate.open()
        #expect(await Self.outcome(a) == .success(Reply(value: 1, joined: false)))
        #expect(changes.withLock { $0 } == [3, 2, 1], "one call per change, in order")
    }

    // MARK: - Stress

    /// A deterministic random sequence (SplitMix64), so a failing run can be replayed.
    struct SplitMix: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func manyCallsWithRandomCancellationsEachResolveOnceAndLeaveNothingBehind(seed: UInt64) async {
        let coalescer = TestCoalescer()
        let groups = ["a", "b", "c", "d"]
        let counts = Lock<(started: Int, ended: Int, resolved: Int, priorityOutOfRange: Int)>((0, 0, 0, 0))
        var rng = SplitMix(state: seed)
        let calls = 400
        var tasks: [Task<Outcome, Never>] = []
        var expected: [Int] = []
        for i in 0..<calls {
            let group = Int.random(in: 0..<groups.count, using: &rng)
            let descriptor = Int.random(in: 0..<3, using: &rng)
            let value = group * 10 + descriptor
            let spins = Int.random(in: 0..<30, using: &rng)
            let fails = Int.random(in: 0..<8, using: &rng) == 0
            let work = { @Sendable (op: CoalescedOperation<Int>) async throws(TestError) -> Int in
                counts.withLock { $0.started += 1 }
                defer { counts.withLock { $0.ended += 1 } }
                op.onPriorityChange { priority in
                    if !(0..<5).contains(priority) { counts.withLock { $0.priorityOutOfRange += 1 } }
                }
                for _ in 0..<spins where !Task.isCancelled { await Task.yield() }
                if fails { throw .boom(value) }
                return value
            }
            let priority = Int.random(in: 0..<5, using: &rng)
            tasks.append(
                Task {
                    let outcome: Outcome
                    do throws(CoalescerError<TestError>) {
                        let reply = try await coalescer.run(
                            group: groups[group], descriptor: descriptor, priority: priority,
                            joining: { $0 == descriptor }, work: work)
                        outcome = .success(Reply(value: reply.value, joined: reply.joined))
                    } catch {
                        outcome = .failure(error)
                    }
                    counts.withLock { $0.resolved += 1 }
                    return outcome
                })
            expected.append(value)
            // Cancel some callers as they go (some before they have called), and now and then a
            // whole group.
            if Int.random(in: 0..<4, using: &rng) == 0 {
                let victim = Int.random(in: 0...i, using: &rng)
                if Int.random(in: 0..<2, using: &rng) == 0 { await Task.yield() }
                tasks[victim].cancel()
            }
            if Int.random(in: 0..<50, using: &rng) == 0 { coalescer.cancelAll(group: groups.randomElement(using: &rng)!) }
            if i % 16 == 0 { await Task.yield() }
        }

        var values = 0, failures = 0, cancellations = 0
        for (i, task) in tasks.enumerated() {
            switch await Self.outcome(task) {
            case .success(let reply)?:
                #expect(reply.value == expected[i], "call \(i) got another operation's value")
                values += 1
            case .failure(.failed(.boom(let value)))?:
                #expect(value == expected[i], "call \(i) got another operation's error")
                failures += 1
            case .failure(.cancelled)?:
                cancellations += 1
            case nil:
                Issue.record("call \(i) never resolved")
            }
        }
        #expect(values + failures + cancellations == calls)
        #expect(counts.withLock { $0.resolved } == calls, "every call resolved exactly once")
        #expect(coalescer.operationCount == 0)
        for group in groups { #expect(coalescer.waiterCount(group: group) == 0) }
        #expect(await eventually { counts.withLock { $0.started == $0.ended } }, "every run of the work ended")
        #expect(counts.withLock { $0.priorityOutOfRange } == 0)
        #expect(values > 0)
    }
}
