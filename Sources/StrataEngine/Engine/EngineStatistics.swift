import Synchronization
import StrataBase
import StrataTiers

/// The engine's own counts, beside the tiers' (``ImageCacheStatistics``).
public struct EngineStatistics: Sendable, Hashable {
    /// Calls of ``ImageCache/image(for:)``.
    public var requests = 0
    /// Requests served, by tier.
    public var served: [ServingTier: Int] = [:]
    /// Requests that joined another request's work instead of starting their own.
    public var coalesced = 0
    /// Requests that started a flight (the work below memory that joined requests share),
    /// counted when it answered.
    public var flights = 0
    /// Lookups in the tiers below memory (``CacheTier/lookup(_:_:)`` and the ``CacheTier/load(_:_:)``
    /// after a `wouldWait`), by tier. (The memory tier counts its own, as hits and misses.)
    public var lookups: [ServingTier: Int] = [:]
    /// Source fetches and renders started.
    public var sourceFetches = 0
    public var sourceDecodes = 0
    /// Larger variants resampled down for `exactSize` requests.
    public var resamples = 0
    /// Background version checks, and how many found a changed original.
    public var revalidations = 0
    public var changedOriginals = 0
    /// Requests answered from the negative cache.
    public var negativeHits = 0
    /// Missing keys remembered now (at most ``ImageCache/Options/negativeCapacity``), and live
    /// ones forgotten early because it was full.
    public var negativeKeys = 0
    public var negativeDisplaced = 0
    /// Background renders started because a hit was far from its box
    /// (``ImageCache/Options/renderAhead``); their renders count in ``sourceDecodes`` too.
    public var renderAheads = 0
    /// Variants dropped because another process deleted their disk files.
    public var crossProcessInvalidations = 0
    /// Failed requests by ``ImageCacheError/kind``.
    public var errors: [String: Int] = [:]

    public init() {}
}

/// Every tier's statistics and the engine's, taken together (each tier's snapshot is
/// consistent; they are taken one after another).
public struct ImageCacheStatistics: Sendable {
    public var engine: EngineStatistics
    /// Every configured tier's counters in one shape.
    public var tiers: [ServingTier: TierStatistics]
    public var memory: ImageMemoryTier.Statistics?
    public var disk: DiskTier.Statistics?
    /// Blocking work waiting, per lane.
    public var queues: (urgent: Int, prefetch: Int)
}

/// Lock-free counters behind ``EngineStatistics``.
package final class EngineCounters: Sendable {
    package let requests = Atomic<Int>(0)
    package let servedMemory = Atomic<Int>(0)
    package let servedDisk = Atomic<Int>(0)
    package let servedTable = Atomic<Int>(0)
    package let servedShared = Atomic<Int>(0)
    package let servedSource = Atomic<Int>(0)
    package let coalesced = Atomic<Int>(0)
    package let flights = Atomic<Int>(0)
    package let diskLookups = Atomic<Int>(0)
    package let tableLookups = Atomic<Int>(0)
    package let sharedLookups = Atomic<Int>(0)
    package let sourceFetches = Atomic<Int>(0)
    package let sourceDecodes = Atomic<Int>(0)
    package let resamples = Atomic<Int>(0)
    package let revalidations = Atomic<Int>(0)
    package let changedOriginals = Atomic<Int>(0)
    package let negativeHits = Atomic<Int>(0)
    package let renderAheads = Atomic<Int>(0)
    package let crossProcessInvalidations = Atomic<Int>(0)
    package let errors = Lock<[String: Int]>([:])

    package func served(_ tier: ServingTier) {
        switch tier {
        case .memory: servedMemory.add(1, ordering: .relaxed)
        case .disk: servedDisk.add(1, ordering: .relaxed)
        case .table: servedTable.add(1, ordering: .relaxed)
        case .shared: servedShared.add(1, ordering: .relaxed)
        case .source: servedSource.add(1, ordering: .relaxed)
        }
    }

    package func lookedUp(_ tier: ServingTier) {
        switch tier {
        case .disk: diskLookups.add(1, ordering: .relaxed)
        case .table: tableLookups.add(1, ordering: .relaxed)
        case .shared: sharedLookups.add(1, ordering: .relaxed)
        case .memory, .source: break
        }
    }

    package func countError(_ error: ImageCacheError) {
        errors.withLock { $0[error.kind, default: 0] += 1 }
    }

    package func snapshot() -> EngineStatistics {
        var s = EngineStatistics()
        s.requests = requests.load(ordering: .relaxed)
        s.served = [
            .memory: servedMemory.load(ordering: .relaxed), .disk: servedDisk.load(ordering: .relaxed),
            .table: servedTable.load(ordering: .relaxed), .shared: servedShared.load(ordering: .relaxed),
            .source: servedSource.load(ordering: .relaxed),
        ]
        s.coalesced = coalesced.load(ordering: .relaxed)
        s.flights = flights.load(ordering: .relaxed)
        s.lookups = [
            .disk: diskLookups.load(ordering: .relaxed), .table: tableLookups.load(ordering: .relaxed),
            .shared: sharedLookups.load(ordering: .relaxed),
        ]
        s.sourceFetches = sourceFetches.load(ordering: .relaxed)
        s.sourceDecodes = sourceDecodes.load(ordering: .relaxed)
        s.resamples = resamples.load(ordering: .relaxed)
        s.revalidations = revalidations.load(ordering: .relaxed)
        s.changedOriginals = changedOriginals.load(ordering: .relaxed)
        s.negativeHits = negativeHits.load(ordering: .relaxed)
        s.renderAheads = renderAheads.load(ordering: .relaxed)
        s.crossProcessInvalidations = crossProcessInvalidations.load(ordering: .relaxed)
        s.errors = errors.withLock { $0 }
        return s
    }
}
