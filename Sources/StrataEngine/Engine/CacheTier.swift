import StrataBase
import StrataTiers
/// One tier of the cache as the engine drives it — memory, disk and the image tables implement
/// it, keyed by ``/StrataBase/CacheKey`` and answering with ``/StrataBase/ImageVariant`` records that carry everything
/// the one match rule (``/StrataBase/VariantMatcher``) needs:
///
/// - ``lookup(_:_:)`` decides from the tier's in-memory index and serves what needs no I/O;
///   ``/StrataBase/TierLookup/wouldWait`` sends the caller to ``load(_:_:)`` on a blocking thread;
/// - ``remove(_:)`` may block (file deletions);
/// - ``tierStatistics`` in the shape every tier shares.
///
/// An I/O failure is a ``TierFailure`` naming the tier and the key, never a miss in disguise:
/// the engine counts it (`_tier_errors_total{tier}`), logs it, and goes on to the next tier or
/// the source. Tiers that keep what the engine renders are also ``WritableCacheTier``s.
///
/// `ImageCache` walks its tiers in order with these calls and writes promotion and write-back
/// once. (The memory tier's own fast path calls the same lookup on its concrete type.)
public protocol CacheTier: Sendable {
    /// Which tier this is, for ``CachedImage/tier`` and metrics.
    var servingTier: ServingTier { get }
    /// The best variant of `key` for `query` when serving it needs no I/O; a miss decided from
    /// the index; or ``/StrataBase/TierLookup/wouldWait``. Safe on Swift's cooperative pool.
    func lookup(_ key: CacheKey, _ query: SizeQuery) -> TierLookup<CachedImage>
    /// The best variant of `key` for `query`, read or mapped (blocking I/O allowed); `nil` for
    /// a miss, a ``TierFailure`` when the tier's files could not be read.
    func load(_ key: CacheKey, _ query: SizeQuery) throws(TierFailure) -> CachedImage?
    /// Drops every variant of `key` (may block: call it on a blocking thread).
    func remove(_ key: CacheKey) throws(TierFailure)
    /// Drops every variant of the keys with operations derived from `sourceKey` (a purge; may
    /// block). Tiers that never hold such keys do nothing.
    func removeOperationVariants(of sourceKey: String) throws(TierFailure)
    /// The tier's counters in the shape every tier shares.
    var tierStatistics: TierStatistics { get }
}

extension CacheTier {
    /// Tiers that never hold keys with operations (the image tables) have none to drop.
    public func removeOperationVariants(of sourceKey: String) throws(TierFailure) {}
}

/// A tier the engine writes back into: every render and every promotion is kept by memory
/// and disk through ``store(_:key:variant:)``. The image tables are not one — a table entry is
/// drawn a whole family at a time from one source load (`ImageCache.tableFill`), never from a
/// single variant.
public protocol WritableCacheTier: CacheTier {
    /// Keeps `image` as `variant` of `key`, without blocking (write-behind where the tier has
    /// it; a tier that cannot hold that variant ignores it).
    func store(_ image: PixelImage, key: CacheKey, variant: ImageVariant)
}

/// A tier on the network, shared by a fleet (the S3 shared tier, in StrataS3): asked after every
/// local tier below memory and before a render, without holding one of the engine's threads —
/// its ``load(_:_:)`` is awaited on Swift's cooperative pool, bounded by its own deadline. A hit
/// is promoted to memory and disk; renders are written to it behind the answer (``store(_:key:variant:)``
/// queues, never waits); purges reach it (``remove(_:)``). `ImageCache.removeAll()` does not
/// empty it: it is the fleet's, not this node's.
public protocol RemoteCacheTier: Sendable {
    /// Which tier this is (``ServingTier/shared``), for ``CachedImage/tier`` and metrics.
    var servingTier: ServingTier { get }
    /// The best variant of `key` for `query`, or `nil` for a miss — also when the store is down,
    /// slow past its deadline or answers a corrupt object (each counted by the tier). Throws
    /// only when the caller's task is cancelled.
    func load(_ key: CacheKey, _ query: SizeQuery) async throws(TierFailure) -> CachedImage?
    /// Queues `image` as `variant` of `key` for upload; drops it (counted) when the queue is full.
    func store(_ image: PixelImage, key: CacheKey, variant: ImageVariant)
    /// Deletes every variant of each of `keys` from the store (a purge passes every key derived
    /// from one original at once).
    func remove(_ keys: [CacheKey]) async throws(TierFailure)
    /// The tier's counters in the shape every tier shares.
    var tierStatistics: TierStatistics { get }
    /// The tier's own counters by name (errors, corrupt objects, bytes read and written, uploads
    /// dropped…), for `/stats`.
    var detailedStatistics: [String: Int] { get }
}

