/// One variant in the disk tier's in-memory index: 32 bytes, keyed by the key's digest.
package struct DiskIndexEntry: Sendable, Equatable {
    package var digest: KeyDigest
    package var width: UInt32
    package var height: UInt32
    /// Logical clock of the last use (higher is more recent).
    package var recency: UInt32
    /// bit 0 occupied, bit 1 mode (1 = fill), bits 2–3 style, bit 4 pixels verified.
    var bits: UInt8
    /// Which file under this name the entry describes: ``DiskIndex`` gives every insert and
    /// every replacement a new value, so that a verification of an older file under the same
    /// name cannot mark a newer one verified (wraps after 65 536 replacements; fits the padding).
    package var generation: UInt16 = 0

    static let occupiedBit: UInt8 = 1
    static let fillBit: UInt8 = 2
    static let verifiedBit: UInt8 = 16

    package init(digest: KeyDigest, variant: VariantDescriptor, recency: UInt32) {
        self.digest = digest
        self.width = UInt32(variant.size.width)
        self.height = UInt32(variant.size.height)
        self.recency = recency
        self.bits = Self.occupiedBit | (variant.mode == .fill ? Self.fillBit : 0) | (variant.style.rawValue & 3) << 2
    }

    static let empty = DiskIndexEntry(
        digest: KeyDigest(high: 0, low: 0), width: 0, height: 0, recency: 0, bits: 0)

    private init(digest: KeyDigest, width: UInt32, height: UInt32, recency: UInt32, bits: UInt8) {
        self.digest = digest
        self.width = width
        self.height = height
        self.recency = recency
        self.bits = bits
    }

    @inline(__always) var isOccupied: Bool { bits & Self.occupiedBit != 0 }

    package var isVerified: Bool {
        get { bits & Self.verifiedBit != 0 }
        set { bits = newValue ? bits | Self.verifiedBit : bits & ~Self.verifiedBit }
    }

    @inline(__always)
    package var variant: VariantDescriptor {
        VariantDescriptor(
            size: PixelSize(width: Int(width), height: Int(height)),
            mode: bits & Self.fillBit != 0 ? .fill : .fit,
            style: PixelStyle(rawValue: (bits >> 2) & 3)!)
    }

    package var name: DiskFileName { DiskFileName(digest: digest, variant: variant) }

    /// Whether two entries name the same file (digest and variant; recency and flags ignored).
    @inline(__always)
    func sameFile(_ other: DiskIndexEntry) -> Bool {
        digest == other.digest && width == other.width && height == other.height
            && (bits & 0b1111) == (other.bits & 0b1111)
    }

    /// Bytes the byte limit charges for this file: the pixel rows plus one 4 KiB block for the
    /// header and key. (The exact header length depends on the key's length, which the name does
    /// not carry; the index never `stat`s, so one block is the documented allowance.)
    package var chargedBytes: Int {
        let v = variant
        return PixelLayout.bytesPerRow(width: v.size.width, style: v.style) * v.size.height + DiskIndex.headerAllowance
    }
}

