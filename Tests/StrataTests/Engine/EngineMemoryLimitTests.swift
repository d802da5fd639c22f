import Testing
@testable import Strata
import StrataTestSupport

/// `render.memoryLimit` through the engine: renders wait for room in the budget, never hold more
/// than it together, and one larger than all of it is refused with an error naming its key.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct EngineMemoryLimitTests {
    /// A PNG of `width` × `height` (PNG never shrinks on load: its renders decode in full).
    static func png(width: Int, height: Int) throws -> [UInt8] {
        var image = PixelImage(width: width, height: height, style: .bgra32Premultiplied)
        image.withUnsafeMutableBytes { raw in
            for i in stride(from: 0, to: raw.count, by: 4) {
                raw[i] = UInt8(truncatingIfNeeded: i >> 4)
                raw[i + 1] = UInt8(truncatingIfNeeded: i >> 12)
                raw[i + 2] = 0x80
                raw[i + 3] = 0xFF
            }
        }
        return try ImageEncoder.encode(image, as: .png)
    }

    @Test("concurrent big renders never reserve more than the limit together, and all are served")
    func concurrentRendersStayUnderTheLimit() async throws {
        let bytes = try Self.png(width: 2000, height: 1500)
        var originals: [String: [UInt8]] = [:]
        for i in 0..<12 { originals["big-\(i)"] = bytes }
        let limit = 48 << 20
        var options = ImageCache.Options()
        options.width = 4
        options.memoryLimit = limit
        let cache = try ImageCache(memory: nil, source: BytesSource(originals), options: options)
        // Each render: a 2000×1500 decode (12 MB) and a 1600×1200 output (7.7 MB), so at most two
        // fit at once in 48 MiB though four threads could run them.
        try await withThrowingTaskGroup(of: PixelSize.self) { group in
            for i in 0..<12 {
                group.addTask {
                    try await cache.image(for: ImageRequest(key: CacheKey("big-\(i)"), box: PixelSize(width: 1600, height: 1600))).image
                        .size
                }
            }
            for try await size in group { #expect(size == PixelSize(width: 1600, height: 1200)) }
        }
        let stats = cache.memoryBudget.statistics
        #expect(stats.peak <= limit)
        #expect(stats.peak >= 19 << 20)  // one render's estimate, at least
        #expect(stats.waits > 0)
        #expect(stats.inUse == 0 && stats.waiting == 0)
    }

    @Test("a render larger than the whole limit is refused naming its key; the engine serves on")
    func renderOverTheLimitIsRefused() async throws {
        let huge = try Self.png(width: 3000, height: 3000)
        let small = try Self.png(width: 300, height: 200)
        var options = ImageCache.Options()
        options.memoryLimit = 16 << 20
        let cache = try ImageCache(memory: nil, source: BytesSource(["huge": huge, "small": small]), options: options)
        do {
            _ = try await cache.image(for: ImageRequest(key: "huge", box: PixelSize(width: 3000, height: 3000)))
            Issue.record("a 36 MB render was let through a 16 MiB limit")
        } catch {
            guard case .overMemoryLimit(let key, let refusal) = error else {
                Issue.record("expected overMemoryLimit, got \(error)")
                return
            }
            #expect(key == "huge")
            #expect(refusal.limit == 16 << 20 && refusal.bytes > 16 << 20)
            #expect("\(error)".contains("\"huge\"") && "\(error)".contains("render.memoryLimit"))
        }
        // Another key that fits is served.
        let thumbnail = try await cache.image(for: ImageRequest(key: "small", box: PixelSize(width: 100, height: 100)))
        #expect(thumbnail.image.size == PixelSize(width: 100, height: 67))
        #expect(cache.memoryBudget.statistics.refusals == 1)
        // A higher limit through reconfigure lets it in.
        var settings = cache.reloadableSettings
        #expect(settings.renderMemoryLimit == 16 << 20)
        settings.renderMemoryLimit = 128 << 20
        try cache.reconfigure(settings)
        let served = try await cache.image(for: ImageRequest(key: "huge", box: PixelSize(width: 3000, height: 3000)))
        #expect(served.image.size == PixelSize(width: 3000, height: 3000))
    }

    @Test("a limit below 1 MiB is a configuration error naming the key")
    func badLimit() {
        var options = ImageCache.Options()
        options.memoryLimit = 1000
        #expect(throws: ImageCacheConfigurationError.self) { try options.validate() }
        var settings = ReloadableSettings(tolerance: 0.2, urgentWidth: 1, prefetchWidth: 1, renderMemoryLimit: 1000)
        #expect(throws: ConfigurationError.self) { try settings.validate() }
        settings.renderMemoryLimit = nil
        #expect(throws: Never.self) { try settings.validate() }
    }
}