/// A tier's I/O failure (a disk file that cannot be read or deleted, a table that cannot be
/// opened): which tier, which key, and what failed. The engine serves on without that tier's
/// answer; `ImageCacheError/tier(_:)` carries one when a request cannot.
public struct TierFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The tier that failed.
    public var tier: ServingTier
    /// The key it was asked about (empty for a failure of the whole tier, e.g. emptying it).
    public var key: String
    /// What failed: the call and the path where the tier names them.
    public var reason: String

    public init(tier: ServingTier, key: String, reason: String) {
        self.tier = tier
        self.key = key
        self.reason = reason
    }

    public var description: String {
        key.isEmpty ? "the \(tier) tier failed: \(reason)" : "the \(tier) tier failed for \(key.debugDescription): \(reason)"
    }
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

extension DiskTier: WritableCacheTier {
    public var servingTier: ServingTier { .disk }

    public func lookup(_ key: CacheKey, _ query: SizeQuery) -> TierLookup<CachedImage> {
        switch core.lookupWithoutWaiting(key: key.string, digest: key.entityID, query: query) {
        case .hit(let found): .hit(found.cachedImage)
        case .miss: .miss
        case .wouldWait: .wouldWait
        }
    }

    public func load(_ key: CacheKey, _ query: SizeQuery) throws(TierFailure) -> CachedImage? {
        do throws(DiskTierError) {
            return try core.lookup(key: key.string, digest: key.entityID, query: query)?.cachedImage
        } catch {
            throw TierFailure(tier: .disk, key: key.string, reason: "\(error)")
        }
    }

    public func store(_ image: PixelImage, key: CacheKey, variant: ImageVariant) {
        guard variant.descriptor.style == image.style, variant.descriptor.size == image.size else { return }
        // A key with operations too long to keep verbatim would be stored as its plain digest,
        // which its file name (the family's identity) does not match: such variants stay in memory.
        if key.string.utf8.count > DiskTier.maximumKeyLength, !key.operations.isEmpty { return }
        store(
            image, forKey: key.string, mode: variant.descriptor.mode, isWholeOriginal: variant.isWholeOriginal,
            sourceVersion: variant.sourceVersion.stamp)
    }

    public func remove(_ key: CacheKey) throws(TierFailure) { core.remove(digest: key.entityID) }

    public var tierStatistics: TierStatistics {
        let s = statistics
        return TierStatistics(hits: s.hits, misses: s.misses, entries: s.entries, bytes: s.bytes, evictions: s.evictions)
    }
}

extension DiskTier.Hit {
    /// The hit as the engine's record (fetched now: the file does not keep the time).
    package var cachedImage: CachedImage {
        CachedImage(
            image: image,
            variant: ImageVariant(
                descriptor: variant, sourceVersion: SourceVersion(stamp: sourceVersion), isWholeOriginal: isWholeOriginal),
            tier: .disk)
    }
}

extension ImageMemoryTier: WritableCacheTier {
    public var servingTier: ServingTier { .memory }

    public func lookup(_ key: CacheKey, _ query: SizeQuery) -> TierLookup<CachedImage> {
        entry(forKey: key, matching: query).map { .hit(CachedImage(image: $0.image, variant: $0.variant, tier: .memory)) } ?? .miss
    }

    public func load(_ key: CacheKey, _ query: SizeQuery) throws(TierFailure) -> CachedImage? {
        entry(forKey: key, matching: query).map { CachedImage(image: $0.image, variant: $0.variant, tier: .memory) }
    }

