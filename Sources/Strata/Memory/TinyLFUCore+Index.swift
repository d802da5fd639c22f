#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The open-addressing hash index of a ``TinyLFUCore``, with the values stored beside it.
extension TinyLFUCore {
    // MARK: hash index

    @inlinable @inline(__always)
    static func tag(_ hash: Int) -> UInt64 { UInt64(UInt32(truncatingIfNeeded: hash)) }

    /// The slot an index word points at.
    @inlinable @inline(__always)
    static func slot(_ word: UInt64) -> Int32 { Int32(truncatingIfNeeded: word >> 32) - 1 }

    /// The index position of `key` (its value is `values[position]`), or `nil`.
    @inlinable
    func position(of key: Key, hash: Int) -> Int? {
        let tag = Self.tag(hash)
        var p = hash & tableMask
        while true {
            let e = table[p]
            if e == 0 { return nil }
            if e & 0xFFFF_FFFF == tag, nodes[Int(Self.slot(e))].key == key { return p }
            p = (p + 1) & tableMask
        }
    }

    /// The slot holding `key`, or `nil`.
    @inlinable
    func find(_ key: Key, hash: Int) -> Int32? {
        position(of: key, hash: hash).map { Self.slot(table[$0]) }
    }

    /// The slot holding `key`, or `nil` (hashes the key).
    @inlinable
    func slot(for key: Key) -> Int32? { find(key, hash: key.hashValue) }

    /// The index position of resident slot `i` (whose hash is `hash`).
    @inlinable
    func position(ofSlot i: Int32, hash: Int) -> Int {
        let word = Self.tag(hash) | (UInt64(i + 1) << 32)
        var p = hash & tableMask
        while table[p] != word { p = (p + 1) & tableMask }
        return p
    }

    /// Indexes slot `i` under `hash`, with its value.
    @inlinable
    mutating func tableInsert(slot: Int32, hash: Int, value: consuming Value) {
        if (count + 1) * 5 > (tableMask + 1) * 4 { resizeTable(to: (tableMask + 1) * 2) }
        var p = hash & tableMask
        while table[p] != 0 { p = (p + 1) & tableMask }
        table[p] = Self.tag(hash) | (UInt64(slot + 1) << 32)
        (values + p).initialize(to: value)
        count += 1
    }

    /// Removes the word of `slot` and returns its value; closes the gap by shifting later
    /// entries of the same probe run back, values with them (no tombstones, so lookups never
    /// slow down).
    @inlinable
    mutating func tableRemove(slot: Int32, hash: Int) -> Value {
        var i = position(ofSlot: slot, hash: hash)
        let removed = (values + i).move()
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
            (values + i).moveInitialize(from: values + j, count: 1)
            i = j
        }
        table[i] = 0
        count -= 1
        return removed
    }

    @usableFromInline
    mutating func resizeTable(to size: Int) {
        let old = table, oldValues = values, oldSize = tableMask + 1
        table = CacheMemory.allocateZeroed(UInt64.self, count: size)
        values = CacheMemory.allocate(Value.self, count: size)
        tableMask = size - 1
        for k in 0..<oldSize where old[k] != 0 {
            let e = old[k]
            var p = Int(e & 0xFFFF_FFFF) & tableMask
            while table[p] != 0 { p = (p + 1) & tableMask }
            table[p] = e
            (values + p).moveInitialize(from: oldValues + k, count: 1)
        }
        CacheMemory.deallocate(old, count: oldSize)
        CacheMemory.deallocate(oldValues, count: oldSize)
    }

    /// Calls `body` with every occupied index position.
    @inlinable
    func forEachPosition(_ body: (Int) -> Void) {
        for p in 0...tableMask where table[p] != 0 { body(p) }
    }
}
