import StrataBase
/// The engine's memory of keys the source lacks: a fixed-capacity map from key to expiry, with
/// O(1) insert, lookup and expiry.
///
/// Every entry lives for the same TTL, so insertion order is expiry order: a ring of insertions
/// beside the map gives the oldest entry at its front. An insert first drops the expired entries
/// at the front (each insertion is dropped once: amortised O(1)), and when the ring is full it
/// drops the oldest entry even if it has not expired — a flood of distinct missing keys (URLs
/// are unsigned by default) costs a bounded amount of memory and never a scan of the map.
/// A key inserted again gets a new expiry and a new ring slot; its older slot is skipped when
/// it reaches the front. The map and the ring grow by doubling up to `capacity` (amortised O(1))
/// and are never scanned.
///
/// Not thread-safe: the engine keeps it behind one ``Lock``. Memory: at most about `capacity` ×
/// 100 bytes plus the keys' own string storage.
package struct NegativeCache {
    private struct Entry {
        var until: ContinuousClock.Instant
        /// The ring insertion that set `until`: an older insertion of the key leaves the
        /// entry alone when it reaches the front.
        var insertion: UInt64
    }

    private struct Insertion {
        var key: CacheKey
        var number: UInt64
        var until: ContinuousClock.Instant
    }

    /// The most keys held at once.
    package let capacity: Int
    private var entries: [CacheKey: Entry]
    private var ring: RingBuffer<Insertion>
    private var inserted: UInt64 = 0
    /// Entries dropped while still live because the ring was full.
    package private(set) var displaced = 0

    package init(capacity: Int) {
        precondition(capacity >= 1, "a negative cache holds at least one key")
        self.capacity = capacity
        entries = [:]
        ring = RingBuffer()
    }

    /// Keys held (live, or expired and not yet dropped).
    package var count: Int { entries.count }

    /// Whether `key` is held and live at `now` (an expired entry stays until the next insert
    /// drops it: a lookup never writes).
    package func contains(_ key: CacheKey, now: ContinuousClock.Instant) -> Bool {
        guard let entry = entries[key] else { return false }
        return entry.until > now
    }

    /// Holds `key` until `until`, dropping expired entries first and the oldest live one when
    /// full. `until` must not be earlier than that of the entries already held (one TTL for
    /// all); a shorter TTL set at run time only lets some entries live a little longer.
    package mutating func insert(_ key: CacheKey, until: ContinuousClock.Instant, now: ContinuousClock.Instant) {
        while let front = ring.count > 0 ? ring[0] : nil, front.until <= now || ring.count >= capacity {
            _ = ring.popFirst()
            if let entry = entries[front.key], entry.insertion == front.number {
                entries[front.key] = nil
                if front.until > now { displaced += 1 }
            }
        }
        inserted &+= 1
        entries[key] = Entry(until: until, insertion: inserted)
        ring.append(Insertion(key: key, number: inserted, until: until))
    }

    /// Forgets `key`.
    package mutating func remove(_ key: CacheKey) {
        // Its ring slot stays until it reaches the front, where it no longer matches an entry.
        entries[key] = nil
    }

    /// Forgets every key.
    package mutating func removeAll() {
        entries.removeAll(keepingCapacity: true)
        ring = RingBuffer()
    }
}