    /// Keeps `image` — as a heap copy when it maps a table slot: the memory tier never pins table
    /// slots, so holding images here can never fill a table.
    public func store(_ image: PixelImage, key: CacheKey, variant: ImageVariant) {
        insert(image.storageKind == .tableSlot ? image.heapCopy() : image, forKey: key, variant: variant)
    }

    public func remove(_ key: CacheKey) throws(TierFailure) { remove(key: key) }

    public func removeOperationVariants(of sourceKey: String) throws(TierFailure) {
        removeFamily(of: ImageEntityID(hashing: sourceKey))
    }

    /// The memory tier's counters in the shape every tier shares.
    public var tierStatistics: TierStatistics {
        let s = statistics
        return TierStatistics(
            hits: Int(s.hits), misses: Int(s.misses), entries: s.count, bytes: s.totalCost, evictions: Int(s.evictions))
    }
}

extension ImageTableCache: CacheTier {
    public var servingTier: ServingTier { .table }

    /// The best configured format for `query` (``/StrataBase/VariantMatcher``'s rule), if any.
    public func format(for query: SizeQuery) -> ImageTableFormat? {
        VariantMatcher.bestMatch(in: formats, for: query, descriptor: \.descriptor)
    }

    /// The entry of `key` in the format that best matches `query`, whatever source version it
    /// was drawn from (freshness is the engine's business); ``/StrataBase/TierLookup/wouldWait`` when the
    /// table's index must first be brought up to date (another process changed it: O(slots)).
    public func lookup(_ key: CacheKey, _ query: SizeQuery) -> TierLookup<CachedImage> {
        read(key, query, maintain: false)
    }

    public func load(_ key: CacheKey, _ query: SizeQuery) throws(TierFailure) -> CachedImage? {
        guard let format = format(for: query) else { return nil }
        do throws(ImageTableError) {
            if case .hit(let found) = read(key, format: format, table: try table(named: format.name), maintain: true) { return found }
            return nil
        } catch {
            throw TierFailure(tier: .table, key: key.string, reason: "table \(format.name): \(error)")
        }
    }

    /// The non-blocking read: a table that is not open yet (or cannot be opened) is left to
    /// ``load(_:_:)``, which opens it on a blocking thread and reports a failure.
    private func read(_ key: CacheKey, _ query: SizeQuery, maintain: Bool) -> TierLookup<CachedImage> {
        guard let format = format(for: query) else { return .miss }
        guard let table = openTable(named: format.name) else { return .wouldWait }
        return read(key, format: format, table: table, maintain: maintain)
    }

    private func read(_ key: CacheKey, format: ImageTableFormat, table: ImageTable, maintain: Bool) -> TierLookup<CachedImage> {
        switch table.read(key.entityID, sourceVersion: nil, maintain: maintain) {
        case .hit((let image, let version)):
            let variant = ImageVariant(
                descriptor: VariantDescriptor(size: image.size, mode: format.mode, style: format.style),
                sourceVersion: SourceVersion(stamp: version))
            return .hit(CachedImage(image: image, variant: variant, tier: .table))
        case .miss: return .miss
        case .wouldWait: return .wouldWait
        }
    }

    /// Deletes `key`'s entries in every format, on the calling thread (blocking). Every format
    /// is tried; the first failure is thrown after the others were.
    public func remove(_ key: CacheKey) throws(TierFailure) {
        var failure: TierFailure?
        for format in formats {
            do throws(ImageTableError) {
                try table(named: format.name).delete(key.entityID)
            } catch {
                failure = failure ?? TierFailure(tier: .table, key: key.string, reason: "table \(format.name): \(error)")
            }
        }
        if let failure { throw failure }
    }

    /// The tables' counters in the shape every tier shares (entries and bytes on disk, summed
    /// over the formats that are open: statistics never open a table).
    public var tierStatistics: TierStatistics {
        TierStatistics(entries: formats.reduce(0) { $0 + (openTable(named: $1.name)?.count ?? 0) }, bytes: totalDiskUsage)
    }
}
