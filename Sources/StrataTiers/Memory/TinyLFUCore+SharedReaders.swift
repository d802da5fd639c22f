import Synchronization
import StrataBase

/// What a ``TinyLFUCore`` offers readers that hold no lock (``MemoryCache`` and
/// ``ImageMemoryTier`` let hits skip their locks through a ``ReaderBias``), and what a lock
/// holder does beside such readers: nothing they read changes, and what both write (an entry's
/// ``Hot`` word) is written atomically.
extension TinyLFUCore {
    /// A hit for a reader that holds no lock (the read-biased paths of ``MemoryCache`` and
    /// ``ImageMemoryTier``, whose ``ReaderBias`` keeps writers out): the value for `key`, or
    /// `nil`, recording the hit in the entry's ``Hot`` state only, as ``value(forKey:hash:)``
    /// does, with one relaxed atomic load and, when the state changes, one store (two readers
    /// hitting one entry at once may lose one of the updates, as Caffeine's read buffers may; a
    /// hot entry's state soon stops changing, so its line stays shared). The hit count and the
    /// sketch's tick reach the core later, through ``absorbSharedHits(_:)``.
    @inlinable @inline(__always)
    package func sharedHit(_ key: Key, hash: Int) -> Value? {
        guard let p = position(of: key, hash: hash) else { return nil }
        let word = UnsafeMutableRawPointer(indexHot + p).assumingMemoryBound(to: Atomic<UInt32>.self)
        let seen = word.pointee.load(ordering: .relaxed)
        var hot = unsafeBitCast(seen, to: Hot.self).counting(hitAt: sketch.epoch)
        hot.referenced = true
        let updated = unsafeBitCast(hot, to: UInt32.self)
        if updated != seen { word.pointee.store(updated, ordering: .relaxed) }
        return indexValues[p]
    }

    /// ``value(forKey:hash:)`` for a caller that holds the lock but has left the lock-free
    /// readers in (a miss need not wait for them): `answered` is `false`, and nothing changed,
    /// when this access would halve the sketch (whose epoch those readers read), so the caller
    /// must turn them away and ask ``value(forKey:hash:)``. A hit here updates the entry's
    /// ``Hot`` state atomically, as those readers do; a miss touches only the sketch's table and
    /// counters, which they never read.
    @inlinable
    package mutating func valueBesideSharedReaders(forKey key: Key, hash: Int) -> (answered: Bool, value: Value?) {
        guard !sketchHalvesOnNextAccess else { return (false, nil) }
        if let value = sharedHit(key, hash: hash) {
            hits &+= 1
            sketch.additions &+= 1  // `tick()` without its halving, which is not due
            return (true, value)
        }
        recordMiss(hash: hash)
        return (true, nil)
    }

    /// Counts a miss and records the access in the sketch (which may halve it: with lock-free
    /// readers about, only once they are turned away — see ``sketchHalvesOnNextAccess``).
    @inlinable
    package mutating func recordMiss(hash: Int) {
        misses &+= 1
        sketch.increment(hash)
    }

    /// Whether the next access recorded in the sketch halves it (changing the epoch that
    /// lock-free readers read).
    @inlinable
    package var sketchHalvesOnNextAccess: Bool { sketch.additions &+ 1 >= sketch.sampleSize }

    /// Counts `count` hits taken through ``sharedHit(_:hash:)`` (statistics and the sketch's
    /// halving clock). Under the lock, with the lock-free readers turned away.
    @inlinable
    package mutating func absorbSharedHits(_ count: UInt64) {
        hits &+= count
        sketch.tick(count: Int(truncatingIfNeeded: count))
    }
}
