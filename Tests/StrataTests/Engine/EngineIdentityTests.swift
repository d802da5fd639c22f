import Foundation
import Testing

@testable import Strata
import StrataTestSupport

/// The engine's identities and rule hold across its tiers and restarts: defects the one-tier
/// redesign fixed, each shown by a request.
@Suite("ImageCache: one identity and one rule across tiers", .timeLimit(.minutes(3)))
struct EngineIdentityTests {
    /// A 320×200 original.
    static let small = "jpeg/cups-320x200-rgb-reference.jpg"

    @Test func aSmallOriginalAskedLargerIsADiskHitAfterARestart() async throws {
        let scratch = ScratchDirectory()
        let source = CountingSource()
        let request = ImageRequest(key: CacheKey(Self.small), box: PixelSize(width: 1024, height: 1024))
        do {
            let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
            defer { disk.close() }
            let cache = try ImageCache(memory: nil, disk: disk, source: source)
            let rendered = try await cache.image(for: request)
            #expect(rendered.tier == .source && rendered.image.size == PixelSize(width: 320, height: 200))
            #expect(rendered.variant.isWholeOriginal)
            disk.flush()
        }
        // A restart: a new tier indexes the directory from its names, a new engine asks again.
        let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        defer { disk.close() }
        let cache = try ImageCache(memory: ImageMemoryTier(), disk: disk, source: source)
        let again = try await cache.image(for: request)
        #expect(again.tier == .disk, "the whole original on disk serves the larger box: \(again.tier)")
        #expect(again.variant.isWholeOriginal && again.image.size == PixelSize(width: 320, height: 200))
        #expect(source.fetches.load(ordering: .relaxed) == 1)
        // Promoted with its flag: a still larger box is a memory hit.
        let larger = try await cache.image(for: ImageRequest(key: CacheKey(Self.small), box: PixelSize(width: 2048, height: 2048)))
        #expect(larger.tier == .memory && source.fetches.load(ordering: .relaxed) == 1)
    }

    @Test func aTableFilledThroughTheDocumentedIDIsServedByTheEngine() async throws {
        let scratch = ScratchDirectory()
        let format = ImageTableFormat(
            name: "avatar-100", family: "avatar", size: PixelSize(width: 100, height: 100), mode: .fill, maximumCount: 16)
        let tables = try ImageTableCache(directory: scratch.path, formats: [format])
        // Filled the way docs/Library.md shows, with the id derived from the string key.
        let pixels = PixelImage(width: 100, height: 100)
        let entity = ImageTableEntity(
            id: ImageEntityID(hashing: "user/42"), sourceVersion: 1,
            source: ImageTableSource(description: "user/42") { _ in pixels }, process: { source, canvas in canvas.image = source })
        let drawn = try await tables.image(for: entity, formatName: "avatar-100")
        let source = CountingSource()
        let cache = try ImageCache(memory: nil, tables: tables, source: source)
        let served = try await cache.image(
            for: ImageRequest(key: "user/42", box: PixelSize(width: 100, height: 100), mode: .fill))
        #expect(served.tier == .table, "the engine finds the entry the documented id filled: \(served.tier)")
        #expect(served.image.hasSamePixels(as: drawn))
        #expect(source.fetches.load(ordering: .relaxed) == 0)
    }
}

@Suite("ImageCache: blocking file work off the caller's thread", .timeLimit(.minutes(5)))
struct EngineBlockingWorkTests {
    @Test func removalsDeleteFilesOnTheEnginesThreads() async throws {
        let scratch = ScratchDirectory()
        let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        defer { disk.close() }
        let cache = try ImageCache(memory: nil, disk: disk, source: CountingSource())
        let key = CacheKey(EngineIdentityTests.small)
        _ = try await cache.image(for: ImageRequest(key: key, box: PixelSize(width: 160, height: 160)))
        disk.flush()
        #expect(disk.statistics.entries == 1)
        let jobs = Lock<[Lane]>([])
        cache.pool.observeJobStarts { lane, awaited in if awaited { jobs.withLock { $0.append(lane) } } }
        defer { cache.pool.observeJobStarts(nil) }

        await cache.remove(key: key)
        #expect(disk.statistics.entries == 0 && scratch.names().isEmpty)
        #expect(jobs.withLock { $0 } == [.urgent], "remove(key:) deletes the files in one job on the engine's threads")

        _ = try await cache.image(for: ImageRequest(key: key, box: PixelSize(width: 160, height: 160)))
        disk.flush()
        jobs.withLock { $0.removeAll() }
        try await cache.removeAll()
        #expect(disk.statistics.entries == 0 && scratch.names().isEmpty)
        #expect(jobs.withLock { $0 } == [.urgent], "removeAll() empties the directory on the engine's threads")
    }
}
