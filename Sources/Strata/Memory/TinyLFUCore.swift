/// The single-threaded heart of ``MemoryCache``: W-TinyLFU with cost and count limits.
///
/// Layout: a hash index from key to a slot in a node array (no per-entry allocation), three
/// intrusive doubly-linked LRU lists over the slots, and a ``FrequencySketch``.
/// - *window* (1 % of the limits): every new entry lands here, so a burst of new keys cannot
///   push out the established ones, and the newest entry is always resident after its insert;
/// - *probation* and *protected* (the main space, protected up to 80 % of it): an entry that
///   leaves the window is a *candidate*; while the cache is over its limits, the candidate and
///   the least-recently-used probation entry (the *victim*) are compared by sketch frequency and
///   the less frequent one is evicted. A probation hit moves the entry to protected; protected
///   overflow goes back to probation.
///
/// Every operation is O(1) (eviction is O(entries evicted); the sketch's periodic halving is
/// amortised). Not thread-safe: ``MemoryCache`` and ``ImageMemoryTier`` own one under a mutex.
@usableFromInline
struct TinyLFUCore<Key: Hashable, Value> {
    @usableFromInline
    enum Queue: UInt8 { case free, window, probation, protected }

    @usableFromInline
    struct Node {
        @usableFromInline var key: Key?
        @usableFromInline var value: Value?
        @usableFromInline var hash: Int
        @usableFromInline var cost: Int
        @usableFromInline var prev: Int32
        @usableFromInline var next: Int32
        @usableFromInline var queue: Queue
        /// Set by a hit in the window or protected; gives the entry a second pass there
        /// instead of a list move on every hit (CLOCK's approximation of LRU).
        @usableFromInline var referenced: Bool

        @inlinable
        init(key: Key, value: Value, hash: Int, cost: Int) {
            self.key = key
            self.value = value
            self.hash = hash
            self.cost = cost
            self.prev = -1
            self.next = -1
            self.queue = .window
            self.referenced = false
        }
    }

    @usableFromInline
    struct List {
        @usableFromInline var head: Int32 = -1  // least recently used
        @usableFromInline var tail: Int32 = -1  // most recently used
        @usableFromInline var count = 0
        @usableFromInline var cost = 0
        @usableFromInline init() {}
    }

    @usableFromInline var index: [Key: Int32] = [:]
    @usableFromInline var nodes: [Node] = []
    @usableFromInline var freeHead: Int32 = -1
    @usableFromInline var window = List()
    @usableFromInline var probation = List()
    @usableFromInline var protected = List()
    @usableFromInline var sketch: FrequencySketch

    @usableFromInline private(set) var costLimit: Int
    @usableFromInline private(set) var countLimit: Int
    @usableFromInline private(set) var maxEntryShare: Double
    /// Entries costing more than this are refused.
    @usableFromInline private(set) var maxEntryCost: Int
    @usableFromInline var windowCostLimit = 0
    @usableFromInline var windowCountLimit = 0
    @usableFromInline var protectedCostLimit = 0
    @usableFromInline var protectedCountLimit = 0

    @usableFromInline var totalCost = 0
    @usableFromInline var hits: UInt64 = 0
    @usableFromInline var misses: UInt64 = 0
    @usableFromInline var insertions: UInt64 = 0
    @usableFromInline var evictions: UInt64 = 0
    @usableFromInline var rejections: UInt64 = 0

    /// Share of the limits given to the window.
    @usableFromInline static var windowShare: Double { 0.01 }
    /// Share of the main space given to protected.
    @usableFromInline static var protectedShare: Double { 0.80 }

    @usableFromInline
    init(costLimit: Int, countLimit: Int, maxEntryShare: Double) {
        self.costLimit = costLimit
        self.countLimit = countLimit
        self.maxEntryShare = maxEntryShare
        self.maxEntryCost = 0
        self.sketch = FrequencySketch(capacity: Self.sketchCapacity(countLimit: countLimit))
        computeBudgets()
    }

    @usableFromInline
    static func sketchCapacity(countLimit: Int) -> Int { Swift.max(16, Swift.min(countLimit, 4096)) }

    @usableFromInline
    mutating func computeBudgets() {
        maxEntryCost = Int((Double(costLimit) * maxEntryShare).rounded(.down))
        windowCostLimit = Int(Double(costLimit) * Self.windowShare)
        windowCountLimit = Swift.max(1, Int(Double(countLimit) * Self.windowShare))
        protectedCostLimit = Int(Double(costLimit - windowCostLimit) * Self.protectedShare)
        protectedCountLimit = Swift.max(1, Int(Double(countLimit - windowCountLimit) * Self.protectedShare))
    }

