import Foundation
import Testing
import Synchronization
@testable import Strata
import StrataTestSupport

/// Opens once; every waiter (before or after) then goes on.
final class TestGate: Sendable {
    private let state = Lock<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let goNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if goNow { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// A bounded wait in a test ran out.
struct WaitTimedOut: Error, CustomStringConvertible {
    var what: String
    var seconds: Double
    var description: String { "gave up after \(seconds) s waiting until \(what)" }
}

/// Polls `condition` (``eventually(_:_:)``) until it holds; throws ``WaitTimedOut`` (naming `what`)
/// after `seconds` — a generous bound, so a test that would hang fails clearly instead.
func waitUntil(_ what: String, seconds: Double = 180, _ condition: () -> Bool) async throws {
    guard await eventually(seconds, condition) else { throw WaitTimedOut(what: what, seconds: seconds) }
}

/// A source whose loads can be held at a gate or until cancelled, recording loads,
/// cancelled loads and the names of the threads that drew into the table.
final class ScriptedSource: Sendable {
    enum Behaviour: Sendable { case immediate, gated, untilCancelled }

    let loads = Atomic<Int>(0)
    let cancelledLoads = Atomic<Int>(0)
    let drawingThreads = Lock<[String]>([])
    let gate = TestGate()

    func entity(_ n: Int, _ behaviour: Behaviour, version: UInt64 = 1) -> ImageTableEntity {
        let pattern = SourceProbe().entity(n, version: version)
        return ImageTableEntity(
            id: pattern.id, sourceVersion: pattern.sourceVersion,
            source: ImageTableSource(description: "scripted \(n)") { [self] size in
                loads.add(1, ordering: .relaxed)
                switch behaviour {
                case .immediate: break
                case .gated: await gate.wait()
                case .untilCancelled:
                    do {
                        try await Task.sleep(for: .seconds(600))
                    } catch {
                        cancelledLoads.add(1, ordering: .relaxed)
                        throw error
                    }
                }
                return try await pattern.source.load(size)
            },
            process: { [self] source, canvas in
                drawingThreads.withLock { $0.append(currentThreadName()) }
                try pattern.process(source, &canvas)
            })
    }
}

@Suite(.timeLimit(.minutes(5))) struct ImageTableCacheWaiterTests {
    let formats = [
        ImageTableFormat(name: "thumb100", family: "thumbs", size: PixelSize(width: 100, height: 100), maximumCount: 8),
        ImageTableFormat(name: "thumb50", family: "thumbs", size: PixelSize(width: 50, height: 50), maximumCount: 8),
    ]

    func waitForWaiters(_ count: Int, _ cache: ImageTableCache, _ entity: ImageTableEntity) async throws {
        try await waitUntil("\(count) requests wait for the load of \(entity.id)") {
            cache.waiterCount(for: entity.id, formatName: "thumb100") >= count
        }
    }

    @Test func withoutAPoolDrawingRunsOnThePrivatePool() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let source = ScriptedSource()
        let image = try await cache.image(for: source.entity(20, .immediate), formatName: "thumb100")
        #expect(TableTestPattern.matches(image, n: 20, version: 1))
        let threads = source.drawingThreads.withLock { $0 }
        #expect(threads.count == 2, "both formats of the family were drawn")
        for name in threads { #expect(name.hasPrefix(ImageTableCache.privatePoolName + "-"), "drawn on thread '\(name)'") }
    }

    @Test func withAPoolDrawingRunsOnIt() async throws {
        let dir = TempDirectory()
        let pool = try BlockingPool<Void>(width: 1, name: "given-draw", makeContext: {})
        defer { pool.shutdown() }
        let cache = try ImageTableCache(directory: dir.path, formats: formats, drawingPool: pool)
        let source = ScriptedSource()
        _ = try await cache.image(for: source.entity(21, .immediate), formatName: "thumb50")
        let threads = source.drawingThreads.withLock { $0 }
        #expect(threads == ["given-draw-0", "given-draw-0"])
    }

    @Test func aCancelledWaiterLeavesAtOnceAndTheOtherStillGetsTheImage() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let source = ScriptedSource()
        let entity = source.entity(22, .gated)
        let a = Task { try await cache.image(for: entity, formatName: "thumb100") }
        let b = Task { try await cache.image(for: entity, formatName: "thumb100") }
        try await waitForWaiters(2, cache, entity)
        a.cancel()
        // The load is still held at the gate: a must not wait for it.
        await #expect(throws: CancellationError.self) { try await a.value }
        #expect(cache.waiterCount(for: entity.id, formatName: "thumb100") == 1)
        source.gate.open()
        let image = try await b.value
        #expect(TableTestPattern.matches(image, n: 22, version: 1))
        #expect(source.loads.load(ordering: .relaxed) == 1)
        #expect(source.drawingThreads.withLock { $0.count } == 2, "the family was drawn once")
        #expect(TableTestPattern.matches(try #require(cache.cachedImage(for: entity, formatName: "thumb50")), n: 22, version: 1))
    }

    @Test func whenTheLastWaiterLeavesTheLoadIsCancelledAndNothingIsStored() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let source = ScriptedSource()
        let entity = source.entity(23, .untilCancelled)
        let a = Task { try await cache.image(for: entity, formatName: "thumb100") }
        let b = Task { try await cache.image(for: entity, formatName: "thumb100") }
        try await waitForWaiters(2, cache, entity)
        a.cancel()
        await #expect(throws: CancellationError.self) { try await a.value }
        #expect(source.cancelledLoads.load(ordering: .relaxed) == 0, "one waiter is left: the load goes on")
        b.cancel()
        await #expect(throws: CancellationError.self) { try await b.value }
        try await waitUntil("the orphaned load is cancelled") { source.cancelledLoads.load(ordering: .relaxed) > 0 }
        #expect(cache.waiterCount(for: entity.id, formatName: "thumb100") == 0)
        #expect(cache.cachedImage(for: entity, formatName: "thumb100") == nil)
        #expect(cache.cachedImage(for: entity, formatName: "thumb50") == nil)
        #expect(source.drawingThreads.withLock { $0.isEmpty })

        // A later request starts a new load instead of joining the cancelled one.
        let again = source.entity(23, .immediate)
        let image = try await cache.image(for: again, formatName: "thumb100")
        #expect(TableTestPattern.matches(image, n: 23, version: 1))
        #expect(source.loads.load(ordering: .relaxed) == 2)
        #expect(source.cancelledLoads.load(ordering: .relaxed) == 1)
    }

