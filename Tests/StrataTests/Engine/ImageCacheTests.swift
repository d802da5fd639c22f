import Dispatch
import Foundation
import Synchronization
import MetricsTestKit
import Testing
@testable import Strata
import StrataTestSupport

@Suite("ImageCache", .timeLimit(.minutes(5)))
struct ImageCacheTests {
    static let photo = "jpeg/fallenleaf-2048x1280-420.jpg"
    static let small = "jpeg/eveningglow-1024x640-progressive.jpg"

    func request(_ key: String, _ w: Int, _ h: Int, tolerance: Double? = nil, exact: Bool = false) -> ImageRequest {
        ImageRequest(key: CacheKey(key), box: PixelSize(width: w, height: h), tolerance: tolerance, exactSize: exact)
    }

    @Test func chainOrderAndPromotion() async throws {
        let scratch = ScratchDirectory()
        let source = CountingSource()
        var config = DiskTier.Configuration()
        config.useInotify = false
        let disk = try DiskTier(directory: scratch.path, configuration: config)
        let cache = try ImageCache(disk: disk, source: source)
        let first = try await cache.image(for: request(Self.photo, 512, 512))
        #expect(first.tier == .source)
        #expect(first.image.size == PixelSize(width: 512, height: 320))
        let second = try await cache.image(for: request(Self.photo, 500, 500))
        #expect(second.tier == .memory)
        disk.flush()
        #expect(scratch.names().contains { $0.contains("512x320") }, "write-back reached the disk: \(scratch.names())")

        // A second engine over the same directory, with an empty memory tier: disk, then memory.
        let other = try ImageCache(disk: disk, source: source)
        let fromDisk = try await other.image(for: request(Self.photo, 512, 512))
        #expect(fromDisk.tier == .disk)
        #expect(fromDisk.sourceVersion == first.sourceVersion)
        #expect(fromDisk.image.hasSamePixels(as: first.image))
        let promoted = try await other.image(for: request(Self.photo, 512, 512))
        #expect(promoted.tier == .memory)
        #expect(source.fetches.load(ordering: .relaxed) == 1)
        let stats = other.statistics.engine
        #expect(stats.served[.disk] == 1 && stats.served[.memory] == 1)
        // Every tier reports in one shape.
        let tiers = other.statistics.tiers
        #expect(tiers[.disk]?.hits == 1 && tiers[.disk]?.entries == 1 && (tiers[.disk]?.bytes ?? 0) > 512 * 320 * 4)
        #expect(tiers[.memory]?.hits == 1 && tiers[.memory]?.entries == 1)
        #expect(tiers[.table] == nil)
    }

    @Test func cachedImageIsMemoryOnly() async throws {
        let cache = try ImageCache(source: CountingSource())
        #expect(cache.cachedImage(for: request(Self.photo, 256, 256)) == nil)
        _ = try await cache.image(for: request(Self.photo, 256, 256))
        let hit = try #require(cache.cachedImage(for: request(Self.photo, 240, 240)))
        #expect(hit.tier == .memory && hit.image.size == PixelSize(width: 256, height: 160))
    }

    @Test func exactSizeResamplesALargerVariantInsteadOfDecoding() async throws {
        let source = CountingSource()
        let cache = try ImageCache(source: source)
        _ = try await cache.image(for: request(Self.photo, 1000, 1000))
        let exact = try await cache.image(for: request(Self.photo, 900, 900, exact: true))
        #expect(exact.image.size == PixelSize(width: 900, height: 563))
        #expect(source.fetches.load(ordering: .relaxed) == 1)
        #expect(cache.statistics.engine.resamples == 1)
        #expect(cache.statistics.engine.sourceDecodes == 1)
        // The resampled variant is kept: the same exact request is now a plain memory hit.
        let again = try await cache.image(for: request(Self.photo, 900, 900, exact: true))
        #expect(again.image.size == exact.image.size && cache.statistics.engine.resamples == 1)
        // Without exactSize a variant within tolerance is served as it is.
        let loose = try await cache.image(for: request(Self.photo, 1100, 1100))
        #expect(loose.image.size.width == 1000 || loose.image.size.width == 900)
    }

