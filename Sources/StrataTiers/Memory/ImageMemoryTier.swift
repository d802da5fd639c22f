import Synchronization
import StrataBase

/// The memory tier: decoded images by key and variant, bounded in bytes, with an
/// in-memory index of the variants held per key so a tolerance lookup is a scan of a handful
/// of descriptors through ``/StrataBase/VariantMatcher/bestMatch(in:for:descriptor:)`` (the one shared rule).
///
/// Eviction is ``MemoryCache``'s W-TinyLFU; the per-key index lives under the same lock as the
/// policy, so an evicted variant leaves the index in the same critical section. Images pushed
/// out are released after the lock is dropped (releasing a mapped image is a `munmap` or a
/// table-slot unpin). Lookups take no lock while no writer holds it (`ReaderBias`): hits on
/// many threads proceed side by side, and so do misses; inserts, removals and trims wait for
/// the lookups inside to leave.
///
/// **Cost of an image** (``cost(of:fileMappingShare:)``) is the memory the tier *pins* by
/// holding it:
/// - `.heap` — `byteCount`: anonymous memory that only goes away when the tier drops it.
/// - `.tableSlot` — `byteCount`: a held slot cannot be reused by its table (FastImageCache #29),
///   and its shared pages may be dirty, so holding it is as expensive as a heap copy.
/// - `.fileMapping` — `max(page, share × byteCount)`, share 0 by default: the pages are clean
///   page cache of an immutable disk-tier file, which the kernel may reclaim under pressure
///   and fault back in without our help, so they are not pinned; what is pinned is the
///   mapping itself (a VMA, counted against `vm.max_map_count`, 65 530 by default). The count
///   limit bounds that; raise `fileMappingShare` to make mapped images compete for bytes too.
public final class ImageMemoryTier: MemoryTrimmable, Sendable {
    /// Limits and costing of an ``ImageMemoryTier``.
    public struct Configuration: Sendable, Hashable {
        /// Most bytes the held images may pin. Default 256 MiB.
        public var costLimit: Int
        /// Most images (variants) held. Default 10 000, well under `vm.max_map_count`.
        public var countLimit: Int
        /// Largest share of `costLimit` one image may cost; larger ones are refused. Default 0.10.
        public var maxEntryShare: Double
        /// Share of a file-mapped image's bytes counted as its cost (0...1; default 0, i.e. one
        /// page). See the type's discussion.
        public var fileMappingShare: Double

        public init(
            costLimit: Int = 256 << 20, countLimit: Int = 10_000, maxEntryShare: Double = 0.10,
            fileMappingShare: Double = 0
        ) {
            self.costLimit = costLimit
            self.countLimit = countLimit
            self.maxEntryShare = maxEntryShare
            self.fileMappingShare = fileMappingShare
        }

        /// Checks the values; throws a ``MemoryTierConfigurationError`` naming the bad one.
        public func validate() throws(MemoryTierConfigurationError) {
            if costLimit < 0 { throw .init(key: "costLimit", reason: "must be ≥ 0, got \(costLimit)") }
            if countLimit < 0 { throw .init(key: "countLimit", reason: "must be ≥ 0, got \(countLimit)") }
            if !(0...1).contains(maxEntryShare) {
                throw .init(key: "maxEntryShare", reason: "must be within 0...1, got \(maxEntryShare)")
            }
            if !(0...1).contains(fileMappingShare) {
                throw .init(key: "fileMappingShare", reason: "must be within 0...1, got \(fileMappingShare)")
            }
        }
    }

    /// Counters of the tier: lookups by key and tolerance, plus the underlying cache's counts.
    public struct Statistics: Sendable, Hashable {
        /// Tolerance lookups that returned an image.
        public var hits: UInt64
        /// Tolerance lookups that found no matching variant.
        public var misses: UInt64
        /// Images admitted (new variants and replacements).
        public var insertions: UInt64
        /// Images pushed out by the limits, the admission policy or a trim.
        public var evictions: UInt64
        /// Images refused because they cost more than the per-entry cap.
        public var rejections: UInt64
        /// Bytes pinned by the held images (see ``ImageMemoryTier/cost(of:fileMappingShare:)``).
        public var totalCost: Int
        /// Images (variants) held.
        public var count: Int
        /// Distinct image keys with at least one variant held.
        public var keyCount: Int
        public var costLimit: Int
        public var countLimit: Int

        /// `hits / (hits + misses)`, or 0 before the first lookup.
        public var hitRatio: Double {
            let lookups = hits + misses
            return lookups == 0 ? 0 : Double(hits) / Double(lookups)
        }
    }

