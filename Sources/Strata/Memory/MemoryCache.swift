import Synchronization

/// Counters and current occupancy of a cache, taken atomically under its lock.
public struct CacheStatistics: Sendable, Hashable, CustomStringConvertible {
    /// Lookups that found a value.
    public var hits: UInt64
    /// Lookups that found nothing.
    public var misses: UInt64
    /// Values admitted (new keys and replacements).
    public var insertions: UInt64
    /// Values pushed out by the limits, the admission policy or a trim (not explicit removals).
    public var evictions: UInt64
    /// Inserts refused because one value would cost more than the per-entry cap.
    public var rejections: UInt64
    /// Sum of the costs of the resident values.
    public var totalCost: Int
    /// Number of resident values.
    public var count: Int
    public var costLimit: Int
    public var countLimit: Int

    public init(hits: UInt64 = 0, misses: UInt64 = 0, insertions: UInt64 = 0, evictions: UInt64 = 0,
                rejections: UInt64 = 0, totalCost: Int = 0, count: Int = 0, costLimit: Int = 0,
                countLimit: Int = 0) {
        self.hits = hits
        self.misses = misses
        self.insertions = insertions
        self.evictions = evictions
        self.rejections = rejections
        self.totalCost = totalCost
        self.count = count
        self.costLimit = costLimit
        self.countLimit = countLimit
    }

    /// `hits / (hits + misses)`, or 0 before the first lookup.
    public var hitRatio: Double {
        let lookups = hits + misses
        return lookups == 0 ? 0 : Double(hits) / Double(lookups)
    }

    public var description: String {
        "hits \(hits), misses \(misses), insertions \(insertions), evictions \(evictions), "
            + "rejections \(rejections), cost \(totalCost)/\(costLimit), count \(count)/\(countLimit)"
    }
}

extension TinyLFUCore {
    @usableFromInline
    var statistics: CacheStatistics {
        CacheStatistics(hits: hits, misses: misses, insertions: insertions, evictions: evictions,
                        rejections: rejections, totalCost: totalCost, count: count,
                        costLimit: costLimit, countLimit: countLimit)
    }
}

/// Something whose memory can be trimmed on demand (a target of ``MemoryPressureMonitor``).
public protocol MemoryTrimmable: AnyObject, Sendable {
    /// The current total cost (bytes for the image tier).
    var totalCost: Int { get }
    /// Evicts until the total cost is at most `cost`.
    func trim(toCost cost: Int)
}

