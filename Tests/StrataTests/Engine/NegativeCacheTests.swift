import Foundation
import Testing

@testable import Strata
import StrataTestSupport

@Suite("Negative cache: bounded, O(1), expiring", .timeLimit(.minutes(3)))
struct NegativeCacheTests {
    @Test func aMillionDistinctMissingKeysStayWithinTheCapacity() async throws {
        // A TTL far longer than the flood: this test is about the capacity, and under load the
        // flood has taken 44 s, so that the newest key could expire (default TTL 10 s) before
        // it was checked.
        var options = ImageCache.Options()
        options.negativeTTL = .seconds(3600)
        let cache = try ImageCache(memory: ImageMemoryTier(), source: CountingSource(), options: options)
        let capacity = cache.options.negativeCapacity
        // A million SHA-256s and inserts: on a thread of their own, not on the cooperative pool.
        try await offThePool("negative-flood") { for i in 0..<1_000_000 { cache.rememberMissing(CacheKey("missing/\(i)")) } }
        let stats = cache.statistics.engine
        #expect(stats.negativeKeys <= capacity, "\(stats.negativeKeys) keys held, capacity \(capacity)")
        #expect(stats.negativeDisplaced == 1_000_000 - capacity)
        // The newest are remembered; the oldest were forgotten first.
        #expect(Self.isNotFound { () throws(ImageCacheError) in try cache.checkNegative(CacheKey("missing/999999")) })
        try cache.checkNegative(CacheKey("missing/0"))
    }

    @Test func entriesExpireAndAReinsertedKeyLivesOn() {
        var negative = NegativeCache(capacity: 4)
        let t0 = ContinuousClock.now
        let ttl = Duration.seconds(10)
        negative.insert("a", until: t0 + ttl, now: t0)
        negative.insert("b", until: t0 + ttl, now: t0)
        #expect(negative.contains("a", now: t0 + .seconds(9)))
        #expect(!negative.contains("a", now: t0 + ttl), "expired at its TTL")
        // "b" again, later: the insert drops both expired entries, then holds "b" anew; its
        // first insertion leaves the ring without taking the second one along.
        negative.insert("b", until: t0 + .seconds(15) + ttl, now: t0 + .seconds(15))
        #expect(negative.contains("b", now: t0 + .seconds(20)))
        #expect(negative.count == 1 && negative.displaced == 0)
        // Full: the oldest live entry goes first.
        let t1 = t0 + .seconds(16)
        for key in ["c", "d", "e", "f"] { negative.insert(CacheKey(key), until: t1 + ttl, now: t1) }
        #expect(negative.count == 4 && negative.displaced == 1)
        #expect(!negative.contains("b", now: t1) && negative.contains("f", now: t1) && negative.contains("c", now: t1))
        negative.remove("c")
        #expect(!negative.contains("c", now: t1) && negative.count == 3)
        negative.removeAll()
        #expect(negative.count == 0 && !negative.contains("f", now: t1))
    }

    @Test func theEngineAnswersRememberedKeysWithoutTheSource() async throws {
        var options = ImageCache.Options()
        options.negativeCapacity = 8
        // Long enough that none expires while a loaded machine runs the twenty misses (the
        // default 10 s did, once: 6 of 8 left after 160 s).
        options.negativeTTL = .seconds(3600)
        let source = CountingSource()
        let cache = try ImageCache(memory: ImageMemoryTier(), source: source, options: options)
        for i in 0..<20 {
            let request = ImageRequest(key: CacheKey("missing/\(i).jpg"), box: PixelSize(width: 64, height: 64))
            #expect(await Self.isNotFound { () async throws(ImageCacheError) in _ = try await cache.image(for: request) })
        }
        #expect(source.fetches.load(ordering: .relaxed) == 20)
        #expect(cache.statistics.engine.negativeKeys == 8)
        // The last eight are answered from memory of their absence; the first is asked again.
        let recent = ImageRequest(key: CacheKey("missing/19.jpg"), box: PixelSize(width: 64, height: 64))
        #expect(await Self.isNotFound { () async throws(ImageCacheError) in _ = try await cache.image(for: recent) })
        #expect(source.fetches.load(ordering: .relaxed) == 20 && cache.statistics.engine.negativeHits == 1)
        let old = ImageRequest(key: CacheKey("missing/0.jpg"), box: PixelSize(width: 64, height: 64))
        #expect(await Self.isNotFound { () async throws(ImageCacheError) in _ = try await cache.image(for: old) })
        #expect(source.fetches.load(ordering: .relaxed) == 21)
    }

    static func isNotFound(_ body: () throws(ImageCacheError) -> Void) -> Bool {
        do {
            try body()
        } catch {
            if case .notFound = error { return true }
        }
        return false
    }

    static func isNotFound(_ body: () async throws(ImageCacheError) -> Void) async -> Bool {
        do {
            try await body()
        } catch {
            if case .notFound = error { return true }
        }
        return false
    }

    @Test func aBadCapacityIsAnErrorNamingTheKey() {
        var options = ImageCache.Options()
        options.negativeCapacity = 0
        #expect(throws: ImageCacheConfigurationError.self) { try options.validate() }
        do {
            try options.validate()
        } catch {
            #expect(error.key == "negativeCapacity")
        }
    }
}
