import Foundation
import Synchronization
import Testing
@testable import Strata

/// A source over fixture files (key = path under Fixtures/) that counts fetches and can hold
/// them at a gate the test opens, and notices when a held fetch is cancelled.
final class CountingSource: ImageSource, Sendable {
    let fetches = Atomic<Int>(0)
    let cancelledFetches = Atomic<Int>(0)
    let held = Atomic<Int>(0)
    let gate: Gate?
    let versions = Lock<[String: String]>([:])

    init(gated: Bool = false) { gate = gated ? Gate() : nil }

    func fetch(key: String) async throws(SourceError) -> SourceData {
        fetches.add(1, ordering: .relaxed)
        if let gate {
            held.add(1, ordering: .relaxed)
            let passed = await gate.wait()
            if !passed {
                cancelledFetches.add(1, ordering: .relaxed)
                throw SourceError(key: key, reason: .cancelled)
            }
        }
        let path = Fixtures.url(key).path
        guard let data = FileManager.default.contents(atPath: path) else { throw SourceError(key: key, reason: .notFound) }
        return SourceData(bytes: [UInt8](data), version: versions.withLock { $0[key] } ?? "v1")
    }
}

/// Suspends callers until opened (once; callers after that go on at once); a caller whose task
/// is cancelled while waiting is released with `false`.
final class Gate: Sendable {
    private struct State {
        var open = false
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]
        var next: UInt64 = 0
    }
    private let state = Lock(State())

    var isOpen: Bool { state.withLock { $0.open } }

    /// Waits until the gate opens (true), at once if it is open, or until the calling task is
    /// cancelled (false).
    func wait() async -> Bool {
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

    func open() {
        let waiters = state.withLock { s -> [CheckedContinuation<Bool, Never>] in
            s.open = true
            defer { s.waiters.removeAll() }
            return Array(s.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: true) }
    }
}

/// A scratch directory holding one copy of `fixture` as `photo.jpg`, and an engine with
/// `options` over it (`DirectorySource`): for tests that change or remove the original.
func engineOverCopiedOriginal(
    _ fixture: String, options: ImageCache.Options
) throws -> (
    cache: ImageCache, scratch: ScratchDirectory, file: String
) {
    let scratch = ScratchDirectory()
    try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
    let file = scratch.path + "/photo.jpg"
    try Data(Fixtures.bytes(fixture)).write(to: URL(fileURLWithPath: file))
    return (try ImageCache(source: try DirectorySource(root: scratch.path), options: options), scratch, file)
}