    @Test func wholeOriginalServesLargerBoxes() async throws {
        let source = CountingSource()
        let cache = try ImageCache(source: source)
        let first = try await cache.image(for: request(Self.small, 2048, 2048))
        #expect(first.image.size == PixelSize(width: 1024, height: 640) && first.variant.isWholeOriginal)
        let second = try await cache.image(for: request(Self.small, 2048, 2048))
        #expect(second.tier == .memory)
        let third = try await cache.image(for: request(Self.small, 4000, 3000))
        #expect(third.tier == .memory)
        #expect(source.fetches.load(ordering: .relaxed) == 1)
    }

    @Test(arguments: [false, true])
    func concurrentRequestsShareOneRender(withinTolerance: Bool) async throws {
        let source = CountingSource(gated: true)
        let cache = try ImageCache(source: source)
        let boxes = (0..<100).map { i in withinTolerance ? 500 + (i % 40) : 512 }
        let results = try await withThrowingTaskGroup(of: CachedImage.self) { group in
            for width in boxes { group.addTask { try await cache.image(for: request(Self.photo, width, width)) } }
            let group1 = CacheKey(Self.photo)
            #expect(await eventually { cache.flights.waiterCount(group: group1) == 100 })
            source.gate!.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.count == 100)
        #expect(source.fetches.load(ordering: .relaxed) == 1)
        #expect(cache.statistics.engine.sourceDecodes == 1)
        #expect(cache.statistics.engine.coalesced == 99)
    }

