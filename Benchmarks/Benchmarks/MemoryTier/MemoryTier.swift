import Benchmark
import Strata

/// The image memory tier (`ImageMemoryTier`, what the engine and `strata serve` look up), as
/// `strata-bench memory --only tier` sets it up: 10 000 keys with one 4×4 variant each, looked
/// up by their exact box through `entry(forKey:matching:)`; misses ask for absent keys; inserts
/// add keys the full tier does not hold (an insert, then an eviction or a rejection by the
/// admission policy). 1 000 operations per iteration (the figures are per operation).
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal], scalingFactor: .kilo,
        maxDuration: .seconds(2), maxIterations: 100_000)

    Benchmark("MemoryTier hit") { benchmark, tier in
        var widths = 0
        for i in benchmark.scaledIterations {
            widths &+= tier.tier.entry(forKey: tier.resident[i], matching: tier.query)?.image.width ?? 0
        }
        precondition(widths == 4 * benchmark.scaledIterations.count)
        blackHole(widths)
    } setup: {
        TierState()
    }

    Benchmark("MemoryTier miss") { benchmark, tier in
        var found = 0
        for i in benchmark.scaledIterations where tier.tier.entry(forKey: tier.absent[i], matching: tier.query) != nil {
            found += 1
        }
        precondition(found == 0)
    } setup: {
        TierState()
    }

    Benchmark("MemoryTier insert into a full tier") { benchmark, tier in
        for _ in benchmark.scaledIterations {
            blackHole(tier.tier.insert(tier.fresh, forKey: tier.nextNewKey(), mode: .fit))
        }
    } setup: {
        TierState()
    }
}

/// A full tier and the keys the benchmarks ask for, made before the timing (a `CacheKey` costs
/// a SHA-256 of its string).
final class TierState {
    static let entries = 10_000
    let tier: ImageMemoryTier
    let query = SizeQuery(box: PixelSize(width: 4, height: 4))
    /// Held keys, spread over the key space (1 000: one iteration's worth).
    let resident: [CacheKey]
    /// Keys never inserted.
    let absent: [CacheKey]
    /// Keys inserted by the insert benchmark in turn: four times the tier's count, so that the
    /// one inserted is almost never held.
    let newKeys: [CacheKey]
    var next = 0
    let fresh = PixelImage(width: 4, height: 4)

    init() {
        let n = Self.entries
        let cost = PixelImage(width: 4, height: 4).byteCount
        let tier = ImageMemoryTier(configuration: .init(costLimit: n * cost, countLimit: n, maxEntryShare: 1))
        let keys = (0..<n).map { CacheKey("k\($0)") }
        for key in keys { tier.insert(PixelImage(width: 4, height: 4), forKey: key, mode: .fit) }
        // The keys the tier holds (its stripes' limits may have turned a few away).
        let box = SizeQuery(box: PixelSize(width: 4, height: 4))
        let held = keys.filter { tier.entry(forKey: $0, matching: box) != nil }
        self.tier = tier
        precondition(held.count > n / 2, "the tier holds \(held.count) of \(n) keys")
        resident = (0..<1_000).map { held[($0 &* 7_919 &+ 13) % held.count] }
        absent = (0..<1_000).map { CacheKey("k\(n + ($0 &* 7_919 &+ 13) % n)") }
        newKeys = (0..<4 * n).map { CacheKey("new\($0)") }
    }

    func nextNewKey() -> CacheKey {
        defer { next = next + 1 == newKeys.count ? 0 : next + 1 }
        return newKeys[next]
    }
}