/// The disk tier's in-memory index: an open-addressing multimap (linear probing, backward-shift
/// deletion) from key digest to variants, 32 bytes per slot, at most 75 % full — so between 43
/// and 86 bytes per entry with no per-entry allocation. A lookup probes a handful of adjacent
/// slots; a miss costs no allocation and no syscall.
package struct DiskIndex: Sendable {
    /// Per-file allowance for header and key in ``DiskIndexEntry/chargedBytes``.
    package static let headerAllowance = 4096

    private var slots: [DiskIndexEntry]
    private var mask: Int
    /// Number of entries.
    package private(set) var count = 0
    /// Sum of ``DiskIndexEntry/chargedBytes`` over all entries.
    package private(set) var chargedBytes = 0

    package init(minimumCapacity: Int = 64) {
        var capacity = 16
        while capacity * 3 / 4 < minimumCapacity { capacity *= 2 }
        slots = [DiskIndexEntry](repeating: .empty, count: capacity)
        mask = capacity - 1
    }

    /// Bytes the slot table occupies.
    package var memoryBytes: Int { slots.count * MemoryLayout<DiskIndexEntry>.stride }

    @inline(__always)
    private func home(_ digest: KeyDigest) -> Int { Int(truncatingIfNeeded: digest.low) & mask }

    /// Source of ``DiskIndexEntry/generation``.
    private var lastGeneration: UInt16 = 0

    /// Continues the generation numbering of `other` (when this index replaces it), so that no
    /// entry here takes the generation of a different file there.
    package mutating func continueGenerations(after other: DiskIndex) { lastGeneration = other.lastGeneration }

    /// Inserts `entry` (with a new generation), or refreshes an entry for the same file (keeping
    /// the larger recency; when `replacedFile`, taking the verified flag of `entry` and a new
    /// generation). Returns whether it was new.
    @discardableResult
    package mutating func insert(_ entry: DiskIndexEntry, replacedFile: Bool = false) -> Bool {
        var i = home(entry.digest)
        while slots[i].isOccupied {
            if slots[i].sameFile(entry) {
                slots[i].recency = max(slots[i].recency, entry.recency)
                if replacedFile {
                    slots[i].isVerified = entry.isVerified
                    lastGeneration &+= 1
                    slots[i].generation = lastGeneration
                }
                return false
            }
            i = (i + 1) & mask
        }
        lastGeneration &+= 1
        slots[i] = entry
        slots[i].generation = lastGeneration
        count += 1
        chargedBytes += entry.chargedBytes
        if count * 4 > slots.count * 3 { grow() }
        return true
    }

    private mutating func grow() {
        let old = slots
        slots = [DiskIndexEntry](repeating: .empty, count: old.count * 2)
        mask = slots.count - 1
        for entry in old where entry.isOccupied {
            var i = home(entry.digest)
            while slots[i].isOccupied { i = (i + 1) & mask }
            slots[i] = entry
        }
    }

    /// The slot holding the file `entry` names, or `nil`.
    package func slot(of entry: DiskIndexEntry) -> Int? {
        var i = home(entry.digest)
        while slots[i].isOccupied {
            if slots[i].sameFile(entry) { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    package subscript(slot: Int) -> DiskIndexEntry {
        get { slots[slot] }
    }

    /// Marks the entry in `slot` as used at `clock`.
    package mutating func touch(_ slot: Int, clock: UInt32) { slots[slot].recency = clock }

    /// Marks `entry`'s file verified, unless the name now holds another file (another generation).
    package mutating func setVerified(_ entry: DiskIndexEntry) {
        if let s = slot(of: entry), slots[s].generation == entry.generation { slots[s].isVerified = true }
    }

    /// Removes the file `entry` names; returns whether it was present.
    @discardableResult
    package mutating func remove(_ entry: DiskIndexEntry) -> Bool {
        guard let s = slot(of: entry) else { return false }
        removeSlot(s)
        return true
    }

    private mutating func removeSlot(_ slot: Int) {
        chargedBytes -= slots[slot].chargedBytes
        count -= 1
        var hole = slot
        var j = (slot + 1) & mask
        // Backward shift: move each following entry whose home is not in (hole, j] into the hole.
        while slots[j].isOccupied {
            let h = home(slots[j].digest)
            if (j - h) & mask >= (j - hole) & mask {
                slots[hole] = slots[j]
                hole = j
            }
            j = (j + 1) & mask
        }
        slots[hole] = .empty
    }

    /// Removes every variant of `digest`; returns them.
    package mutating func removeAll(digest: KeyDigest) -> [DiskIndexEntry] {
        var removed: [DiskIndexEntry] = []
        while let s = firstSlot(of: digest) {
            removed.append(slots[s])
            removeSlot(s)
        }
        return removed
    }

    private func firstSlot(of digest: KeyDigest) -> Int? {
        var i = home(digest)
        while slots[i].isOccupied {
            if slots[i].digest == digest { return i }
            i = (i + 1) & mask
        }
        return nil
    }

    /// The slot of the best variant of `digest` for `query`, by ``VariantMatcher`` (the one
    /// tolerance rule). No allocation, no syscall.
    package func bestMatch(for digest: KeyDigest, query: SizeQuery) -> Int? {
        slots.withUnsafeBufferPointer { table in
            VariantMatcher.bestMatch(
                in: Candidates(table: table, digest: digest, start: home(digest), mask: mask),
                for: query, descriptor: { table[$0].variant })
        }
    }

    /// Slots of the variants of one digest, in probe order.
    private struct Candidates: Sequence, IteratorProtocol {
        let table: UnsafeBufferPointer<DiskIndexEntry>
        let digest: KeyDigest
        var position: Int
        let mask: Int
        init(table: UnsafeBufferPointer<DiskIndexEntry>, digest: KeyDigest, start: Int, mask: Int) {
            self.table = table
            self.digest = digest
            self.position = start
            self.mask = mask
        }
        mutating func next() -> Int? {
            while table[position].isOccupied {
                let current = position
                position = (position + 1) & mask
                if table[current].digest == digest { return current }
            }
            return nil
        }
    }

    /// All entries (for rescans, tests and diagnostics).
    package var entries: [DiskIndexEntry] { slots.filter(\.isOccupied) }

    /// Calls `body` for every entry.
    package func forEach(_ body: (DiskIndexEntry) -> Void) {
        for entry in slots where entry.isOccupied { body(entry) }
    }

    /// The least recently used entries, oldest first, whose charged bytes add up to at least
    /// `bytes` (or all entries). One pass over the table per 64 victims.
    package func leastRecentlyUsed(atLeast bytes: Int, excluding excluded: DiskIndexEntry? = nil) -> [DiskIndexEntry] {
        var victims: [DiskIndexEntry] = []
        var freed = 0
        var floor: (recency: UInt32, slot: Int) = (0, -1)  // entries ≤ floor were taken already
        while freed < bytes {
            // Collect the 64 oldest entries after `floor` in (recency, slot) order.
            var batch: [(recency: UInt32, slot: Int)] = []
            batch.reserveCapacity(65)
            for s in 0..<slots.count where slots[s].isOccupied {
                let key = (slots[s].recency, s)
                if floor.slot >= 0 && !(key > floor) { continue }
                if let excluded, slots[s].sameFile(excluded) { continue }
                if batch.count == 64, let last = batch.last, !(key < last) { continue }
                let at = batch.firstIndex(where: { key < $0 }) ?? batch.count
                batch.insert(key, at: at)
                if batch.count > 64 { batch.removeLast() }
            }
            if batch.isEmpty { break }
            for item in batch {
                victims.append(slots[item.slot])
                freed += slots[item.slot].chargedBytes
                floor = item
                if freed >= bytes { break }
            }
        }
        return victims
    }

    /// Renumbers recencies 0..<count in their current order (when the clock would wrap).
    package mutating func compactRecency() -> UInt32 {
        var order = slots.indices.filter { slots[$0].isOccupied }
        order.sort { slots[$0].recency < slots[$1].recency }
        for (rank, s) in order.enumerated() { slots[s].recency = UInt32(rank) }
        return UInt32(order.count)
    }
}