    @usableFromInline var count: Int { index.count }

    // MARK: lists

    @inlinable @inline(__always)
    mutating func withList<R>(_ queue: Queue, _ body: (inout List) -> R) -> R {
        switch queue {
        case .window: return body(&window)
        case .probation: return body(&probation)
        case .protected: return body(&protected)
        case .free: preconditionFailure("free slot in a list")
        }
    }

    @inlinable
    mutating func unlink(_ i: Int32) {
        let prev = nodes[Int(i)].prev, next = nodes[Int(i)].next, cost = nodes[Int(i)].cost
        let queue = nodes[Int(i)].queue
        if prev >= 0 { nodes[Int(prev)].next = next }
        if next >= 0 { nodes[Int(next)].prev = prev }
        withList(queue) { list in
            if list.head == i { list.head = next }
            if list.tail == i { list.tail = prev }
            list.count -= 1
            list.cost -= cost
        }
    }

    @inlinable
    mutating func append(_ i: Int32, to queue: Queue) {
        nodes[Int(i)].referenced = false
        let cost = nodes[Int(i)].cost
        let oldTail = withList(queue) { list -> Int32 in
            let t = list.tail
            if t < 0 { list.head = i }
            list.tail = i
            list.count += 1
            list.cost += cost
            return t
        }
        if oldTail >= 0 { nodes[Int(oldTail)].next = i }
        nodes[Int(i)].prev = oldTail
        nodes[Int(i)].next = -1
        nodes[Int(i)].queue = queue
    }

    @inlinable
    mutating func move(_ i: Int32, to queue: Queue) {
        if nodes[Int(i)].queue == queue, withList(queue, { $0.tail }) == i { return }
        unlink(i)
        append(i, to: queue)
    }

    // MARK: operations

    /// The value for `key`, recording a hit (and the access in the sketch) or a miss.
    @inlinable
    mutating func value(forKey key: Key) -> Value? {
        guard let i = index[key] else {
            misses &+= 1
            sketch.increment(key.hashValue)
            return nil
        }
        hits &+= 1
        sketch.increment(nodes[Int(i)].hash)
        onAccess(i)
        return nodes[Int(i)].value
    }

    /// The value for `key` without touching recency, frequency or statistics.
    @inlinable
    func peek(_ key: Key) -> Value? {
        guard let i = index[key] else { return nil }
        return nodes[Int(i)].value
    }

    @inlinable
    mutating func onAccess(_ i: Int32) {
        switch nodes[Int(i)].queue {
        case .window, .protected:
            nodes[Int(i)].referenced = true
        case .probation:
            move(i, to: .protected)
            rebalanceProtected()
        case .free:
            preconditionFailure("index points at a free slot")
        }
    }

    /// Demotes protected overflow to probation, giving referenced entries a second pass.
    @inlinable
    mutating func rebalanceProtected() {
        while protected.count > 1,
              protected.cost > protectedCostLimit || protected.count > protectedCountLimit {
            let h = protected.head
            if nodes[Int(h)].referenced {
                nodes[Int(h)].referenced = false
                move(h, to: .protected)
            } else {
                move(h, to: .probation)
            }
        }
    }

    /// Inserts or replaces; `false` (and no entry for `key` afterwards) when `cost` exceeds
    /// the per-entry cap. `evicted` sees every entry pushed out, under the caller's lock.
    @inlinable
    mutating func insert(_ value: Value, forKey key: Key, cost rawCost: Int,
                         evicted: (Key, Value) -> Void) -> Bool {
        let cost = Swift.max(0, rawCost)
        guard cost <= maxEntryCost, countLimit > 0 else {
            rejections &+= 1
            _ = remove(key)
            return false
        }
        insertions &+= 1
        let slot: Int32
        if let i = index[key] {
            slot = i
            sketch.increment(nodes[Int(i)].hash)
            let queue = nodes[Int(i)].queue
            let delta = cost - nodes[Int(i)].cost
            withList(queue) { $0.cost += delta }
            totalCost += delta
            nodes[Int(i)].cost = cost
            nodes[Int(i)].value = value
            onAccess(i)
        } else {
            let hash = key.hashValue
            sketch.increment(hash)
            let node = Node(key: key, value: value, hash: hash, cost: cost)
            let i: Int32
            if freeHead >= 0 {
                i = freeHead
                freeHead = nodes[Int(i)].next
                nodes[Int(i)] = node
            } else {
                i = Int32(nodes.count)
                nodes.append(node)
            }
            index[key] = i
            slot = i
            totalCost += cost
            append(i, to: .window)
            if index.count > sketch.capacity, sketch.capacity < countLimit {
                sketch.grow(to: Swift.min(countLimit, index.count.multipliedReportingOverflow(by: 2).partialValue))
            }
        }
        evictIfNeeded(sparing: slot, evicted)
        return true
    }

