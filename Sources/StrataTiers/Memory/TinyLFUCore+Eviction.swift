import StrataBase
/// Eviction in a ``TinyLFUCore``: the admission duel between the window's candidates and
/// probation's victim, the policy's eviction order, and the trims a striped cache and memory
/// pressure ask for.
extension TinyLFUCore {
    /// Evicts, in the policy's order and with its admission duel, at least `cost` and `count`
    /// (as far as this core holds entries other than `keep`'s); for a stripe of a striped cache,
    /// whose limits are enforced across stripes. Returns the cost and count evicted.
    @inlinable
    package mutating func evictExternally(
        cost: Int, count wanted: Int, sparing keep: Key?,
        _ evicted: (Key, Value) -> Void
    ) -> (cost: Int, count: Int) {
        let keepSlot = keep.flatMap { slot(for: $0) } ?? -1
        let before = (totalCost, count)
        externalExcess = (cost, wanted)
        evictIfNeeded(sparing: keepSlot, evicted)
        externalExcess = (0, 0)
        return (before.0 - totalCost, before.1 - count)
    }

    /// Moves window overflow to probation, then evicts while over the limits, each time
    /// dropping the less frequent of (oldest candidate from the window, probation's LRU).
    /// `keep` (the entry just inserted) is never chosen: it fits the limits on its own.
    @inlinable
    package mutating func evictIfNeeded(sparing keep: Int32 = -1, _ evicted: (Key, Value) -> Void) {
        // Candidates: the entries this call moves from the window to probation's tail, in order
        // from `candidate` to `lastCandidate`.
        var candidate: Int32 = -1, lastCandidate: Int32 = -1
        while window.count > 1, window.cost > windowCostLimit || window.count > windowCountLimit {
            let w = window.head
            if takeReferenced(w) {
                rotate(.window)
                continue
            }
            move(w, to: .probation)
            if candidate < 0 { candidate = w }
            lastCandidate = w
        }
        while isOverLimits {
            // Limits enforced outside: stop when nothing but `keep` is left here.
            if externalExcess != nil, count - (keep >= 0 ? 1 : 0) <= 0 { break }
            // A probation entry hit since it arrived is promoted instead of becoming the victim.
            while true {
                let h = probation.head
                guard h >= 0, h != keep, h != candidate, takeReferenced(h) else { break }
                move(h, to: .protected)
                rebalanceProtected()
            }
            let victim = probation.head
            if candidate >= 0, victim >= 0, candidate != victim, candidate != keep, victim != keep {
                if frequency(candidate) > frequency(victim) {
                    evict(victim, evicted)
                } else {
                    let next = candidate == lastCandidate ? -1 : successor(candidate)
                    evict(candidate, evicted)
                    candidate = next
                }
            } else {
                if candidate >= 0, candidate == victim || candidate == keep {
                    candidate = candidate == lastCandidate ? -1 : successor(candidate)
                }
                evictOne(sparing: keep, evicted)
            }
        }
    }

    /// Evicts in policy order: probation LRU, then protected LRU, then window LRU.
    @inlinable
    package mutating func evictOne(sparing keep: Int32 = -1, _ evicted: (Key, Value) -> Void) {
        let i = nextVictim(sparing: keep)
        precondition(i >= 0, "over limits with nothing to evict")
        evict(i, evicted)
    }

    /// The slot ``evictOne(sparing:_:)`` would evict, or -1 when there is none.
    @inlinable
    package func nextVictim(sparing keep: Int32 = -1) -> Int32 {
        var i = pick(probation.head, sparing: keep)
        if i < 0 { i = pick(protected.head, sparing: keep) }
        if i < 0 { i = pick(window.head, sparing: keep) }
        return i
    }

    /// Evicts in policy order while the next victim still fits in `quota` (never frees more);
    /// returns the cost freed. For the proportional first pass of a striped trim.
    @usableFromInline
    package mutating func trim(freeingAtMost quota: Int, _ evicted: (Key, Value) -> Void) -> Int {
        var freed = 0
        while true {
            let i = nextVictim()
            guard i >= 0, freed + nodes[Int(i)].cost <= quota else { return freed }
            freed += nodes[Int(i)].cost
            evict(i, evicted)
        }
    }

    @inlinable
    package func pick(_ head: Int32, sparing keep: Int32) -> Int32 {
        head >= 0 && head == keep ? successor(head) : head
    }

    @inlinable
    package mutating func evict(_ i: Int32, _ evicted: (Key, Value) -> Void) {
        if let excess = externalExcess { externalExcess = (excess.cost - nodes[Int(i)].cost, excess.count - 1) }
        let (key, value) = release(i)
        evictions &+= 1
        evicted(key, value)
    }

    /// Unlinks slot `i`, frees it and returns its key and value.
    @inlinable
    package mutating func release(_ i: Int32) -> (Key, Value) {
        unlink(i)
        let p = position(ofSlot: i)
        sketch.add(nodes[Int(i)].hash, agedHits(at: p))  // its hits become history
        let removed = tableRemove(at: p)
        totalCost -= nodes[Int(i)].cost
        (nodes + Int(i)).deinitialize(count: 1)
        freeSlots.append(i)
        return removed
    }

    /// Removes `key`; returns its value if it was present.
    @inlinable
    package mutating func remove(_ key: Key) -> Value? {
        guard let i = slot(for: key) else { return nil }
        return release(i).1
    }

    /// Evicts (counted as evictions) in policy order until the total cost is at most `target`.
    @usableFromInline
    package mutating func trim(toCost target: Int, _ evicted: (Key, Value) -> Void) {
        while totalCost > Swift.max(0, target), count > 0 { evictOne(evicted) }
    }
}
