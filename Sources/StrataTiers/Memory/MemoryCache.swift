import StrataBase
#if canImport(Glibc)
import Glibc
#endif
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

    public init(
        hits: UInt64 = 0, misses: UInt64 = 0, insertions: UInt64 = 0, evictions: UInt64 = 0,
        rejections: UInt64 = 0, totalCost: Int = 0, count: Int = 0, costLimit: Int = 0,
        countLimit: Int = 0
    ) {
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
    package var statistics: CacheStatistics {
        CacheStatistics(
            hits: hits, misses: misses, insertions: insertions, evictions: evictions,
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
///   `countLimit` once a call returns (with calls still running on other threads, by at most
///   what those calls are inserting). A value costing more than `maxEntryShare × costLimit`
///   (default 10 %) is refused: it would flush most of the cache for one entry.
/// - Concurrency: the keys are split by hash into *stripes*, each a W-TinyLFU policy (index,
///   window, probation, protected, frequency sketch) behind its own ``/StrataBase/Lock``. Hits take no
///   lock: each stripe is read-biased (`ReaderBias`), so a hit counts itself on its
///   processor's line, reads the index while no writer holds the stripe, and records the hit in
///   the entry's atomic hit state; writers (inserts, removals, and misses when the sketch is
///   due to halve) take the lock and wait for the readers inside to leave — a read-mostly load
///   scales with cores (16 threads ≈ 8× one at 100 000 entries, README). The limits stay global:
///   two atomic counters hold the whole cache's cost and count, and an insert that takes them
///   over evicts (by the policy, in its own stripe first) until they fit — a large entry is
///   not confined to a stripe's share. With one stripe the policy is exact W-TinyLFU; with
///   several, each stripe admits and evicts by its own frequencies (miss ratios on the Zipf
///   traces within a point of one stripe: `strata-bench memory`). The default is one stripe
///   for small caches and `2 × cores` (a power of two, at most 64) once each stripe can hold
///   at least 256 entries. Values evicted by an operation are released under the stripe's lock
///   (``ImageMemoryTier`` releases its images after unlocking, as theirs may `munmap`).
/// - Memory: per entry, a 32-byte node and, at each index position (load 0.4–0.8), an 8-byte
///   word, the key, the value and 4 bytes of hit state (35–70 bytes for word-sized keys and
///   values), plus 32 of frequency sketch (capped at 32 MiB per stripe), besides what the keys
///   and values point to; and 16 bytes of reader counts per stripe per processor. A hit touches
///   only its index position and its processor's count line, as a plain hash map's touches its
///   position.
public final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: MemoryTrimmable, Sendable {
    @usableFromInline package let stripes: [Lock<TinyLFUCore<Key, Value>>]
    /// Lets hits skip the stripes' locks while no writer holds them.
    @usableFromInline package let readers: ReaderBias
    /// `64 - log2(stripes)`: a hash's stripe is its top bits after a multiply (independent of
    /// the low bits each stripe's index uses); 64 with one stripe.
    @usableFromInline package let shift: Int
    /// Whole-cache cost and count, kept by striped caches (one stripe keeps its own).
    @usableFromInline package let totalCostCounter = Atomic<Int>(0)
    @usableFromInline package let countCounter = Atomic<Int>(0)
    @usableFromInline package let costLimitValue: Atomic<Int>
    @usableFromInline package let countLimitValue: Atomic<Int>
    @usableFromInline package let maxEntryShare: Double

    /// - Parameters:
    ///   - costLimit: the most the costs of all resident values may add up to (≥ 0).
    ///   - countLimit: the most values that may be resident (≥ 0); `Int.max` for no limit.
    ///   - maxEntryShare: the largest share of `costLimit` one value may cost (0...1).
    ///   - stripes: a power of two ≥ 1; `nil` for the default (see the type's discussion).
    public init(costLimit: Int, countLimit: Int = .max, maxEntryShare: Double = 0.10, stripes: Int? = nil) {
        precondition(costLimit >= 0 && countLimit >= 0, "cache limits must be ≥ 0")
        precondition(maxEntryShare >= 0 && maxEntryShare <= 1, "maxEntryShare must be within 0...1")
        let n = stripes ?? Self.defaultStripes(costLimit: costLimit, countLimit: countLimit)
        precondition(n >= 1 && n & (n - 1) == 0, "stripes must be a power of two")
        self.maxEntryShare = maxEntryShare
        costLimitValue = Atomic(costLimit)
        countLimitValue = Atomic(countLimit)
        shift = 64 - n.trailingZeroBitCount
        readers = ReaderBias(structures: n)
        let entryCap = cacheShare(of: costLimit, maxEntryShare)
        self.stripes = (0..<n).map { _ in
            var core = TinyLFUCore<Key, Value>(
                costLimit: costLimit / n, countLimit: countLimit == .max ? .max : countLimit / n,
                maxEntryShare: maxEntryShare)
            if n > 1 {
                core.maxEntryCostOverride = entryCap
                core.externalExcess = (0, 0)
                core.computeBudgets()
            }
            return Lock(core)
        }
    }

    /// The default stripe count: `2 × cores` rounded up to a power of two (at most 64) when
    /// every stripe can hold 256 entries by both limits; otherwise one (exact W-TinyLFU).
    public static func defaultStripes(costLimit: Int, countLimit: Int) -> Int {
        let cores = Processors.online
        var n = 1
        while n < 2 * cores && n < 64 { n *= 2 }
        return costLimit / n >= 256 && countLimit / n >= 256 ? n : 1
    }

    /// The stripe of `hash`.
    @inlinable
    package func stripe(_ hash: Int) -> Int {
        shift == 64 ? 0 : Int(truncatingIfNeeded: (UInt64(bitPattern: Int64(hash)) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
    }

    @inlinable package var isStriped: Bool { shift != 64 }

    /// The value for `key`, or `nil`. Counts a hit or a miss and records the access.
    @inlinable
    public func value(forKey key: Key) -> Value? {
        let hash = key.hashValue
        // The stripes live as long as the cache (a `let` array): borrowed without a retain, which
        // would cost a retain and a release of the stripe's lock object on every lookup, two
        // atomic read-modify-writes on a line that every thread using the stripe shares.
        let s = stripe(hash)
        return Unmanaged.passUnretained(stripes[s])._withUnsafeGuaranteedRef { lock in
            // Without the lock while no writer holds the stripe (see the type's discussion).
            if let cell = readers.enter(s) {
                let value = lock.state.pointee.sharedHit(key, hash: hash)
                readers.leave(cell, hit: value != nil)
                if let value { return value }
                // A miss, seen while no writer held the stripe: only counting it needs the lock.
                lockedMiss(lock, s, hash)
                return nil
            }
            return lockedValue(lock, s, key, hash)
        }
    }

    /// Counts a miss the lock-free path saw, under the lock, beside the lock-free readers unless
    /// the sketch is due to halve. Out of line, like ``lockedValue(_:_:_:_:)``.
    @inlinable @inline(never)
    package func lockedMiss(_ lock: Lock<TinyLFUCore<Key, Value>>, _ s: Int, _ hash: Int) {
        lock.withLock { core in
            if core.sketchHalvesOnNextAccess {
                revoked(s, &core) { $0.recordMiss(hash: hash) }
            } else {
                core.recordMiss(hash: hash)
            }
        }
    }

    /// A lookup that met a writer: under the lock, beside the lock-free readers unless the
    /// sketch is due to halve. Out of line, so the hit path stays small enough to inline into
    /// callers.
    @inlinable @inline(never)
    package func lockedValue(_ lock: Lock<TinyLFUCore<Key, Value>>, _ s: Int, _ key: Key, _ hash: Int) -> Value? {
        lock.withLock { core in
            let (answered, value) = core.valueBesideSharedReaders(forKey: key, hash: hash)
            if answered { return value }
            return revoked(s, &core) { $0.value(forKey: key, hash: hash) }
        }
    }

    /// With stripe `s`'s lock held (its state is `core`): turns its lock-free readers away,
    /// counts the hits they took, runs `body`, and lets them in again.
    @inlinable
    package func revoked<R>(_ s: Int, _ core: inout TinyLFUCore<Key, Value>, _ body: (inout TinyLFUCore<Key, Value>) -> R) -> R {
        let shared = readers.revoke(s).hits  // this cache's lock-free path counts no misses
        if shared != 0 { core.absorbSharedHits(shared) }
        defer { readers.restore(s) }
        return body(&core)
    }

    /// Runs `body` on stripe `s` with its lock held and its lock-free readers turned away,
    /// after counting the hits they took since the last time.
    @inlinable
    package func exclusive<R>(_ s: Int, _ body: (inout TinyLFUCore<Key, Value>) -> R) -> R {
        stripes[s].withLock { revoked(s, &$0, body) }
    }

    /// Whether `key` is resident, without counting a lookup or touching recency.
    @inlinable
    public func contains(_ key: Key) -> Bool {
        let hash = key.hashValue
        return Unmanaged.passUnretained(stripes[stripe(hash)])._withUnsafeGuaranteedRef {  // as in `value(forKey:)`
            $0.withLock { $0.find(key, hash: hash) != nil }
        }
    }

    /// Inserts or replaces the value for `key`, evicting others as the limits require.
    ///
    /// Returns `false`, and leaves no value for `key` (an older one is removed, so a stale value
    /// is never served), when `cost` exceeds the per-entry cap. A negative cost counts as 0.
    @inlinable
    @discardableResult
    public func insert(_ value: Value, forKey key: Key, cost: Int) -> Bool {
        let hash = key.hashValue
        let s = stripe(hash)
        guard isStriped else {
            return exclusive(0) { $0.insert(value, forKey: key, hash: hash, cost: cost, evicted: { _, _ in }) }
        }
        let (admitted, costDelta, countDelta) = exclusive(s) { core in
            let before = (core.totalCost, core.count)
            // Evict inside the same critical section, so the admission duel sees the entries
            // this insert moves out of the window: as much as the whole cache will be over.
            let old = core.find(key, hash: hash).map { core.nodes[Int($0)].cost }
            core.externalExcess = (
                totalCostCounter.load(ordering: .relaxed) + Swift.max(0, cost) - (old ?? 0) - costLimitValue.load(ordering: .relaxed),
                countCounter.load(ordering: .relaxed) + (old == nil ? 1 : 0) - countLimitValue.load(ordering: .relaxed)
            )
            let admitted = core.insert(value, forKey: key, hash: hash, cost: cost, evicted: { _, _ in })
            core.externalExcess = (0, 0)
            return (admitted, core.totalCost - before.0, core.count - before.1)
        }
        totalCostCounter.add(costDelta, ordering: .relaxed)
        countCounter.add(countDelta, ordering: .relaxed)
        // Over only when this stripe had too little to evict, or other threads inserted meanwhile.
        if costDelta > 0 || countDelta > 0 { enforceLimits(from: s, sparing: admitted ? key : nil) }
        return admitted
    }

    /// Evicts until the whole cache fits its limits (or, with `costTarget`, until its cost is
    /// at most that): from stripe `first`, then the next ones. `keep` (the key just inserted) is
    /// not evicted: it fits the limits on its own.
    @usableFromInline
    package func enforceLimits(from first: Int, sparing keep: Key?, costTarget: Int? = nil) {
        var s = first
        var emptyVisits = 0
        while emptyVisits < stripes.count {
            let excessCost = totalCostCounter.load(ordering: .relaxed) - (costTarget ?? costLimitValue.load(ordering: .relaxed))
            let excessCount = costTarget != nil ? 0 : countCounter.load(ordering: .relaxed) - countLimitValue.load(ordering: .relaxed)
            guard excessCost > 0 || excessCount > 0 else { return }
            let freed = exclusive(s) {
                $0.evictExternally(cost: excessCost, count: excessCount, sparing: s == first ? keep : nil, { _, _ in })
            }
            totalCostCounter.subtract(freed.cost, ordering: .relaxed)
            countCounter.subtract(freed.count, ordering: .relaxed)
            if freed.count == 0 {
                emptyVisits += 1
                s = (s + 1) & (stripes.count - 1)
            } else {
                emptyVisits = 0
            }
        }
    }

    /// Removes the value for `key` and returns it (not counted as an eviction).
    @inlinable
    @discardableResult
    public func removeValue(forKey key: Key) -> Value? {
        let hash = key.hashValue
        let removed: (Value, Int)? = exclusive(stripe(hash)) { core in
            guard let i = core.find(key, hash: hash) else { return nil }
            let cost = core.nodes[Int(i)].cost
            return (core.release(i).1, cost)
        }
        guard let (value, cost) = removed else { return nil }
        if isStriped {
            totalCostCounter.subtract(cost, ordering: .relaxed)
            countCounter.subtract(1, ordering: .relaxed)
        }
        return value
    }

    /// Removes the values whose key satisfies `predicate` (not counted as evictions); returns how
    /// many. Visits every key, stripe by stripe: for rare administrative removals (a purge),
    /// not for a request path.
    @discardableResult
    public func removeAll(where predicate: (Key) -> Bool) -> Int {
        var removed = 0
        for s in stripes.indices {
            let (cost, count) = exclusive(s) { core -> (Int, Int) in
                var cost = 0, count = 0
                for key in core.keys where predicate(key) {
                    guard let i = core.find(key, hash: key.hashValue) else { continue }
                    cost += core.nodes[Int(i)].cost
                    count += 1
                    _ = core.release(i)
                }
                return (cost, count)
            }
            if isStriped {
                totalCostCounter.subtract(cost, ordering: .relaxed)
                countCounter.subtract(count, ordering: .relaxed)
            }
            removed += count
        }
        return removed
    }

    /// Removes every value and forgets the access history; statistics counters are kept.
    public func removeAll() {
        for s in stripes.indices {
            let (cost, count) = exclusive(s) { core in
                let before = (core.totalCost, core.count)
                core.removeAll()
                return before
            }
            if isStriped {
                totalCostCounter.subtract(cost, ordering: .relaxed)
                countCounter.subtract(count, ordering: .relaxed)
            }
        }
    }

    /// Evicts, least valuable first, until the total cost is at most `cost` (and, as with one
    /// stripe, by less than one entry more): each stripe first frees at most its share of the
    /// excess (in proportion to its cost), then single evictions take the rest.
    public func trim(toCost cost: Int) {
        guard isStriped else { return exclusive(0) { $0.trim(toCost: cost, { _, _ in }) } }
        let target = Swift.max(0, cost)
        let costs = stripes.map { $0.withLock { $0.totalCost } }
        let total = costs.reduce(0, +)
        guard total > target else { return }
        for (s, c) in costs.enumerated() {
            let quota = Int((Double(total - target) * Double(c) / Double(total)).rounded(.down))
            let freed = exclusive(s) { core in
                let count = core.count
                return (core.trim(freeingAtMost: quota, { _, _ in }), count - core.count)
            }
            totalCostCounter.subtract(freed.0, ordering: .relaxed)
            countCounter.subtract(freed.1, ordering: .relaxed)
        }
        enforceLimits(from: 0, sparing: nil, costTarget: target)
    }

    /// Changes the limits (for configuration reloads), evicting at once if needed.
    public func setLimits(costLimit: Int, countLimit: Int) {
        precondition(costLimit >= 0 && countLimit >= 0, "cache limits must be ≥ 0")
        costLimitValue.store(costLimit, ordering: .relaxed)
        countLimitValue.store(countLimit, ordering: .relaxed)
        let n = stripes.count
        for s in stripes.indices {
            exclusive(s) { core in
                if n > 1 { core.maxEntryCostOverride = cacheShare(of: costLimit, maxEntryShare) }
                core.setLimits(costLimit: costLimit / n, countLimit: countLimit == .max ? .max : countLimit / n, { _, _ in })
            }
        }
        if isStriped { enforceLimits(from: 0, sparing: nil) }
    }

    /// Counters and occupancy (each stripe's snapshot is consistent; with several stripes the
    /// sum is taken stripe by stripe).
    public var statistics: CacheStatistics {
        var sum = stripes.indices.reduce(into: CacheStatistics()) { sum, s in
            let x = exclusive(s) { $0.statistics }
            sum.hits += x.hits
            sum.misses += x.misses
            sum.insertions += x.insertions
            sum.evictions += x.evictions
            sum.rejections += x.rejections
            sum.totalCost += x.totalCost
            sum.count += x.count
        }
        sum.costLimit = costLimitValue.load(ordering: .relaxed)
        sum.countLimit = countLimitValue.load(ordering: .relaxed)
        return sum
    }

    /// Sum of the resident values' costs.
    public var totalCost: Int {
        isStriped ? totalCostCounter.load(ordering: .relaxed) : stripes[0].withLock { $0.totalCost }
    }

    /// Number of resident values.
    public var count: Int {
        isStriped ? countCounter.load(ordering: .relaxed) : stripes[0].withLock { $0.count }
    }

    /// The resident keys, in no particular order (O(count); for diagnostics and tests).
    public var keys: [Key] { stripes.flatMap { $0.withLock { $0.keys } } }
}
