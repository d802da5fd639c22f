#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The open-addressing hash index of a ``TinyLFUCore``.
extension TinyLFUCore {
    // MARK: hash index

    @inlinable @inline(__always)
    static func tag(_ hash: Int) -> UInt64 { UInt64(UInt32(truncatingIfNeeded: hash)) }

    /// The slot holding `key`, or `nil`.
    @inlinable
    func find(_ key: Key, hash: Int) -> Int32? {
        let tag = Self.tag(hash)
        var p = hash & tableMask
        while true {
            let e = table[p]
            if e == 0 { return nil }
            if e & 0xFFFF_FFFF == tag {
                let slot = Int32(truncatingIfNeeded: e >> 32) - 1
                if nodes[Int(slot)].key == key { return slot }
            }
            p = (p + 1) & tableMask
        }
    }

    /// The slot holding `key`, or `nil` (hashes the key).
    @inlinable
    func slot(for key: Key) -> Int32? { find(key, hash: key.hashValue) }

    @inlinable
    mutating func tableInsert(slot: Int32, hash: Int) {
        if (count + 1) * 5 > (tableMask + 1) * 4 { resizeTable(to: (tableMask + 1) * 2) }
        var p = hash & tableMask
        while table[p] != 0 { p = (p + 1) & tableMask }
        table[p] = Self.tag(hash) | (UInt64(slot + 1) << 32)
        count += 1
    }

    /// Removes the word of `slot` and closes the gap by shifting later entries of the same
    /// probe run back (no tombstones, so lookups never slow down).
    @inlinable
    mutating func tableRemove(slot: Int32, hash: Int) {
        let word = Self.tag(hash) | (UInt64(slot + 1) << 32)
        var i = hash & tableMask
        while table[i] != word { i = (i + 1) & tableMask }
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
            i = j
        }
        table[i] = 0
        count -= 1
    }

    @usableFromInline
    mutating func resizeTable(to size: Int) {
        let old = table, oldSize = tableMask + 1
        table = CacheMemory.allocateZeroed(UInt64.self, count: size)
        tableMask = size - 1
        for k in 0..<oldSize where old[k] != 0 {
            let e = old[k]
            var p = Int(e & 0xFFFF_FFFF) & tableMask
            while table[p] != 0 { p = (p + 1) & tableMask }
            table[p] = e
        }
        CacheMemory.deallocate(old, count: oldSize)
    }
}