    /// The variants held of one image: its key (compared on every lookup, so that two keys with
    /// one ``ImageEntityID`` could never share images) and their records.
    package struct Held {
        package var key: String
        package var variants: [ImageVariant]
    }

    package struct State: ~Copyable {
        package var cache: TinyLFUCore<VariantKey, PixelImage>
        package var configuration: Configuration
        /// Variants held per image, with their records, by the image's identity (so a disk file
        /// another process deleted, which names only the identity, finds its memory copies);
        /// always exactly the keys of `cache`, grouped.
        package var images: [ImageEntityID: Held] = [:]
        package var hits: UInt64 = 0
        package var misses: UInt64 = 0

        package mutating func forget(_ key: VariantKey) {
            guard var held = images[key.entity], let at = held.variants.firstIndex(where: { $0.descriptor == key.variant })
            else {
                preconditionFailure("memory tier index out of step with its cache")
            }
            held.variants.remove(at: at)
            images[key.entity] = held.variants.isEmpty ? nil : held
        }

        /// The variants of `key`, when its image is held.
        package func variants(of key: CacheKey) -> [ImageVariant]? {
            guard let held = images[key.entityID], held.key == key.string else { return nil }
            return held.variants
        }
    }

    private let state: Lock<State>
    /// Lets lookups read the state without the lock while no writer holds it (as
    /// ``MemoryCache``'s stripes do): hits on many threads do not take turns on one lock.
    private let readers = ReaderBias(structures: 1)
    /// The configuration in force.
    public var configuration: Configuration { locked { $0.configuration } }

    /// A tier with `configuration`; traps on values ``Configuration/validate()`` rejects
    /// (validate first to turn them into an error).
    public init(configuration: Configuration = Configuration()) {
        do { try configuration.validate() } catch { preconditionFailure("\(error)") }
        state = Lock(
            State(
                cache: TinyLFUCore(
                    costLimit: configuration.costLimit, countLimit: configuration.countLimit,
                    maxEntryShare: configuration.maxEntryShare),
                configuration: configuration))
    }

    /// Runs `body` on the state under the lock, beside the lock-free lookups: for reads.
    private func locked<R: Sendable>(_ body: (inout State) -> R) -> R {
        state.withLock(body)
    }

    /// Runs `body` on the state under the lock with the lock-free lookups turned away, after
    /// counting the hits they took: for every change to the index or the cache.
    private func exclusive<R: Sendable>(_ body: (inout State) -> R) -> R {
        state.withLock { state in
            let shared = readers.revoke(0)
            state.misses &+= shared.misses
            if shared.hits != 0 {
                state.hits &+= shared.hits
                state.cache.absorbSharedHits(shared.hits)
            }
            defer { readers.restore(0) }
            return body(&state)
        }
    }

    /// Bytes `image` pins while held (see the type's discussion).
    public static func cost(of image: PixelImage, fileMappingShare: Double = 0) -> Int {
        switch image.storageKind {
        case .heap, .tableSlot:
            return image.byteCount
        case .fileMapping:
            return Swift.max(pageSize, cacheShare(of: image.byteCount, fileMappingShare))
        }
    }

    package static let pageSize = 4096

    /// The best held variant of `key` for `query` under the tolerance rule (``/StrataBase/VariantMatcher``), or `nil`.
    /// Counts a hit or a miss; a hit also counts as an access for the eviction policy.
    /// Cost: a hash lookup and a scan of the key's variants, without the lock unless a writer
    /// holds the tier at that moment.
    public func image(forKey key: CacheKey, matching query: SizeQuery) -> (PixelImage, VariantDescriptor)? {
        entry(forKey: key, matching: query).map { ($0.image, $0.variant.descriptor) }
    }

    /// The best held variant of `key` for `query` with its record (source version, whether it
    /// is the whole original — which then serves any `fit` box containing it unless the query
    /// allows upscaling — and when it was fetched), or `nil`. Counts a hit or a miss. Allocates
    /// nothing on a miss. Takes no lock unless a writer holds the tier at that moment (see
    /// `ReaderBias`).
    public func entry(
        forKey key: CacheKey, matching query: SizeQuery
    ) -> (image: PixelImage, variant: ImageVariant)? {
        find(key, query, countingMiss: true)
    }

    /// ``entry(forKey:matching:)`` asked again for a request that has already counted its miss
    /// (the engine, once more before it renders): a hit is counted, a miss is not.
    package func entryAgain(
        forKey key: CacheKey, matching query: SizeQuery
    ) -> (image: PixelImage, variant: ImageVariant)? {
        find(key, query, countingMiss: false)
    }

