import Logging
import Testing
import Synchronization
@testable import Strata
import StrataTestSupport

/// Counts source loads, and can hold a load until released.
final class SourceProbe: Sendable {
    let loads = Atomic<Int>(0)
    let largest = Lock<PixelSize?>(nil)

    func entity(_ n: Int, version: UInt64 = 1, delayMs: UInt64 = 0) -> ImageTableEntity {
        ImageTableEntity(
            id: TableTestPattern.entityID(n), sourceVersion: version,
            source: ImageTableSource(description: "pattern \(n)") { [self] size in
                loads.add(1, ordering: .relaxed)
                largest.withLock { $0 = size }
                if delayMs > 0 { try await Task.sleep(nanoseconds: delayMs * 1_000_000) }
                var source = PixelImage(width: 64, height: 64)
                TableTestPattern.draw(&source, n: n, version: version)
                return source
            },
            process: { source, canvas in
                // "Resample" by copying the top-left corner: enough to check who drew what.
                var image = PixelImage(
                    width: canvas.format.size.width, height: canvas.format.size.height,
                    style: canvas.format.style)
                TableTestPattern.draw(&image, n: n, version: version)
                canvas.image.withUnsafeMutableBytes { dst in
                    image.withUnsafeBytes { src in dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[0..<dst.count])) }
                }
                _ = source
            })
    }
}

struct DeclineFamily: ImageTableCacheDelegate {
    func shouldProcessAllFormats(inFamily family: String, for entity: ImageTableEntity) -> Bool { false }
}

@Suite struct ImageTableCacheTests {
    let formats = [
        ImageTableFormat(name: "thumb100", family: "thumbs", size: PixelSize(width: 100, height: 100), maximumCount: 8),
        ImageTableFormat(name: "thumb50", family: "thumbs", size: PixelSize(width: 50, height: 50), maximumCount: 8),
        ImageTableFormat(name: "avatar", family: "avatars", size: PixelSize(width: 40, height: 40), maximumCount: 8),
    ]