    /// Concurrent cold requests of one key whose boxes have one side (the service's `w=` alone:
    /// the other side its largest dimension): each is answered within its own tolerance — only
    /// widths that close share a render. Found with 16 concurrent `?w=40…55&tolerance=0`
    /// requests, all answered with one of their renders (42 wide for a 55), when the flights
    /// compared the boxes as if they were variants.
    @Test(arguments: [nil, 0.0] as [Double?])
    func concurrentRequestsOfOtherWidthsGetTheirOwnWithinTolerance(tolerance: Double?) async throws {
        let source = CountingSource(gated: true)
        let cache = try ImageCache(source: source)
        let widths = tolerance == 0 ? Array(40...55) : [100, 110, 130, 170, 230, 300, 400]
        let results = try await withThrowingTaskGroup(of: (Int, CachedImage).self) { group in
            for width in widths {
                group.addTask { (width, try await cache.image(for: request(Self.photo, width, 16384, tolerance: tolerance))) }
            }
            #expect(await eventually { cache.flights.waiterCount(group: CacheKey(Self.photo)) == widths.count })
            source.gate!.open()
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for (width, served) in results {
            let ratio = Double(served.image.size.width) / Double(width)
            if tolerance == 0 {
                #expect(served.image.size.width == width, "w=\(width) answered \(served.image.size)")
            } else {
                #expect(ratio >= 0.8 - 1e-9 && ratio <= 1.2 + 1e-9, "w=\(width) answered \(served.image.size)")
            }
        }
        // Only widths within one another's tolerance joined (100 and 110; 110 and 130).
        #expect(cache.statistics.engine.coalesced <= (tolerance == 0 ? 0 : 2))
    }

    /// A request that missed memory and every tier below it while another flight of its key was
    /// rendering, and reaches the flights after that one ended, finds its variant in memory.
    @Test func aFlightStartedAfterAnotherEndedServesWhatItLeftInMemory() async throws {
        let source = CountingSource()
        let cache = try ImageCache(source: source)
        let first = try await cache.image(for: request(Self.photo, 256, 256))
        #expect(first.tier == .source)
        let late = try await cache.throughFlight(request(Self.photo, 256, 256), ticket: nil, lowerTiersAsked: true)
        #expect(late.tier == .memory && late.image.size == first.image.size)
        #expect(cache.statistics.engine.sourceDecodes == 1)
        #expect(source.fetches.load(ordering: .relaxed) == 1)
    }

    @Test func cancellingOneWaiterLeavesTheOthersServed() async throws {
        let source = CountingSource(gated: true)
        let cache = try ImageCache(source: source)
        let group1 = CacheKey(Self.photo)
        let a = Task { try await cache.image(for: request(Self.photo, 256, 256)) }
        let b = Task { try await cache.image(for: request(Self.photo, 256, 256)) }
        #expect(await eventually { cache.flights.waiterCount(group: group1) == 2 })
        a.cancel()
        await #expect(throws: ImageCacheError.self) { try await a.value }
        #expect(await eventually { cache.flights.waiterCount(group: group1) == 1 })
        source.gate!.open()
        let served = try await b.value
        #expect(served.tier == .source && source.cancelledFetches.load(ordering: .relaxed) == 0)
    }

    @Test func cancellingEveryWaiterStopsTheWork() async throws {
        let source = CountingSource(gated: true)
        let cache = try ImageCache(source: source)
        let tasks = (0..<3).map { _ in Task { try await cache.image(for: request(Self.photo, 256, 256)) } }
        #expect(await eventually { source.held.load(ordering: .relaxed) == 1 })
        for task in tasks { task.cancel() }
        for task in tasks { await #expect(throws: ImageCacheError.self) { try await task.value } }
        // The held fetch itself saw the cancellation: the work stopped, nothing was decoded.
        #expect(await eventually { source.cancelledFetches.load(ordering: .relaxed) == 1 })
        #expect(cache.statistics.engine.sourceDecodes == 0)
        #expect(cache.flights.operationCount == 0)
    }

    @Test func negativeCaching() async throws {
        let source = CountingSource()
        var options = ImageCache.Options()
        options.negativeTTL = .seconds(60)
        let cache = try ImageCache(source: source, options: options)
        for _ in 0..<5 {
            await #expect(throws: ImageCacheError.self) { try await cache.image(for: request("jpeg/missing.jpg", 100, 100)) }
        }
        #expect(source.fetches.load(ordering: .relaxed) == 1)
        #expect(cache.statistics.engine.negativeHits == 4)
        // Removing the key forgets that it was missing.
        await cache.remove(key: "jpeg/missing.jpg")
        await #expect(throws: ImageCacheError.self) { try await cache.image(for: request("jpeg/missing.jpg", 100, 100)) }
        #expect(source.fetches.load(ordering: .relaxed) == 2)
    }

    @Test func brokenFixturesGiveTypedErrorsAndTheEngineGoesOn() async throws {
        let cache = try ImageCache(source: CountingSource())
        let broken = try FileManager.default.contentsOfDirectory(atPath: Fixtures.url("broken").path).sorted()
        #expect(broken.count >= 8)
        for name in broken {
            do {
                _ = try await cache.image(for: request("broken/" + name, 256, 256))
                Issue.record("broken/\(name) was served")
            } catch {
                guard case .decoding(let key, _) = error else {
                    Issue.record("broken/\(name): \(error)")
                    continue
                }
                #expect(key == "broken/" + name)
            }
            let good = try await cache.image(for: request(Self.photo, 128, 128))
            #expect(good.image.size.width == 128)
        }
        #expect(cache.statistics.engine.errors["decoding"] == broken.count)
    }

    @Test func revalidationServesTheOldImageOnceThenTheNew() async throws {
        var options = ImageCache.Options()
        options.revalidateAfter = .zero
        let (cache, scratch, file) = try engineOverCopiedOriginal(Self.photo, options: options)
        defer { withExtendedLifetime(scratch) {} }
        let old = try await cache.image(for: request("photo.jpg", 256, 256))
        #expect(old.tier == .source && old.image.size == PixelSize(width: 256, height: 160))
        // Replace the original with another photo of another aspect.
        try Data(Fixtures.bytes("jpeg/kite-800x500-gray.jpg")).write(to: URL(fileURLWithPath: file + ".new"))
        try FileManager.default.removeItem(atPath: file)
        try FileManager.default.moveItem(atPath: file + ".new", toPath: file)
        // The directory's version check (an fstat) runs on the engine's threads, urgent lane
        // (the prefetch lane pauses while urgent work waits).
        let lanes = Lock<[Lane]>([])
        cache.pool.observeJobStarts { lane, awaited in if awaited { lanes.withLock { $0.append(lane) } } }
        let stale = try await cache.image(for: request("photo.jpg", 256, 256))
        #expect(stale.tier == .memory && stale.sourceVersion == old.sourceVersion)
        #expect(await eventually { cache.statistics.engine.changedOriginals == 1 })
        cache.pool.observeJobStarts(nil)
        #expect(lanes.withLock { $0.first } == .urgent, "\(lanes.withLock { $0 })")
        let fresh = try await cache.image(for: request("photo.jpg", 256, 256))
        #expect(
            fresh.tier == .source && fresh.sourceVersion != old.sourceVersion, "\(fresh.tier) \(fresh.variant) \(cache.statistics.engine)")
        #expect(!fresh.image.hasSamePixels(as: old.image))
    }

    /// Found by Scripts/soak.sh: revalidations were coalesced per key whatever version the hit
    /// held, so a hit of an old version joined the check begun by a hit of the new one, which
    /// found the original unchanged and kept the old variants (served for minutes).
    @Test func aHitOfAnOlderVersionIsCheckedOnItsOwn() async throws {
        let version = Lock("v1")
        let checks = Atomic<Int>(0)
        let held = Gate()
        let source = ClosureSource(
            version: { _ in
                checks.add(1, ordering: .relaxed)
                _ = await held.wait()
                return version.withLock { $0 }
            },
            { key in SourceData(bytes: Fixtures.bytes(key), version: version.withLock { $0 }) })
        var options = ImageCache.Options()
        options.revalidateAfter = .zero
        let cache = try ImageCache(source: source, options: options)
        // The memory tier holds a small variant of v1 and, after the original changed, a large
        // one of v2 (not within tolerance of each other: each request loads its own).
        let old = try await cache.image(for: request(Self.photo, 128, 128))
        version.withLock { $0 = "v2" }
        let new = try await cache.image(for: request(Self.photo, 1024, 1024))
        #expect(old.tier == .source && new.tier == .source && old.sourceVersion != new.sourceVersion)
        // A hit of v2 starts a check, held; a hit of v1 must not join it.
        #expect(try await cache.image(for: request(Self.photo, 1024, 1024)).tier == .memory)
        #expect(await eventually { checks.load(ordering: .relaxed) == 1 })
        let stale = try await cache.image(for: request(Self.photo, 128, 128))
        #expect(stale.tier == .memory && stale.sourceVersion == old.sourceVersion)
        #expect(await eventually(10) { checks.load(ordering: .relaxed) == 2 }, "the hit of v1 joined the check of v2")
        held.open()
        #expect(await eventually { cache.statistics.engine.changedOriginals == 1 })
        let fresh = try await cache.image(for: request(Self.photo, 128, 128))
        #expect(fresh.sourceVersion == new.sourceVersion, "\(fresh.tier): the old version was kept")
    }

    /// Found by Scripts/soak.sh: disk files do not keep the fetch time, so a disk hit was as
    /// young as the read and never revalidated; with a small memory tier a replaced original's
    /// old version went on being served from disk.
    @Test func aDiskHitIsRevalidatedAsItsAgeIsUnknown() async throws {
        let scratch = ScratchDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path + "/src", withIntermediateDirectories: true)
        let file = scratch.path + "/src/photo.jpg"
        try Data(Fixtures.bytes(Self.photo)).write(to: URL(fileURLWithPath: file))
        var options = ImageCache.Options()
        options.revalidateAfter = .seconds(3600)
        let disk = try DiskTier(directory: scratch.path + "/disk")
        let first = try ImageCache(disk: disk, source: try DirectorySource(root: scratch.path + "/src"), options: options)
        let old = try await first.image(for: request("photo.jpg", 256, 256))
        #expect(old.tier == .source)
        disk.flush()
        try Data(Fixtures.bytes("jpeg/kite-800x500-gray.jpg")).write(to: URL(fileURLWithPath: file + ".new"))
        #expect(rename(file + ".new", file) == 0)
        // Another engine over the same directory (its memory empty, as after an eviction).
        let second = try ImageCache(
            disk: DiskTier(directory: scratch.path + "/disk"), source: try DirectorySource(root: scratch.path + "/src"), options: options)
        let stale = try await second.image(for: request("photo.jpg", 256, 256))
        #expect(stale.tier == .disk && stale.sourceVersion == old.sourceVersion, "\(stale.tier)")
        #expect(await eventually { second.statistics.engine.changedOriginals == 1 })
        let fresh = try await second.image(for: request("photo.jpg", 256, 256))
        #expect(fresh.tier == .source && fresh.sourceVersion != old.sourceVersion, "\(fresh.tier) \(fresh.variant)")
    }

