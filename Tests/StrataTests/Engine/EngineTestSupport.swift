import Foundation
import Synchronization
import Testing
@testable import Strata
import StrataTestSupport

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