    @Test func oneSourceLoadFillsTheWholeFamily() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let probe = SourceProbe()
        let entity = probe.entity(1)
        #expect(cache.cachedImage(for: entity, formatName: "thumb50") == nil)
        let image = try await cache.image(for: entity, formatName: "thumb50")
        #expect(image.size == PixelSize(width: 50, height: 50))
        #expect(TableTestPattern.matches(image, n: 1, version: 1))
        #expect(probe.loads.load(ordering: .relaxed) == 1)
        #expect(probe.largest.withLock { $0 } == PixelSize(width: 100, height: 100))
        #expect(TableTestPattern.matches(try #require(cache.cachedImage(for: entity, formatName: "thumb100")), n: 1, version: 1))
        #expect(cache.cachedImage(for: entity, formatName: "avatar") == nil, "other families are not filled")
        _ = try await cache.image(for: entity, formatName: "thumb100")
        #expect(probe.loads.load(ordering: .relaxed) == 1, "the second format was already there")
    }

    @Test func drawingCanRunOnADedicatedPool() async throws {
        let dir = TempDirectory()
        let pool = try BlockingPool<Void>(width: 1, name: "table-draw", makeContext: {})
        defer { pool.shutdown() }
        let cache = try ImageTableCache(directory: dir.path, formats: formats, drawingPool: pool)
        let entity = SourceProbe().entity(7)
        let image = try await cache.image(for: entity, formatName: "thumb100")
        #expect(TableTestPattern.matches(image, n: 7, version: 1))
        #expect(TableTestPattern.matches(try #require(cache.cachedImage(for: entity, formatName: "thumb50")), n: 7, version: 1))
    }

    @Test func theDelegateCanDeclineTheFamily() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats, delegate: DeclineFamily())
        let probe = SourceProbe()
        let entity = probe.entity(2)
        _ = try await cache.image(for: entity, formatName: "thumb100")
        #expect(cache.cachedImage(for: entity, formatName: "thumb50") == nil)
        #expect(probe.largest.withLock { $0 } == PixelSize(width: 100, height: 100))
    }

    @Test func identicalPendingRequestsShareOneLoad() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let probe = SourceProbe()
        let entity = probe.entity(3, delayMs: 50)
        async let a = cache.image(for: entity, formatName: "thumb100")
        async let b = cache.image(for: entity, formatName: "thumb100")
        let (ia, ib) = try await (a, b)
        #expect(ia.hasSamePixels(as: ib))
        #expect(probe.loads.load(ordering: .relaxed) == 1)
    }

    @Test func aCancelledRequestStoresNothing() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let probe = SourceProbe()
        let entity = probe.entity(4, delayMs: 300)
        let waiter = Task { try await cache.image(for: entity, formatName: "thumb100") }
        try await waitUntil("the load has started") { probe.loads.load(ordering: .relaxed) > 0 }
        cache.cancelRequest(for: entity.id, formatName: "thumb100")
        await #expect(throws: CancellationError.self) { try await waiter.value }
        #expect(cache.cachedImage(for: entity, formatName: "thumb100") == nil)
        #expect(cache.cachedImage(for: entity, formatName: "thumb50") == nil)
    }

    @Test func aSizeQueryIsServedFromAFormatWithinTolerance() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let probe = SourceProbe()
        let entity = probe.entity(5)
        _ = try await cache.image(for: entity, formatName: "thumb50")
        let near100 = cache.cachedImage(for: entity, matching: SizeQuery(box: PixelSize(width: 90, height: 90), mode: .fill))
        #expect(near100?.size == PixelSize(width: 100, height: 100))
        let near50 = cache.cachedImage(for: entity, matching: SizeQuery(box: PixelSize(width: 56, height: 56), mode: .fill))
        #expect(near50?.size == PixelSize(width: 50, height: 50))
        #expect(cache.cachedImage(for: entity, matching: SizeQuery(box: PixelSize(width: 75, height: 75), mode: .fill)) == nil)
        #expect(
            cache.cachedImage(for: entity, matching: SizeQuery(box: PixelSize(width: 100, height: 100), mode: .fit)) == nil,
            "another content mode never matches")
        // When the best format lacks the entity, the next match within tolerance serves it.
        try await cache.deleteImage(for: entity.id, formatName: "thumb100")
        let fallback = cache.cachedImage(
            for: entity,
            matching: SizeQuery(
                box: PixelSize(width: 60, height: 60), mode: .fill,
                tolerance: 0.7))
        #expect(fallback?.size == PixelSize(width: 50, height: 50))
    }

    /// An entity whose processing cannot draw one format (`failing`) but draws the others.
    struct CannotDraw: Error, Equatable {}

    func entity(_ n: Int, failingIn failing: String) -> ImageTableEntity {
        let pattern = SourceProbe().entity(n)
        return ImageTableEntity(id: pattern.id, sourceVersion: pattern.sourceVersion, source: pattern.source) { source, canvas in
            if canvas.format.name == failing { throw CannotDraw() }
            try pattern.process(source, &canvas)
        }
    }

    @Test func aSiblingThatCannotBeDrawnDoesNotFailTheRequestedFormat() async throws {
        let dir = TempDirectory()
        let log = CapturingLogHandler.Store()
        let cache = try ImageTableCache(
            directory: dir.path, formats: formats,
            logger: Logger(label: "test") { _ in CapturingLogHandler(store: log) })
        let entity = entity(8, failingIn: "thumb50")
        let image = try await cache.image(for: entity, formatName: "thumb100")
        #expect(TableTestPattern.matches(image, n: 8, version: 1))
        #expect(TableTestPattern.matches(try #require(cache.cachedImage(for: entity, formatName: "thumb100")), n: 8, version: 1))
        #expect(cache.cachedImage(for: entity, formatName: "thumb50") == nil)
        #expect(cache.statistics.siblingFailures == 1, "the sibling's failure is counted")
        let logged = log.messages.withLock { $0 }
        #expect(logged.count == 1 && logged.first?.0 == .warning, "the sibling's failure is logged: \(logged)")
        #expect(logged.first?.2["format"] == "thumb50")
        #expect(logged.first?.2["error"]?.description.contains("CannotDraw") == true)
        // The requested format's own failure is still the request's failure, as it was thrown
        // (not wrapped by the drawing pool).
        await #expect(throws: CannotDraw()) { try await cache.image(for: entity, formatName: "thumb50") }
        #expect(cache.statistics.siblingFailures == 1)
    }

    @Test func compactionRunsOnThePoolAndKeepsTheEntries() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let entities = (10..<14).map { SourceProbe().entity($0) }
        for entity in entities { _ = try await cache.image(for: entity, formatName: "thumb100") }
        try await cache.deleteImage(for: entities[0].id)
        let threads = Lock<[String]>([])
        try cache.table(named: "thumb100").hooks.afterCompactingEntry.withLock {
            $0 = { _ in threads.withLock { $0.append(currentThreadName()) } }
        }
        try await cache.compact(formatName: "thumb100")
        let names = threads.withLock { $0 }
        #expect(names.count == 3, "three live entries were copied")
        for name in names { #expect(name.hasPrefix(ImageTableCache.privatePoolName + "-"), "compacted on thread '\(name)'") }
        #expect(cache.cachedImage(for: entities[0], formatName: "thumb100") == nil)
        for (n, entity) in zip(11..., entities.dropFirst()) {
            #expect(TableTestPattern.matches(try #require(cache.cachedImage(for: entity, formatName: "thumb100")), n: n, version: 1))
        }
    }

    /// After another instance wrote, the cache's table must re-read its whole metadata before it
    /// can answer: that scan runs on the pool, and the entry is served without a source load.
    @Test func aMetadataScanForAnAsyncRequestRunsOnThePool() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let probe = SourceProbe()
        let entity = probe.entity(15)
        let other = try ImageTable(directory: dir.path, format: formats[0])
        try storePattern(other, 15)
        let threads = Lock<[String]>([])
        try cache.table(named: "thumb100").hooks.duringIndexScan.withLock {
            $0 = { threads.withLock { $0.append(currentThreadName()) } }
        }
        let image = try await cache.image(for: entity, formatName: "thumb100")
        #expect(TableTestPattern.matches(image, n: 15, version: 1))
        #expect(probe.loads.load(ordering: .relaxed) == 0, "served from the table")
        let names = threads.withLock { $0 }
        #expect(!names.isEmpty)
        for name in names { #expect(name.hasPrefix(ImageTableCache.privatePoolName + "-"), "scanned on thread '\(name)'") }
    }

    @Test func setDeleteResetAndDiskUsage() async throws {
        let dir = TempDirectory()
        let cache = try ImageTableCache(directory: dir.path, formats: formats)
        let entity = SourceProbe().entity(6)
        var manual = PixelImage(width: 40, height: 40)
        TableTestPattern.draw(&manual, n: 6, version: 1)
        try await cache.setImage(manual, for: entity, formatName: "avatar")
        #expect(try #require(cache.cachedImage(for: entity, formatName: "avatar")).hasSamePixels(as: manual))
        #expect(cache.imageExists(for: entity.id, formatName: "avatar"))
        #expect(try cache.diskUsage(formatName: "avatar") > 0)
        #expect(cache.totalDiskUsage >= (try cache.diskUsage(formatName: "avatar")) + (try cache.diskUsage(formatName: "thumb50")))
        try await cache.deleteImage(for: entity.id)
        #expect(cache.cachedImage(for: entity, formatName: "avatar") == nil)
        try await cache.setImage(manual, for: entity, formatName: "avatar")
        try await cache.reset(formatName: "avatar")
        #expect(cache.cachedImage(for: entity, formatName: "avatar") == nil)
        await #expect(throws: ImageTableError.unknownFormat("nope")) { try await cache.reset(formatName: "nope") }
        await #expect(throws: ImageTableError.unknownFormat("nope")) { try await cache.compact(formatName: "nope") }
        #expect(throws: ImageTableError.duplicateFormat("thumb50")) {
            try ImageTableCache(directory: dir.path, formats: formats + [formats[1]])
        }
    }
}