    private func find(_ key: CacheKey, _ query: SizeQuery, countingMiss: Bool) -> (image: PixelImage, variant: ImageVariant)? {
        if let cell = readers.enter(0) {
            let found = Self.lookup(state.state.pointee, key, query)
            if found != nil || !countingMiss { readers.leave(cell, hit: found != nil) } else { readers.leaveMissing(cell) }
            return found
        }
        // A writer held the tier: the same lookup under the lock, counted there.
        return exclusive { state -> (image: PixelImage, variant: ImageVariant)? in
            let found = Self.lookup(state, key, query)
            if found != nil {
                state.hits &+= 1
                state.cache.absorbSharedHits(1)
            } else if countingMiss {
                state.misses &+= 1
            }
            return found
        }
    }

    /// The lookup: reads the index and the cache, recording a hit only in the entry's atomic
    /// hit state (``TinyLFUCore/sharedHit(_:hash:)``); the caller counts it. Safe without the
    /// lock while writers are kept out.
    private static func lookup(
        _ state: borrowing State, _ key: CacheKey, _ query: SizeQuery
    ) -> (image: PixelImage, variant: ImageVariant)? {
        guard let held = state.images[key.entityID], held.key == key.string,
            let best = ImageVariant.bestMatch(in: held.variants, for: query)
        else { return nil }
        let vkey = VariantKey(entity: key.entityID, variant: best.descriptor)
        return state.cache.sharedHit(vkey, hash: vkey.hashValue).map { ($0, best) }
    }

    /// The variants of `key` held now (a snapshot, in no particular order).
    public func variants(forKey key: CacheKey) -> [VariantDescriptor] {
        locked { $0.variants(of: key)?.map(\.descriptor) ?? [] }
    }

    /// The records of the variants of `key` held now (a snapshot, in no particular order).
    public func records(forKey key: CacheKey) -> [ImageVariant] {
        locked { $0.variants(of: key) ?? [] }
    }

    /// Holds `image` as the variant (its size, `mode`, its style) of `key`, replacing an equal
    /// variant. Returns `false` when it costs more than the per-entry cap (and then no variant
    /// with that descriptor is held afterwards). Evicted images are released after the lock.
    @discardableResult
    public func insert(_ image: PixelImage, forKey key: CacheKey, mode: ContentMode) -> Bool {
        insert(image, forKey: key, variant: ImageVariant(descriptor: VariantDescriptor(size: image.size, mode: mode, style: image.style)))
    }

    /// Holds `image` as `variant` of `key` (its descriptor must be the image's size and style),
    /// replacing an equal variant and its record. Returns `false` when it costs more than the
    /// per-entry cap (and then no variant with that descriptor is held afterwards).
    @discardableResult
    public func insert(_ image: PixelImage, forKey key: CacheKey, variant: ImageVariant) -> Bool {
        precondition(
            variant.descriptor.size == image.size && variant.descriptor.style == image.style,
            "a variant record must describe its image")
        let vkey = VariantKey(entity: key.entityID, variant: variant.descriptor)
        var released: [PixelImage] = []
        let admitted = exclusive { state -> Bool in
            let cost = Self.cost(of: image, fileMappingShare: state.configuration.fileMappingShare)
            if let held = state.images[key.entityID], held.key != key.string {
                // Another key with this identity (a SHA-256 prefix collision): it leaves.
                for variant in held.variants {
                    if let image = state.cache.remove(VariantKey(entity: key.entityID, variant: variant.descriptor)) {
                        released.append(image)
                    }
                }
                state.images[key.entityID] = nil
            }
            // The index learns the variant first, so that every later removal (an eviction of
            // this very entry included) finds it there.
            if let old = state.cache.peek(vkey) {
                released.append(old)  // a replaced image is also released after the lock
                if let at = state.images[key.entityID]?.variants.firstIndex(where: { $0.descriptor == variant.descriptor }) {
                    state.images[key.entityID]!.variants[at] = variant
                }
            } else {
                state.images[key.entityID, default: Held(key: key.string, variants: [])].variants.append(variant)
            }
            var gone: [VariantKey] = []
            let admitted = state.cache.insert(image, forKey: vkey, cost: cost) { evictedKey, evictedImage in
                gone.append(evictedKey)
                released.append(evictedImage)
            }
            for evictedKey in gone { state.forget(evictedKey) }
            if !admitted { state.forget(vkey) }  // a refused insert also drops an older equal variant
            return admitted
        }
        released.removeAll()  // the last references may unmap: outside the lock
        return admitted
    }

    /// Drops the variants whose record satisfies `predicate` of the image `entity` — a disk file
    /// another process deleted names only that; returns how many were dropped.
    @discardableResult
    package func remove(entity: ImageEntityID, where predicate: (ImageVariant) -> Bool) -> Int {
        drop(entity, of: nil, where: predicate)
    }