    @Test func tablesAnswerMatchingBoxesAndOneDecodeFillsTheFamily() async throws {
        let scratch = ScratchDirectory()
        let formats = [
            ImageTableFormat(name: "thumb-256", family: "thumbs", size: PixelSize(width: 256, height: 256), mode: .fit, maximumCount: 64),
            ImageTableFormat(name: "thumb-128", family: "thumbs", size: PixelSize(width: 128, height: 128), mode: .fit, maximumCount: 64),
            ImageTableFormat(name: "thumb-64", family: "thumbs", size: PixelSize(width: 64, height: 64), mode: .fit, maximumCount: 64),
        ]
        let tables = try ImageTableCache(directory: scratch.path, formats: formats)
        let source = CountingSource()
        let cache = try ImageCache(tables: tables, source: source)
        let first = try await cache.image(for: request(Self.photo, 250, 250))
        #expect(first.tier == .source && first.image.size == PixelSize(width: 256, height: 160), "\(first.image.size)")
        #expect(source.fetches.load(ordering: .relaxed) == 1 && cache.statistics.engine.sourceDecodes == 1)
        // One decode filled every format of the family, each with the source's version.
        let id = CacheKey(Self.photo).entityID
        for format in formats {
            let entry = try #require(try tables.table(named: format.name).entry(for: id), "\(format.name) is filled")
            #expect(SourceVersion(stamp: entry.sourceVersion) == first.sourceVersion)
            #expect(max(entry.image.width, entry.image.height) == format.size.width)
        }
        // A sibling size is a table hit, promoted to memory as a heap copy (no slot pinned there).
        let sibling = try await cache.image(for: request(Self.photo, 120, 120))
        #expect(sibling.tier == .table && sibling.image.size == PixelSize(width: 128, height: 80))
        let promoted = try #require(cache.cachedImage(for: request(Self.photo, 128, 128)))
        #expect(promoted.image.storageKind == .heap && promoted.image.hasSamePixels(as: sibling.image))
        #expect(source.fetches.load(ordering: .relaxed) == 1)
        // A box far from every format goes to the source directly.
        let other = try await cache.image(for: request(Self.photo, 700, 700))
        #expect(other.tier == .source && other.image.size == PixelSize(width: 700, height: 438))
    }

