import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The open-addressing hash index of a ``TinyLFUCore``, with what a hit reads and writes (key,
/// value, ``TinyLFUCore/Hot`` state) stored beside each index word.
extension TinyLFUCore {
    // MARK: hash index

    @inlinable @inline(__always)
    package static func tag(_ hash: Int) -> UInt64 { UInt64(UInt32(truncatingIfNeeded: hash)) }

    /// The slot an index word points at.
    @inlinable @inline(__always)
    package static func slot(_ word: UInt64) -> Int32 { Int32(truncatingIfNeeded: word >> 32) - 1 }

    /// The index position of `key`, or `nil`.
    @inlinable
    package func position(of key: Key, hash: Int) -> Int? {
        let tag = Self.tag(hash)
        var p = hash & tableMask
        while true {
            let e = table[p]
            if e == 0 { return nil }
            if e & 0xFFFF_FFFF == tag, indexKeys[p] == key { return p }
            p = (p + 1) & tableMask
        }
    }

    /// The slot holding `key`, or `nil`.
    @inlinable
    package func find(_ key: Key, hash: Int) -> Int32? {
        position(of: key, hash: hash).map { Self.slot(table[$0]) }
    }

    /// The slot holding `key`, or `nil` (hashes the key).
    @inlinable
    package func slot(for key: Key) -> Int32? { find(key, hash: key.hashValue) }

    /// The index position of resident slot `i` (its node keeps it current).
    @inlinable
    package func position(ofSlot i: Int32) -> Int {
        let p = Int(nodes[Int(i)].position)
        assert(Self.slot(table[p]) == i, "a node's index position is stale")
        return p
    }

    /// Indexes slot `i` under `hash`, with its key, value and hit state.
    @inlinable
    package mutating func tableInsert(slot: Int32, hash: Int, key: Key, value: consuming Value, hot: Hot) {
        if (count + 1) * 5 > (tableMask + 1) * 4 { resizeTable(to: (tableMask + 1) * 2) }
        var p = hash & tableMask
        while table[p] != 0 { p = (p + 1) & tableMask }
        table[p] = Self.tag(hash) | (UInt64(slot + 1) << 32)
        nodes[Int(slot)].position = UInt32(truncatingIfNeeded: p)
        (indexKeys + p).initialize(to: key)
        (indexValues + p).initialize(to: value)
        indexHot[p] = hot
        count += 1
    }

    /// Removes the entry at index position `i` and returns its key and value; closes the gap by
    /// shifting later entries of the same probe run back, with what is stored beside them (no
    /// tombstones, so lookups never slow down).
    @inlinable
    package mutating func tableRemove(at position: Int) -> (Key, Value) {
        var i = position
        let removed = ((indexKeys + i).move(), (indexValues + i).move())
        var j = i
        while true {
            j = (j + 1) & tableMask
            let e = table[j]
            if e == 0 { break }
            let home = Int(e & 0xFFFF_FFFF) & tableMask
            // The entry at j may fill the hole at i unless its home lies cyclically in (i, j].
            let stays = i <= j ? (i < home && home <= j) : (i < home || home <= j)
            if stays { continue }
            table[i] = e
            nodes[Int(Self.slot(e))].position = UInt32(truncatingIfNeeded: i)
            (indexKeys + i).moveInitialize(from: indexKeys + j, count: 1)
            (indexValues + i).moveInitialize(from: indexValues + j, count: 1)
            indexHot[i] = indexHot[j]
            i = j
        }
        table[i] = 0
        count -= 1
        return removed
    }

    @usableFromInline
    package mutating func resizeTable(to size: Int) {
        let old = table, oldKeys = indexKeys, oldValues = indexValues, oldHot = indexHot
        let oldSize = tableMask + 1
        table = CacheMemory.allocateZeroed(UInt64.self, count: size)
        indexKeys = CacheMemory.allocate(Key.self, count: size)
        indexValues = CacheMemory.allocate(Value.self, count: size)
        indexHot = CacheMemory.allocate(Hot.self, count: size)
        tableMask = size - 1
        for k in 0..<oldSize where old[k] != 0 {
            let e = old[k]
            var p = Int(e & 0xFFFF_FFFF) & tableMask
            while table[p] != 0 { p = (p + 1) & tableMask }
            table[p] = e
            nodes[Int(Self.slot(e))].position = UInt32(truncatingIfNeeded: p)
            (indexKeys + p).moveInitialize(from: oldKeys + k, count: 1)
            (indexValues + p).moveInitialize(from: oldValues + k, count: 1)
            indexHot[p] = oldHot[k]
        }
        Self.deallocateIndex(old, oldKeys, oldValues, oldHot, count: oldSize)
    }

    /// Frees index arrays (whose entries have been moved out or deinitialised).
    @usableFromInline
    package static func deallocateIndex(
        _ table: UnsafeMutablePointer<UInt64>, _ keys: UnsafeMutablePointer<Key>,
        _ values: UnsafeMutablePointer<Value>, _ hot: UnsafeMutablePointer<Hot>, count: Int
    ) {
        CacheMemory.deallocate(table, count: count)
        CacheMemory.deallocate(keys, count: count)
        CacheMemory.deallocate(values, count: count)
        CacheMemory.deallocate(hot, count: count)
    }

    /// Calls `body` with every occupied index position.
    @inlinable
    package func forEachPosition(_ body: (Int) -> Void) {
        for p in 0...tableMask where table[p] != 0 { body(p) }
    }
}
