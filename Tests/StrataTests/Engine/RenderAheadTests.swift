import Foundation
import MetricsTestKit
import Synchronization
import Testing
@testable import Strata
import StrataTestSupport

@Suite("ImageCache render-ahead", .timeLimit(.minutes(5)))
struct RenderAheadTests {
    static let photo = ImageCacheTests.photo  // 2048×1280
    static let small = ImageCacheTests.small  // 1024×640

    func request(_ key: String, _ w: Int, tolerance: Double? = nil, exact: Bool = false) -> ImageRequest {
        ImageRequest(key: CacheKey(key), box: PixelSize(width: w, height: w), tolerance: tolerance, exactSize: exact)
    }

    func engine(
        share: Double? = 0.5, memory: ImageMemoryTier = ImageMemoryTier(), source: CountingSource = CountingSource(),
        metrics: TestMetrics = TestMetrics()
    ) throws -> ImageCache {
        var options = ImageCache.Options()
        options.renderAhead = share
        options.metricsFactory = metrics
        return try ImageCache(memory: memory, source: source, options: options)
    }

    /// Whether a render-ahead is running or was just claimed (the claim is taken synchronously
    /// in the hit path, so its absence right after a hit proves none was started).
    func idle(_ cache: ImageCache) -> Bool { cache.renderAheads.withLock { $0.isEmpty } }

    @Test func aFarHitIsServedAndItsBoxRenderedInTheBackground() async throws {
        let metrics = TestMetrics()
        let cache = try engine(metrics: metrics)
        _ = try await cache.image(for: request(Self.photo, 1000))  // 1000×625
        // 1150: fill ratio 0.87, within the tolerance (0.2) but beyond half of it.
        let far = try await cache.image(for: request(Self.photo, 1150))
        #expect(far.tier == .memory && far.image.size.width == 1000)
        #expect(await eventually { cache.statistics.engine.renderAheads == 1 && idle(cache) })
        #expect(cache.statistics.engine.sourceDecodes == 2)
        // The box's own variant is now the closest: served, and near, so nothing more starts.
        let next = try await cache.image(for: request(Self.photo, 1160))
        #expect(next.tier == .memory && next.image.size.width == 1150)
        #expect(idle(cache))
        #expect(cache.statistics.engine.renderAheads == 1 && cache.statistics.engine.sourceDecodes == 2)
        // Requests count only what callers asked; the render-ahead has its own counter.
        #expect(cache.statistics.engine.requests == 3)
        #expect(try metrics.expectCounter("strata_render_aheads_total").totalValue == 1)
        #expect(try metrics.expectCounter("strata_requests_total", [("tier", "memory")]).totalValue == 2)
    }

    @Test func cachedImageStartsARenderAheadToo() async throws {
        let cache = try engine()
        _ = try await cache.image(for: request(Self.photo, 1000))
        let far = try #require(cache.cachedImage(for: request(Self.photo, 860)))  // ratio 1.16
        #expect(far.image.size.width == 1000)
        #expect(await eventually { cache.statistics.engine.renderAheads == 1 && idle(cache) })
        #expect(cache.cachedImage(for: request(Self.photo, 860))?.image.size.width == 860)
    }

    @Test func nearExactWholeOriginalAndOffStartNothing() async throws {
        let cache = try engine()
        _ = try await cache.image(for: request(Self.photo, 1000))
        // Near: ratio 0.95, within half the tolerance.
        #expect(try await cache.image(for: request(Self.photo, 1050)).tier == .memory)
        #expect(idle(cache))
        // Tolerance 0 and exactSize want the box itself: nothing to render ahead of.
        _ = try await cache.image(for: request(Self.photo, 1000, tolerance: 0))
        #expect(idle(cache))
        let exact = try await cache.image(for: request(Self.photo, 900, exact: true))
        #expect(exact.image.size.width == 900 && idle(cache))
        // The whole original serves larger boxes and no render can give it more pixels.
        let whole = try await cache.image(for: request(Self.small, 2048))
        #expect(whole.variant.isWholeOriginal)
        #expect(try await cache.image(for: request(Self.small, 1800)).tier == .memory)
        #expect(idle(cache))
        #expect(cache.statistics.engine.renderAheads == 0)

        let off = try engine(share: nil)
        _ = try await off.image(for: request(Self.photo, 1000))
        #expect(try await off.image(for: request(Self.photo, 1150)).tier == .memory)
        #expect(idle(off) && off.statistics.engine.renderAheads == 0 && off.statistics.engine.sourceDecodes == 1)
    }

    @Test func aStreamOfFarHitsStartsOneRender() async throws {
        // One engine fills the memory tier; a second, over the same tier, has a held source.
        let memory = ImageMemoryTier()
        _ = try await engine(share: nil, memory: memory).image(for: request(Self.photo, 1000))
        let source = CountingSource(gated: true)
        let cache = try engine(memory: memory, source: source)
        for width in 1150..<1200 {
            #expect(try await cache.image(for: request(Self.photo, width)).image.size.width == 1000)
        }
        #expect(await eventually { source.held.load(ordering: .relaxed) == 1 })
        #expect(!idle(cache))
        #expect(cache.statistics.engine.renderAheads == 1)
        source.gate!.open()
        #expect(await eventually { idle(cache) })
        #expect(source.fetches.load(ordering: .relaxed) == 1 && cache.statistics.engine.sourceDecodes == 1)
        #expect(try await cache.image(for: request(Self.photo, 1199)).image.size.width == 1150)
    }

    @Test func aFailedRenderAheadIsDroppedAndTheHitStillServed() async throws {
        var options = ImageCache.Options()
        options.renderAhead = 0.5
        let (cache, scratch, file) = try engineOverCopiedOriginal(Self.photo, options: options)
        defer { withExtendedLifetime(scratch) {} }
        _ = try await cache.image(for: request("photo.jpg", 1000))
        try FileManager.default.removeItem(atPath: file)
        #expect(try await cache.image(for: request("photo.jpg", 1150)).tier == .memory)
        #expect(await eventually { cache.statistics.engine.renderAheads == 1 && idle(cache) })
        #expect(cache.statistics.engine.errors.isEmpty, "a background failure is no request's error")
        #expect(try await cache.image(for: request("photo.jpg", 1150)).tier == .memory)
    }

    /// The option is checked here; its configuration key, `renderAhead`, in
    /// StrataConfigurationTests.
    @Test func theOptionIsChecked() throws {
        var options = ImageCache.Options()
        options.renderAhead = 1.5
        #expect(
            throws: ImageCacheConfigurationError(key: "renderAhead", reason: "must be within 0...1 (a share of the tolerance), got 1.5")
        ) { try ImageCache(source: nil, options: options) }
    }
}
