/// A tier below memory as the engine drives it: an index-only probe that never does I/O, a
/// load (blocking: the engine calls it on its own threads), a store, and the statistics every
/// tier reports in one shape. The disk tier and the image tables conform; the memory tier (a
/// synchronous lookup on the caller's thread) and the source (fetch and render) are the ends of
/// the chain and are driven directly.
protocol CacheTier: Sendable {
    /// Which tier this is, for ``CachedImage/tier`` and metrics.
    var servingTier: ServingTier { get }
    /// Whether the tier's in-memory index has a variant of `key` for `query`: no syscall.
    func probe(_ key: CacheKey, _ query: SizeQuery) -> Bool
    /// The best variant of `key` for `query`, read or mapped (blocking I/O allowed).
    func load(_ key: CacheKey, _ query: SizeQuery) -> (image: PixelImage, variant: ImageVariant)?
    /// ``load(_:_:)`` when it needs no disk I/O (the caller's thread may be Swift's cooperative
    /// pool); ``TierLoad/wouldWait`` when it would, for the caller to `load` on a blocking thread.
    func loadWithoutWaiting(_ key: CacheKey, _ query: SizeQuery) -> TierLoad
    /// Keeps `image` as `variant` of `key` (write-behind where the tier has it).
    func store(_ image: PixelImage, key: CacheKey, variant: ImageVariant)
    /// The tier's counters in the shape every tier shares.
    var tierStatistics: TierStatistics { get }
}

/// The answer of ``CacheTier/loadWithoutWaiting(_:_:)``.
enum TierLoad {
    case loaded(image: PixelImage, variant: ImageVariant)
    case miss
    case wouldWait
}

/// What every tier reports, in one shape (``ImageCacheStatistics/tiers``); each tier's own
/// statistics type keeps the details.
public struct TierStatistics: Sendable, Hashable {
    /// Lookups answered with a variant.
    public var hits: Int
    /// Lookups with no matching variant.
    public var misses: Int
    /// Variants held.
    public var entries: Int
    /// Bytes held (memory: bytes pinned; disk: bytes of files; tables: bytes on disk).
    public var bytes: Int
    /// Variants pushed out by the limits.
    public var evictions: Int

    public init(hits: Int = 0, misses: Int = 0, entries: Int = 0, bytes: Int = 0, evictions: Int = 0) {
        self.hits = hits
        self.misses = misses
        self.entries = entries
        self.bytes = bytes
        self.evictions = evictions
    }
}

extension DiskTier: CacheTier {
    var servingTier: ServingTier { .disk }

    func probe(_ key: CacheKey, _ query: SizeQuery) -> Bool {
        core.contains(digest: key.digest, query: query)
    }

    func load(_ key: CacheKey, _ query: SizeQuery) -> (image: PixelImage, variant: ImageVariant)? {
        guard let found = try? core.lookup(key: key.string, digest: key.digest, query: query) else { return nil }
        return (found.image, found.imageVariant)
    }

    func loadWithoutWaiting(_ key: CacheKey, _ query: SizeQuery) -> TierLoad {
        switch core.lookupWithoutWaiting(key: key.string, digest: key.digest, query: query) {
        case .hit(let found):
            .loaded(image: found.image, variant: found.imageVariant)
        case .miss: .miss
        case .wouldWait: .wouldWait
        }
    }

    func store(_ image: PixelImage, key: CacheKey, variant: ImageVariant) {
        store(
            image, forKey: key.string, mode: variant.descriptor.mode, isWholeOriginal: variant.isWholeOriginal,
            sourceVersion: variant.sourceVersion.stamp)
    }

    var tierStatistics: TierStatistics {
        let s = statistics
        return TierStatistics(hits: s.hits, misses: s.misses, entries: s.entries, bytes: s.bytes, evictions: s.evictions)
    }
}

extension DiskTier.Hit {
    /// The hit as the engine's variant record (fetched now: the file does not keep the time).
    var imageVariant: ImageVariant {
        ImageVariant(descriptor: variant, sourceVersion: SourceVersion(stamp: sourceVersion), isWholeOriginal: isWholeOriginal)
    }
}

extension ImageMemoryTier {
    /// The memory tier's counters in the shape every tier shares.
    public var tierStatistics: TierStatistics {
        let s = statistics
        return TierStatistics(
            hits: Int(s.hits), misses: Int(s.misses), entries: s.count, bytes: s.totalCost, evictions: Int(s.evictions))
    }
}

extension ImageTableCache {
    /// The tables' counters in the shape every tier shares (entries and bytes on disk, summed
    /// over the formats).
    public var tierStatistics: TierStatistics {
        TierStatistics(
            entries: formats.reduce(0) { $0 + ((try? table(named: $1.name).count) ?? 0) }, bytes: totalDiskUsage)
    }
}
