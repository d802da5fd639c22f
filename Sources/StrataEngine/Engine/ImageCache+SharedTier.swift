import StrataBase
import StrataTiers
import Tracing

extension ImageCache {
    /// The shared tier's answer (after every local tier missed), awaited without an engine
    /// thread; a hit is promoted to memory and to the disk tier (so the next one is local).
    package func sharedTierHit(
        _ request: ImageRequest, key: CacheKey, query: SizeQuery, lane: FlightLane, parent: ServiceContext?
    ) async throws(ImageCacheError) -> CachedImage? {
        guard let shared else { return nil }
        let span = keySpan("strata.tier.lookup", key: key, parent: parent)
        span?.attributes["strata.tier"] = shared.servingTier.rawValue
        defer { span?.end() }
        counters.lookedUp(shared.servingTier)
        let found: CachedImage?
        do {
            found = try await shared.load(key, query)
        } catch {
            tierFailed(error)
            found = nil
        }
        if Task.isCancelled { throw .cancelled(key: key.string) }
        guard let found else {
            span?.attributes["strata.outcome"] = "miss"
            metrics.misses[shared.servingTier]?.increment()
            return nil
        }
        span?.attributes["strata.outcome"] = "loaded"
        span?.attributes["strata.size"] = "\(found.variant.size)"
        if request.exactSize, found.variant.size != request.box, !Self.canResample(found.variant, to: request) {
            span?.attributes["strata.outcome"] = "unusable"
            return nil
        }
        memory?.store(found.image, key: key, variant: found.variant)
        disk?.store(found.image, key: key, variant: found.variant)
        return try await finish(found, for: request, lane: lane)
    }
}
