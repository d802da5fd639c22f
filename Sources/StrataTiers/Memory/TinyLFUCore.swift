import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `fraction` (0...1) of `value` (≥ 0), rounded down, without trapping near `Int.max`
/// (where `Double` rounds up past the largest `Int`).
@usableFromInline
package func cacheShare(of value: Int, _ fraction: Double) -> Int {
    let scaled = Double(value) * fraction
    return scaled >= Double(Int.max) ? value : Swift.min(value, Int(scaled.rounded(.down)))
}

/// The single-threaded heart of ``MemoryCache``: W-TinyLFU with cost and count limits.
///
/// Layout: an open-addressing hash index (one 8-byte word per entry, load ≤ 0.8) from key to a
/// slot in a node array (no per-entry allocation), with each entry's key, value and ``Hot``
/// state stored beside its index word (arrays in step with the index); three intrusive
/// circular lists over the slots, and a ``FrequencySketch``. A hit reads and writes only at its
/// index position, as a plain hash map's hit would, and never touches its node, which holds
/// what only insertion and eviction need (list links, queue, hash, cost, and the entry's index
/// position, kept current when the index shifts or grows, so eviction never probes). The
/// core owns these buffers (hence `~Copyable`; see ``CacheMemory``) and reads and writes them
/// in place, so the hot paths, specialised in the caller's module, copy no node and make no
/// uniqueness checks.
/// - *window* (1 % of the limits): every new entry lands here, so a burst of new keys cannot
///   push out the established ones, and the newest entry is always resident after its insert;
/// - *probation* and *protected* (the main space, protected up to 90 % of it — 80 % and 90 %
///   were measured, 90 % is better on Zipf 0.8 at 1 %): an entry that leaves the window is a
///   *candidate*; while the cache is over its limits, the candidate and the oldest probation
///   entry (the *victim*) are compared by frequency (the sketch's estimate each kept from its
///   admission, plus its own hits) and the less frequent one is evicted. A probation entry hit
///   since it arrived is promoted to protected when it reaches probation's head (lazily, as in
///   S3-FIFO, so hits never relink); protected overflow goes back to probation.
///
/// Recency inside the window and protected is CLOCK's approximation of LRU: a hit only sets a
/// bit in the entry; an entry with the bit set that reaches the head gets a second pass (the
/// head pointer advances, O(1), no node written). A hit's frequency is counted in the entry
/// (halved in step with the sketch) and folded into the sketch when the entry leaves, so a hit
/// touches its index position only, and never the sketch's table. On the benchmark traces
/// the miss ratios are within ±0.5 point of exact LRU lists and eager counting (measured both
/// ways).
///
/// Every operation is O(1) amortised (eviction is O(entries evicted); second passes are paid
/// for by the hits that set the bits; the sketch's periodic halving is spread over its
/// updates). Not thread-safe: ``MemoryCache`` and ``ImageMemoryTier`` own one under a mutex.
@usableFromInline
package struct TinyLFUCore<Key: Hashable, Value>: ~Copyable {
    @usableFromInline
    package enum Queue: UInt8, BitwiseCopyable { case window, probation, protected }

    /// What a hit reads and writes, stored beside the entry's index word (`indexHot`).
    @usableFromInline
    package struct Hot: BitwiseCopyable {
        /// Set by a hit in the window or protected; gives the entry a second pass there
        /// instead of a list move on every hit (CLOCK's approximation of LRU).
        @usableFromInline package var referenced: Bool
        /// Hits while resident, halved with the sketch (`epoch` = the sketch's epoch when last
        /// updated). Keeping them here spares a hit the sketch's cache line.
        @usableFromInline package var localHits: UInt8
        @usableFromInline package var epoch: UInt8
        /// The sketch's estimate for the key when it was admitted (that access included),
        /// halved with `epoch` like `localHits`. While a key is resident its own counters in
        /// the sketch only change by halving (its hits are counted here), so this stands in
        /// for a sketch lookup at eviction time, which at a million entries is a cache miss
        /// (other keys' updates colliding on its counters are not seen; measured: the trace
        /// miss ratios did not move).
        @usableFromInline package var estimate: UInt8

        @inlinable
        package init(estimate: UInt8, epoch: UInt8) {
            self.referenced = false
            self.localHits = 0
            self.epoch = epoch
            self.estimate = estimate
        }

        /// The own hit count at sketch epoch `now`: halved once per halving since `epoch`.
        @inlinable
        package func agedHits(at now: UInt8) -> Int {
            let age = now &- epoch
            return age >= 8 ? 0 : Int(localHits >> age)
        }

        /// The admission-time estimate at sketch epoch `now`, halved like ``agedHits(at:)``.
        @inlinable
        package func agedEstimate(at now: UInt8) -> Int {
            let age = now &- epoch
            return age >= 8 ? 0 : Int(estimate >> age)
        }

        /// This state after one more hit at sketch epoch `now`, aged to it (the referenced bit
        /// as it was).
        @inlinable
        package func counting(hitAt now: UInt8) -> Hot {
            var hot = self
            hot.localHits = UInt8(Swift.min(15, agedHits(at: now) + 1))
            hot.estimate = UInt8(agedEstimate(at: now))
            hot.epoch = now
            return hot
        }
    }

    /// One resident entry's list links and the policy state eviction needs, stored in place in
    /// `nodes` and read and written field by field. A hit does not touch it. Plain bits (no key
    /// or value), so the node array is grown by one copy and freed without a walk.
    @usableFromInline
    package struct Node: BitwiseCopyable {
        @usableFromInline package var queue: Queue
        @usableFromInline package var prev: Int32
        @usableFromInline package var next: Int32
        /// The entry's index position (kept current when the index shifts or grows), so
        /// eviction reaches its hit state without probing. Fills what was padding.
        @usableFromInline package var position: UInt32
        @usableFromInline package var hash: Int
        @usableFromInline package var cost: Int

        @inlinable
        package init(hash: Int, cost: Int) {
            self.queue = .window
            self.prev = -1
            self.next = -1
            self.position = 0
            self.hash = hash
            self.cost = cost
        }
    }

    @usableFromInline
    package struct List {
        @usableFromInline package var head: Int32 = -1  // least recently used
        @usableFromInline package var tail: Int32 = -1  // most recently used
        @usableFromInline package var count = 0
        @usableFromInline package var cost = 0
        @usableFromInline package init() {}
    }

    /// Open-addressing hash index (linear probing): each word is the low 32 bits of the key's
    /// hash (which also give its home bucket) and, above them, slot + 1; 0 is empty. One probe
    /// run usually stays in one cache line, then `indexKeys` confirms the key. The load goes
    /// up to 0.8 so the index stays cache-sized (1 MiB of words at 100 000 entries).
    @usableFromInline package var table: UnsafeMutablePointer<UInt64>
    /// The key, value and hit state of index word `p`, initialised exactly while
    /// `table[p] != 0` (moved with the word when the index shifts or grows).
    @usableFromInline package var indexKeys: UnsafeMutablePointer<Key>
    @usableFromInline package var indexValues: UnsafeMutablePointer<Value>
    @usableFromInline package var indexHot: UnsafeMutablePointer<Hot>
    @usableFromInline package var tableMask: Int
    @usableFromInline package var count = 0
    /// Slots `0..<slotsUsed` of `nodes` have been handed out; a slot is initialised exactly
    /// while it is in one of the three lists. Freed slots are reused, last freed first.
    @usableFromInline package var nodes: UnsafeMutablePointer<Node>
    @usableFromInline package var nodeCapacity: Int
    @usableFromInline package var slotsUsed = 0
    @usableFromInline package var freeSlots: [Int32] = []
    @usableFromInline package var window = List()
    @usableFromInline package var probation = List()
    @usableFromInline package var protected = List()
    @usableFromInline package var sketch: FrequencySketch

    @usableFromInline package private(set) var costLimit: Int
    @usableFromInline package private(set) var countLimit: Int
    @usableFromInline package private(set) var maxEntryShare: Double
    /// Entries costing more than this are refused.
    @usableFromInline package private(set) var maxEntryCost: Int
    /// Replaces `maxEntryShare × costLimit` as the per-entry cap (a stripe of a striped
    /// ``MemoryCache`` caps entries by the whole cache's limit, not its own share).
    @usableFromInline package var maxEntryCostOverride: Int?
    /// Set when the limits are enforced outside this core (a stripe of a striped
    /// ``MemoryCache``): the cost and count still to evict; the core's own limits then only
    /// size its window and protected segments.
    @usableFromInline package var externalExcess: (cost: Int, count: Int)?
    @usableFromInline package var windowCostLimit = 0
    @usableFromInline package var windowCountLimit = 0
    @usableFromInline package var protectedCostLimit = 0
    @usableFromInline package var protectedCountLimit = 0

    @usableFromInline package var totalCost = 0
    @usableFromInline package var hits: UInt64 = 0
    @usableFromInline package var misses: UInt64 = 0
    @usableFromInline package var insertions: UInt64 = 0
    @usableFromInline package var evictions: UInt64 = 0
    @usableFromInline package var rejections: UInt64 = 0

    /// Share of the limits given to the window.
    @usableFromInline package static var windowShare: Double { 0.01 }
    /// Share of the main space given to protected.
    @usableFromInline package static var protectedShare: Double { 0.90 }

    @usableFromInline
    package init(costLimit: Int, countLimit: Int, maxEntryShare: Double) {
        self.costLimit = costLimit
        self.countLimit = countLimit
        self.maxEntryShare = maxEntryShare
        self.maxEntryCost = 0
        assert(MemoryLayout<Hot>.size == MemoryLayout<UInt32>.size, "sharedHit reads Hot as one 32-bit word")
        self.sketch = FrequencySketch(capacity: Self.sketchCapacity(countLimit: countLimit))
        self.tableMask = 15
        self.table = CacheMemory.allocateZeroed(UInt64.self, count: 16)
        self.indexKeys = CacheMemory.allocate(Key.self, count: 16)
        self.indexValues = CacheMemory.allocate(Value.self, count: 16)
        self.indexHot = CacheMemory.allocate(Hot.self, count: 16)
        self.nodeCapacity = 16
        self.nodes = CacheMemory.allocate(Node.self, count: 16)
        computeBudgets()
    }

    @inlinable
    deinit {
        deinitializeAllEntries()
        CacheMemory.deallocate(nodes, count: nodeCapacity)
        Self.deallocateIndex(table, indexKeys, indexValues, indexHot, count: tableMask + 1)
    }

    @usableFromInline
    package static func sketchCapacity(countLimit: Int) -> Int { Swift.max(16, Swift.min(countLimit, 4096)) }

    @usableFromInline
    package mutating func computeBudgets() {
        maxEntryCost = maxEntryCostOverride ?? cacheShare(of: costLimit, maxEntryShare)
        windowCostLimit = cacheShare(of: costLimit, Self.windowShare)
        windowCountLimit = Swift.max(1, cacheShare(of: countLimit, Self.windowShare))
        protectedCostLimit = cacheShare(of: costLimit - windowCostLimit, Self.protectedShare)
        protectedCountLimit = Swift.max(1, cacheShare(of: countLimit - windowCountLimit, Self.protectedShare))
    }

    /// Deinitialises every resident key and value (nodes are plain bits: nothing to do).
    @usableFromInline
    package func deinitializeAllEntries() {
        forEachPosition {
            (indexKeys + $0).deinitialize(count: 1)
            (indexValues + $0).deinitialize(count: 1)
        }
    }

    /// A free slot for a new node (the caller initialises it).
    @inlinable
    package mutating func takeFreeSlot() -> Int32 {
        if let i = freeSlots.popLast() { return i }
        if slotsUsed == nodeCapacity { growNodes() }
        slotsUsed += 1
        return Int32(slotsUsed - 1)
    }

    @usableFromInline
    package mutating func growNodes() {
        let newCapacity = nodeCapacity * 2
        let new = CacheMemory.allocate(Node.self, count: newCapacity)
        let old = nodes
        // Free slots below `slotsUsed` are copied too: nodes are plain bits.
        UnsafeMutableRawPointer(new).copyMemory(from: old, byteCount: slotsUsed * MemoryLayout<Node>.stride)
        CacheMemory.deallocate(old, count: nodeCapacity)
        nodes = new
        nodeCapacity = newCapacity
    }

    // MARK: operations

    /// The value for `key`, recording a hit (and the access in the sketch) or a miss.
    @inlinable
    package mutating func value(forKey key: Key, hash: Int? = nil) -> Value? {
        let hash = hash ?? key.hashValue
        guard let p = position(of: key, hash: hash) else {
            recordMiss(hash: hash)
            return nil
        }
        hits &+= 1
        recordHit(at: p)
        onAccess(at: p)
        return indexValues[p]
    }

    /// The entry's own hit count, halved once per sketch halving since it was stamped.
    @inlinable
    package func agedHits(at p: Int) -> Int { indexHot[p].agedHits(at: sketch.epoch) }

    /// The entry's admission-time sketch estimate, halved once per sketch halving since.
    @inlinable
    package func agedEstimate(at p: Int) -> Int { indexHot[p].agedEstimate(at: sketch.epoch) }

    /// Counts a hit on the entry at index position `p` in the entry (not in the sketch's table).
    @inlinable
    package mutating func recordHit(at p: Int) {
        sketch.tick()
        indexHot[p] = indexHot[p].counting(hitAt: sketch.epoch)
    }

    /// TinyLFU's frequency estimate of resident slot `i`: the sketch (accesses while absent,
    /// and hits of earlier stays) plus its own recent hits.
    @inlinable
    package func frequency(_ i: Int32) -> Int {
        let p = position(ofSlot: i)
        return Swift.min(15, agedEstimate(at: p) + agedHits(at: p))
    }

    /// Whether resident slot `i` was hit since its bit was last cleared; clears it. Every list
    /// move and second pass starts with this, so an entry arrives in its new place unreferenced.
    @inlinable
    package mutating func takeReferenced(_ i: Int32) -> Bool {
        let p = position(ofSlot: i)
        defer { indexHot[p].referenced = false }
        return indexHot[p].referenced
    }

    /// The value for `key` without touching recency, frequency or statistics.
    @inlinable
    package func peek(_ key: Key) -> Value? {
        guard let p = position(of: key, hash: key.hashValue) else { return nil }
        return indexValues[p]
    }

    @inlinable
    package mutating func onAccess(at p: Int) {
        // Promotion out of probation is lazy: it happens when the entry reaches probation's
        // head during an eviction (see evictIfNeeded), so a hit never relinks a list.
        indexHot[p].referenced = true
    }

    /// Demotes protected overflow to probation, giving referenced entries a second pass.
    @inlinable
    package mutating func rebalanceProtected() {
        while protected.count > 1,
            protected.cost > protectedCostLimit || protected.count > protectedCountLimit
        {
            let h = protected.head
            if takeReferenced(h) {
                rotate(.protected)
            } else {
                move(h, to: .probation)
            }
        }
    }

    /// Inserts or replaces; `false` (and no entry for `key` afterwards) when `cost` exceeds
    /// the per-entry cap. `evicted` sees every entry pushed out, under the caller's lock.
    @inlinable
    package mutating func insert(
        _ value: Value, forKey key: Key, hash knownHash: Int? = nil, cost rawCost: Int,
        evicted: (Key, Value) -> Void
    ) -> Bool {
        let cost = Swift.max(0, rawCost)
        guard cost <= maxEntryCost, countLimit > 0 else {
            rejections &+= 1
            _ = remove(key)
            return false
        }
        insertions &+= 1
        let slot: Int32
        let hash = knownHash ?? key.hashValue
        if let p = position(of: key, hash: hash) {
            let i = Self.slot(table[p])
            slot = i
            recordHit(at: p)
            let queue = nodes[Int(i)].queue
            let delta = cost - nodes[Int(i)].cost
            withList(queue) { $0.cost += delta }
            totalCost += delta
            nodes[Int(i)].cost = cost
            indexValues[p] = value
            onAccess(at: p)
        } else {
            let estimate = UInt8(sketch.increment(hash))
            let i = takeFreeSlot()
            (nodes + Int(i)).initialize(to: Node(hash: hash, cost: cost))
            tableInsert(slot: i, hash: hash, key: key, value: value, hot: Hot(estimate: estimate, epoch: sketch.epoch))
            slot = i
            totalCost += cost
            append(i, to: .window)
            if count > sketch.capacity, sketch.capacity < countLimit {
                sketch.grow(to: Swift.min(countLimit, count.multipliedReportingOverflow(by: 2).partialValue))
                forEachPosition { indexHot[$0].estimate = 0 }  // the new sketch starts empty
            }
        }
        evictIfNeeded(sparing: slot, evicted)
        return true
    }

    @inlinable
    package var isOverLimits: Bool {
        if let excess = externalExcess { return excess.cost > 0 || excess.count > 0 }
        return totalCost > costLimit || count > countLimit
    }

    /// Changes the limits, evicting at once if the cache is now over them.
    @usableFromInline
    package mutating func setLimits(
        costLimit: Int, countLimit: Int, maxEntryShare: Double? = nil,
        _ evicted: (Key, Value) -> Void
    ) {
        self.costLimit = costLimit
        self.countLimit = countLimit
        if let maxEntryShare { self.maxEntryShare = maxEntryShare }
        computeBudgets()
        rebalanceProtected()
        evictIfNeeded(evicted)
    }

    /// Drops every entry (not counted as evictions) and the frequency history.
    @usableFromInline
    package mutating func removeAll() {
        deinitializeAllEntries()
        Self.deallocateIndex(table, indexKeys, indexValues, indexHot, count: tableMask + 1)
        table = CacheMemory.allocateZeroed(UInt64.self, count: 16)
        indexKeys = CacheMemory.allocate(Key.self, count: 16)
        indexValues = CacheMemory.allocate(Value.self, count: 16)
        indexHot = CacheMemory.allocate(Hot.self, count: 16)
        tableMask = 15
        count = 0
        CacheMemory.deallocate(nodes, count: nodeCapacity)
        nodes = CacheMemory.allocate(Node.self, count: 16)
        nodeCapacity = 16
        slotsUsed = 0
        freeSlots = []
        window = List()
        probation = List()
        protected = List()
        totalCost = 0
        sketch.clear()
    }

    /// Every resident key (in no particular order), for diagnostics and tests.
    @usableFromInline
    package var keys: [Key] {
        var result: [Key] = []
        result.reserveCapacity(count)
        forEachPosition { result.append(indexKeys[$0]) }
        return result
    }

    /// Every resident value (in no particular order).
    @usableFromInline
    package var residentValues: [Value] {
        var result: [Value] = []
        result.reserveCapacity(count)
        forEachPosition { result.append(indexValues[$0]) }
        return result
    }
}