    @Test func aWaiterCancelledBeforeItAsksStartsNoLoad() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let source = ScriptedSource()
        let entity = source.entity(24, .immediate)
        let waiter = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await cache.image(for: entity, formatName: "thumb100")
        }
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(source.loads.load(ordering: .relaxed) == 0)
        #expect(cache.waiterCount(for: entity.id, formatName: "thumb100") == 0)
    }

    @Test func aRequestForAnotherSourceVersionDoesNotJoinTheLoadOfTheFirst() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let source = ScriptedSource()
        let v1 = source.entity(26, .gated, version: 1)
        let v2 = source.entity(26, .immediate, version: 2)
        let a = Task { try await cache.image(for: v1, formatName: "thumb100") }
        try await waitUntil("the version 1 load has started") { source.loads.load(ordering: .relaxed) == 1 }
        let b = Task { try await cache.image(for: v2, formatName: "thumb100") }
        // The version 2 request either starts its own load or (wrongly) waits for version 1's.
        try await waitUntil("the version 2 request has a load") {
            source.loads.load(ordering: .relaxed) == 2 || cache.waiterCount(for: v1.id, formatName: "thumb100") == 2
        }
        source.gate.open()
        let (first, second) = try await (a.value, b.value)
        #expect(TableTestPattern.matches(first, n: 26, version: 1))
        #expect(TableTestPattern.matches(second, n: 26, version: 2), "the version 2 request got another version's pixels")
        #expect(source.loads.load(ordering: .relaxed) == 2)
    }

    @Test func cancelRequestReleasesEveryWaiterAtOnce() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let source = ScriptedSource()
        let entity = source.entity(25, .gated)
        let a = Task { try await cache.image(for: entity, formatName: "thumb100") }
        let b = Task { try await cache.image(for: entity, formatName: "thumb100") }
        try await waitForWaiters(2, cache, entity)
        cache.cancelRequest(for: entity.id, formatName: "thumb100")
        // The load ignores cancellation and is still held: the waiters must not wait for it.
        await #expect(throws: CancellationError.self) { try await a.value }
        await #expect(throws: CancellationError.self) { try await b.value }
        #expect(cache.waiterCount(for: entity.id, formatName: "thumb100") == 0)
        source.gate.open()
    }
}