/// A thread-safe key–value cache bounded by a total cost and a count, with W-TinyLFU eviction.
///
/// Use it where NSCache would be used: values that are expensive to recreate and may be
/// dropped at any time. Compared with Foundation's NSCache on Linux it is O(1) per operation
/// (NSCache's insert walks a cost-sorted list), keeps a better hit ratio than LRU on skewed
/// workloads (new keys must be more frequent than the entry they would displace), and can be
/// trimmed, listed and measured.
///
/// - Limits: the total cost never exceeds `costLimit` and the count never exceeds
///   `countLimit` once a call returns. A value costing more than `maxEntryShare × costLimit`
///   (default 10 %) is refused: it would flush most of the cache for one entry.
/// - Concurrency: one `Synchronization.Mutex` around the whole state; a hit is one hash, an
///   index probe and a bit and a counter set in the entry under it. For many small entries
///   hit from several threads, ``ShardedMemoryCache`` splits the cache by key hash (measured
///   faster with two threads); one lock is the default because shards evict independently,
///   which wastes room when entries are large. Values evicted by an operation are released
///   under the lock (``ImageMemoryTier`` releases its images after unlocking, as theirs may
///   `munmap`).
/// - Memory: about 48 bytes per entry of nodes (for word-sized keys and values), 10–20 of index and 32 of frequency sketch
///   (the sketch is capped at 32 MiB), besides the keys and values themselves.
public final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: MemoryTrimmable, Sendable {
    @usableFromInline let state: Mutex<TinyLFUCore<Key, Value>>
    /// ``ThreadSanitizerHooks``, read once here so that a lookup does not pay for the
    /// lazily initialised globals' checks twice under the lock.
    @usableFromInline let tsanAcquire: ThreadSanitizerHooks.Hook?
    @usableFromInline let tsanRelease: ThreadSanitizerHooks.Hook?

    /// - Parameters:
    ///   - costLimit: the most the costs of all resident values may add up to (≥ 0).
    ///   - countLimit: the most values that may be resident (≥ 0); `Int.max` for no limit.
    ///   - maxEntryShare: the largest share of `costLimit` one value may cost (0...1).
    public init(costLimit: Int, countLimit: Int = .max, maxEntryShare: Double = 0.10) {
        precondition(costLimit >= 0 && countLimit >= 0, "cache limits must be ≥ 0")
        precondition(maxEntryShare >= 0 && maxEntryShare <= 1, "maxEntryShare must be within 0...1")
        state = Mutex(TinyLFUCore(costLimit: costLimit, countLimit: countLimit, maxEntryShare: maxEntryShare))
        tsanAcquire = ThreadSanitizerHooks.acquire
        tsanRelease = ThreadSanitizerHooks.release
    }

    /// Runs `body` on the state under the mutex (with ThreadSanitizer annotations).
    @inlinable
    func locked<R: Sendable>(_ body: (inout TinyLFUCore<Key, Value>) -> R) -> R {
        let token = Unmanaged.passUnretained(self).toOpaque()
        let acquire = tsanAcquire, release = tsanRelease
        return state.withLock { core in
            acquire?(token)
            defer { release?(token) }
            return body(&core)
        }
    }

    /// The value for `key`, or `nil`. Counts a hit or a miss and records the access.
    @inlinable
    public func value(forKey key: Key) -> Value? {
        locked { $0.value(forKey: key) }
    }

    /// ``value(forKey:)`` with the key's `hashValue` already computed (for ``ShardedMemoryCache``).
    @inlinable
    func value(forKey key: Key, hash: Int) -> Value? {
        locked { $0.value(forKey: key, hash: hash) }
    }

    /// ``insert(_:forKey:cost:)`` with the key's `hashValue` already computed.
    @inlinable
    func insert(_ value: Value, forKey key: Key, hash: Int, cost: Int) -> Bool {
        locked { $0.insert(value, forKey: key, hash: hash, cost: cost, evicted: { _, _ in }) }
    }

    /// Whether `key` is resident, without counting a lookup or touching recency.
    @inlinable
    public func contains(_ key: Key) -> Bool {
        locked { $0.slot(for: key) != nil }
    }

    /// Inserts or replaces the value for `key`, evicting others as the limits require.
    ///
    /// Returns `false`, and leaves no value for `key` (an older one is removed, so a stale value
    /// is never served), when `cost` exceeds the per-entry cap. A negative cost counts as 0.
    @inlinable
    @discardableResult
    public func insert(_ value: Value, forKey key: Key, cost: Int) -> Bool {
        locked { $0.insert(value, forKey: key, cost: cost, evicted: { _, _ in }) }
    }

    /// Removes the value for `key` and returns it (not counted as an eviction).
    @inlinable
    @discardableResult
    public func removeValue(forKey key: Key) -> Value? {
        locked { $0.remove(key) }
    }

    /// Removes every value and forgets the access history; statistics counters are kept.
    public func removeAll() {
        locked { $0.removeAll() }
    }

    /// Evicts, least valuable first, until the total cost is at most `cost`.
    public func trim(toCost cost: Int) {
        locked { $0.trim(toCost: cost, { _, _ in }) }
    }

    /// Changes the limits (for configuration reloads), evicting at once if needed.
    public func setLimits(costLimit: Int, countLimit: Int) {
        precondition(costLimit >= 0 && countLimit >= 0, "cache limits must be ≥ 0")
        locked { $0.setLimits(costLimit: costLimit, countLimit: countLimit, { _, _ in }) }
    }

    /// Counters and occupancy, consistent with each other.
    public var statistics: CacheStatistics { locked { $0.statistics } }

    /// Sum of the resident values' costs.
    public var totalCost: Int { locked { $0.totalCost } }

    /// Number of resident values.
    public var count: Int { locked { $0.count } }

    /// The resident keys, in no particular order (O(count); for diagnostics and tests).
    public var keys: [Key] { locked { $0.keys } }
}