    @inlinable
    var isOverLimits: Bool { totalCost > costLimit || index.count > countLimit }

    /// Moves window overflow to probation, then evicts while over the limits, each time
    /// dropping the less frequent of (oldest candidate from the window, probation's LRU).
    /// `keep` (the entry just inserted) is never chosen: it fits the limits on its own.
    @inlinable
    mutating func evictIfNeeded(sparing keep: Int32 = -1, _ evicted: (Key, Value) -> Void) {
        var candidate: Int32 = -1
        while window.count > 1, window.cost > windowCostLimit || window.count > windowCountLimit {
            let w = window.head
            if nodes[Int(w)].referenced {
                nodes[Int(w)].referenced = false
                move(w, to: .window)
                continue
            }
            move(w, to: .probation)
            if candidate < 0 { candidate = w }
        }
        while isOverLimits {
            let victim = probation.head
            if candidate >= 0, victim >= 0, candidate != victim, candidate != keep, victim != keep {
                if sketch.frequency(nodes[Int(candidate)].hash) > sketch.frequency(nodes[Int(victim)].hash) {
                    evict(victim, evicted)
                } else {
                    let next = nodes[Int(candidate)].next
                    evict(candidate, evicted)
                    candidate = next
                }
            } else {
                if candidate >= 0, candidate == victim || candidate == keep { candidate = nodes[Int(candidate)].next }
                evictOne(sparing: keep, evicted)
            }
        }
    }

    /// Evicts in policy order: probation LRU, then protected LRU, then window LRU.
    @inlinable
    mutating func evictOne(sparing keep: Int32 = -1, _ evicted: (Key, Value) -> Void) {
        var i = pick(probation.head, sparing: keep)
        if i < 0 { i = pick(protected.head, sparing: keep) }
        if i < 0 { i = pick(window.head, sparing: keep) }
        precondition(i >= 0, "over limits with nothing to evict")
        evict(i, evicted)
    }

    @inlinable
    func pick(_ head: Int32, sparing keep: Int32) -> Int32 {
        head >= 0 && head == keep ? nodes[Int(head)].next : head
    }

    @inlinable
    mutating func evict(_ i: Int32, _ evicted: (Key, Value) -> Void) {
        let (key, value) = release(i)
        evictions &+= 1
        evicted(key, value)
    }

    /// Unlinks slot `i`, frees it and returns its key and value.
    @inlinable
    mutating func release(_ i: Int32) -> (Key, Value) {
        unlink(i)
        let key = nodes[Int(i)].key.take()!
        let value = nodes[Int(i)].value.take()!
        totalCost -= nodes[Int(i)].cost
        nodes[Int(i)].queue = .free
        nodes[Int(i)].next = freeHead
        freeHead = i
        index.removeValue(forKey: key)
        return (key, value)
    }

    /// Removes `key`; returns its value if it was present.
    @inlinable
    mutating func remove(_ key: Key) -> Value? {
        guard let i = index[key] else { return nil }
        return release(i).1
    }

    /// Evicts (counted as evictions) in policy order until the total cost is at most `target`.
    @usableFromInline
    mutating func trim(toCost target: Int, _ evicted: (Key, Value) -> Void) {
        while totalCost > Swift.max(0, target), index.count > 0 { evictOne(evicted) }
    }

    /// Changes the limits, evicting at once if the cache is now over them.
    @usableFromInline
    mutating func setLimits(costLimit: Int, countLimit: Int, maxEntryShare: Double? = nil,
                            _ evicted: (Key, Value) -> Void) {
        self.costLimit = costLimit
        self.countLimit = countLimit
        if let maxEntryShare { self.maxEntryShare = maxEntryShare }
        computeBudgets()
        rebalanceProtected()
        evictIfNeeded(evicted)
    }

    /// Drops every entry (not counted as evictions) and the frequency history.
    @usableFromInline
    mutating func removeAll() {
        index.removeAll()
        nodes.removeAll()
        freeHead = -1
        window = List()
        probation = List()
        protected = List()
        totalCost = 0
        sketch.clear()
    }

    /// Every resident key (in no particular order), for diagnostics and tests.
    @usableFromInline
    var keys: [Key] { Array(index.keys) }
}