    @Test func removeDropsEveryTier() async throws {
        let scratch = ScratchDirectory()
        var config = DiskTier.Configuration()
        config.useInotify = false
        let disk = try DiskTier(directory: scratch.path + "/disk", configuration: config)
        let format = ImageTableFormat(name: "t128", family: "t", size: PixelSize(width: 128, height: 128), mode: .fit, maximumCount: 16)
        let tables = try ImageTableCache(directory: scratch.path + "/tables", formats: [format])
        let source = CountingSource()
        let cache = try ImageCache(disk: disk, tables: tables, source: source)
        _ = try await cache.image(for: request(Self.photo, 128, 128))
        _ = try await cache.image(for: request(Self.photo, 512, 512))
        disk.flush()
        #expect(disk.statistics.entries == 2)
        await cache.remove(key: CacheKey(Self.photo))
        #expect(cache.cachedImage(for: request(Self.photo, 512, 512)) == nil)
        #expect(disk.statistics.entries == 0)
        #expect(try tables.table(named: "t128").entry(for: CacheKey(Self.photo).entityID) == nil)
        let again = try await cache.image(for: request(Self.photo, 512, 512))
        #expect(again.tier == .source && source.fetches.load(ordering: .relaxed) == 3)
    }

    @Test func invalidRequestsAreRefused() async throws {
        let cache = try ImageCache(source: CountingSource())
        await #expect(throws: ImageCacheError.self) { try await cache.image(for: request(Self.photo, 0, 10)) }
        await #expect(throws: ImageCacheError.self) { try await cache.image(for: request(Self.photo, 10, 10, tolerance: 2)) }
        await #expect(throws: ImageCacheError.self) { try await cache.image(for: request("", 10, 10)) }
        #expect(cache.statistics.engine.errors["invalid_request"] == 3)
    }