    /// Drops the variants of image `entity` whose record satisfies `predicate` — only if the
    /// held key is `key`, when given; returns how many were dropped.
    private func drop(_ entity: ImageEntityID, of key: CacheKey?, where predicate: (ImageVariant) -> Bool) -> Int {
        var released: [PixelImage] = []
        exclusive { state in
            guard let held = state.images[entity], key == nil || held.key == key!.string else { return }
            for variant in held.variants where predicate(variant) {
                let vkey = VariantKey(entity: entity, variant: variant.descriptor)
                if let image = state.cache.remove(vkey) { released.append(image) }
                state.forget(vkey)
            }
        }
        defer { released.removeAll() }
        return released.count
    }

    /// Marks the variants of `key` made from `version` as checked at `time` (a revalidation that
    /// found the original unchanged); returns how many were updated.
    @discardableResult
    public func refresh(key: CacheKey, version: SourceVersion, fetchedAt time: ContinuousClock.Instant) -> Int {
        exclusive { state in
            guard var held = state.variants(of: key) else { return 0 }
            var updated = 0
            for i in held.indices where held[i].sourceVersion == version {
                held[i].fetchedAt = time
                updated += 1
            }
            state.images[key.entityID]!.variants = held
            return updated
        }
    }

    /// Drops the variants of `key` whose record satisfies `predicate` (a changed source
    /// version, files another process deleted); returns how many were dropped.
    @discardableResult
    public func remove(key: CacheKey, where predicate: (ImageVariant) -> Bool) -> Int {
        drop(key.entityID, of: key, where: predicate)
    }

    /// Drops every variant of every key with operations derived from the source key whose
    /// identity is `source` (``/StrataBase/ImageEntityID/isFamily(of:)``); returns how many
    /// were dropped. A scan of the held images: for a purge.
    @discardableResult
    public func removeFamily(of source: ImageEntityID) -> Int {
        let members = exclusive { state in state.images.keys.filter { $0.isFamily(of: source) } }
        return members.reduce(0) { $0 + drop($1, of: nil, where: { _ in true }) }
    }

    /// Drops every variant of `key`.
    public func remove(key: CacheKey) {
        remove(key: key) { _ in true }
    }

    /// Drops every image.
    public func removeAll() {
        var released: [PixelImage] = []
        exclusive { state in
            released = state.cache.residentValues
            state.cache.removeAll()
            state.images.removeAll()
        }
        released.removeAll()
    }

    /// Evicts, least valuable first, until the held images cost at most `cost` bytes.
    public func trim(toCost cost: Int) {
        var released: [PixelImage] = []
        exclusive { state in
            var gone: [VariantKey] = []
            state.cache.trim(toCost: cost) { key, image in
                gone.append(key)
                released.append(image)
            }
            for key in gone { state.forget(key) }
        }
        released.removeAll()
    }

    /// Applies new limits (a configuration reload), evicting at once if needed.
    public func reconfigure(_ configuration: Configuration) throws(MemoryTierConfigurationError) {
        try configuration.validate()
        var released: [PixelImage] = []
        exclusive { state in
            state.configuration = configuration
            var gone: [VariantKey] = []
            state.cache.setLimits(
                costLimit: configuration.costLimit, countLimit: configuration.countLimit,
                maxEntryShare: configuration.maxEntryShare
            ) { key, image in
                gone.append(key)
                released.append(image)
            }
            for key in gone { state.forget(key) }
        }
        released.removeAll()
    }

    /// Bytes pinned by the held images.
    public var totalCost: Int { locked { $0.cache.totalCost } }

    /// Counters and occupancy, consistent with each other.
    public var statistics: Statistics {
        exclusive { state in
            Statistics(
                hits: state.hits, misses: state.misses, insertions: state.cache.insertions,
                evictions: state.cache.evictions, rejections: state.cache.rejections,
                totalCost: state.cache.totalCost, count: state.cache.count,
                keyCount: state.images.count, costLimit: state.cache.costLimit,
                countLimit: state.cache.countLimit)
        }
    }

    /// Checks that the per-key index lists exactly the held variants (for tests).
    package func indexIsConsistent() -> Bool {
        locked { state in
            let fromIndex = state.images.flatMap { entity, held in
                held.variants.map { VariantKey(entity: entity, variant: $0.descriptor) }
            }
            return fromIndex.count == state.cache.count && Set(fromIndex) == Set(state.cache.keys)
        }
    }
}

/// A memory-tier setting out of range (see ``/StrataBase/ConfigurationError``).
public typealias MemoryTierConfigurationError = ConfigurationError