    @Test func optionsAreValidated() {
        var options = ImageCache.Options()
        options.defaultTolerance = 1.5
        #expect(throws: ImageCacheConfigurationError(key: "defaultTolerance", reason: "must be within 0...1, got 1.5")) {
            try ImageCache(source: nil, options: options)
        }
    }
}

@Suite("ImageCache lanes and invalidation", .serialized, .timeLimit(.minutes(5)))
struct ImageCacheLaneTests {
    func request(_ key: String, _ w: Int) -> ImageRequest {
        ImageRequest(key: CacheKey(key), box: PixelSize(width: w, height: w))
    }

    /// An engine with one thread, held by a job the test releases.
    func heldEngine() throws -> (ImageCache, DispatchSemaphore) {
        var options = ImageCache.Options()
        options.width = 1
        let cache = try ImageCache(source: CountingSource(), options: options)
        let release = DispatchSemaphore(value: 0)
        let started = DispatchSemaphore(value: 0)
        try cache.pool.submit { _ in
            started.signal()
            release.wait()
        }
        started.wait()
        return (cache, release)
    }

    @Test func prefetchWorkWaitsWhileUrgentWorkIsQueued() async throws {
        let (cache, release) = try heldEngine()
        let started = Lock<[Lane]>([])
        cache.pool.observeJobStarts { lane, awaited in if awaited { started.withLock { $0.append(lane) } } }
        // Five prefetches of sizes too far apart to share work, then one urgent request.
        let prefetches = cache.prefetch([100, 200, 400, 800, 1600].map { request(ImageCacheTests.photo, $0) })
        #expect(await eventually { cache.pool.queueDepths.prefetch == 5 })
        let urgent = cache.task(for: request(ImageCacheTests.small, 256))
        #expect(await eventually { cache.pool.queueDepths.urgent == 1 })
        release.signal()
        _ = try await urgent.value
        for task in prefetches { _ = try await task.value }
        // The urgent render started first although it was queued last.
        #expect(started.withLock { $0 } == [.urgent] + Array(repeating: .prefetch, count: 5))
        #expect(cache.statistics.engine.sourceDecodes == 6)
    }

    @Test func deprioritizeAndPrioritizeMoveAQueuedRequest() async throws {
        let (cache, release) = try heldEngine()
        let task = cache.task(for: request(ImageCacheTests.photo, 300))
        #expect(await eventually { cache.pool.queueDepths.urgent == 1 })
        cache.deprioritize(task)
        #expect(task.priority == .prefetch)
        #expect(cache.pool.queueDepths == (urgent: 0, prefetch: 1))
        // A second, urgent request for the same image joins the work and lifts it back.
        let joiner = cache.task(for: request(ImageCacheTests.photo, 310))
        #expect(await eventually { cache.pool.queueDepths.urgent == 1 && cache.pool.queueDepths.prefetch == 0 })
        joiner.cancel()
        #expect(await eventually { cache.pool.queueDepths.prefetch == 1 })
        cache.prioritize(task)
        #expect(cache.pool.queueDepths == (urgent: 1, prefetch: 0))
        release.signal()
        let served = try await task.value
        #expect(served.tier == .source && cache.statistics.engine.sourceDecodes == 1)
    }

    @Test func filesDeletedByAnotherProcessLeaveMemoryToo() async throws {
        let scratch = ScratchDirectory()
        let writer = try ImageCache(disk: DiskTier(directory: scratch.path), source: CountingSource())
        _ = try await writer.image(for: request(ImageCacheTests.photo, 512))
        writer.disk!.flush()
        // A second engine (another memory tier, its own watcher) serves it from disk.
        let reader = try ImageCache(disk: DiskTier(directory: scratch.path), source: nil)
        let hit = try await reader.image(for: request(ImageCacheTests.photo, 512))
        #expect(hit.tier == .disk)
        #expect(reader.cachedImage(for: request(ImageCacheTests.photo, 512)) != nil)
        // Another process deletes the file.
        let file = try #require(scratch.names().first { $0.contains("512x320") })
        let start = ContinuousClock.now
        try run("/bin/rm", [scratch.path + "/" + file])
        #expect(await eventually { reader.cachedImage(for: request(ImageCacheTests.photo, 512)) == nil })
        let elapsed = ContinuousClock.now - start
        print("cross-process invalidation: memory copy dropped \(elapsed) after the other process's unlink")
        // Counted by the watcher thread right after it dropped the copy.
        #expect(await eventually { reader.statistics.engine.crossProcessInvalidations == 1 })
        // The reader has no source: the image is gone for it now.
        await #expect(throws: ImageCacheError.self) { try await reader.image(for: request(ImageCacheTests.photo, 512)) }
    }
}

@Suite("ImageCache metrics")
struct ImageCacheMetricsTests {
    @Test func requestsErrorsAndGaugesReachTheMetricsFactory() async throws {
        let metrics = TestMetrics()
        var options = ImageCache.Options()
        options.metricsFactory = metrics
        let cache = try ImageCache(source: CountingSource(), options: options)
        let request = ImageRequest(key: CacheKey(ImageCacheTests.photo), box: PixelSize(width: 256, height: 256))
        _ = try await cache.image(for: request)
        _ = try await cache.image(for: request)
        await #expect(throws: ImageCacheError.self) {
            try await cache.image(for: ImageRequest(key: "jpeg/absent.jpg", box: PixelSize(width: 10, height: 10)))
        }
        #expect(try metrics.expectCounter("strata_requests_total", [("tier", "source")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_requests_total", [("tier", "memory")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_source_fetches_total").totalValue == 2)
        #expect(try metrics.expectCounter("strata_errors_total", [("kind", "not_found")]).totalValue == 1)
        #expect(try metrics.expectTimer("strata_render_seconds").values.count == 1)
        #expect(try metrics.expectTimer("strata_lookup_seconds", [("tier", "memory")]).values.count == 1)
        cache.publishGauges()
        #expect(try metrics.expectGauge("strata_tier_entries", [("tier", "memory")]).lastValue == 1)
        #expect(try metrics.expectGauge("strata_queue_depth", [("lane", "urgent")]).lastValue == 0)
    }
}
