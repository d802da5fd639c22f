import StrataBase
/// One variant in the disk tier's in-memory index, as the index hands it out: the file's name
/// (digest and variant) and what the index knows about the file. 32 bytes.
package struct DiskIndexEntry: Sendable, Equatable {
    package var digest: ImageEntityID
    /// (width − 1) in bits 0–19, (height − 1) in bits 20–39 (sides are 1…2^20), flags in bits
    /// 40–47, ``generation`` in bits 48–63.
    private var packed: UInt64
    /// The inode number of the file the entry describes, 0 when unknown. Names are reused (a
    /// store replaces a file by renaming over it), so deleting by name alone could delete a
    /// newer file published after this entry was chosen; eviction and removal delete a name only
    /// while it still holds this inode. Learned for free from `getdents64` when the index is
    /// built, with one `fstat` per publish and one `fstatat` per file another writer publishes.
    package var inode: UInt64

    private static let fillFlag: UInt64 = 1 << 40
    private static let styleShift: UInt64 = 41  // two bits
    private static let wholeFlag: UInt64 = 1 << 43
    private static let verifiedFlag: UInt64 = 1 << 44
    private static let generationShift: UInt64 = 48

    /// The entry for the file `name` names.
    package init(_ name: DiskFileName, inode: UInt64 = 0) {
        self.init(digest: name.digest, variant: name.variant, isWholeOriginal: name.isWholeOriginal, inode: inode)
    }

    package init(digest: ImageEntityID, variant: VariantDescriptor, isWholeOriginal: Bool = false, inode: UInt64 = 0) {
        let size = variant.size
        precondition((1...DiskFileName.maximumSide).contains(size.width) && (1...DiskFileName.maximumSide).contains(size.height))
        self.digest = digest
        self.inode = inode
        self.packed =
            UInt64(size.width - 1) | UInt64(size.height - 1) << 20
            | (variant.mode == .fill ? Self.fillFlag : 0) | UInt64(variant.style.rawValue & 3) << Self.styleShift
            | (isWholeOriginal ? Self.wholeFlag : 0)
    }

    /// The file holds the whole original (its name's mode is `o`).
    package var isWholeOriginal: Bool { packed & Self.wholeFlag != 0 }

    package var isVerified: Bool {
        get { packed & Self.verifiedFlag != 0 }
        set { packed = newValue ? packed | Self.verifiedFlag : packed & ~Self.verifiedFlag }
    }

    /// Which file under this name the entry describes: ``DiskIndex`` gives every insert and
    /// every replacement a new value, so that a verification of an older file under the same
    /// name cannot mark a newer one verified (wraps after 65 536 replacements).
    package var generation: UInt16 {
        get { UInt16(truncatingIfNeeded: packed >> Self.generationShift) }
        set { packed = packed & ~(0xFFFF << Self.generationShift) | UInt64(newValue) << Self.generationShift }
    }

    @inline(__always)
    package var variant: VariantDescriptor {
        VariantDescriptor(
            size: PixelSize(width: Int(packed & 0xF_FFFF) + 1, height: Int(packed >> 20 & 0xF_FFFF) + 1),
            mode: packed & Self.fillFlag != 0 ? .fill : .fit,
            style: PixelStyle(rawValue: UInt8(truncatingIfNeeded: packed >> Self.styleShift) & 3)!)
    }

    package var name: DiskFileName { DiskFileName(digest: digest, variant: variant, isWholeOriginal: isWholeOriginal) }

    /// Whether two entries name the same file (digest and variant; flags, generation and inode
    /// ignored).
    @inline(__always)
    package func sameFile(_ other: DiskIndexEntry) -> Bool {
        digest == other.digest && (packed ^ other.packed) & Self.nameBits == 0
    }

    private static let nameBits: UInt64 = (1 << 44) - 1

    /// Bytes the byte limit charges for this file: the pixel rows plus one 4 KiB block for the
    /// header and key. (The exact header length depends on the key's length, which the name does
    /// not carry; the index never `stat`s, so one block is the documented allowance.)
    package var chargedBytes: Int {
        let v = variant
        return PixelLayout.bytesPerRow(width: v.size.width, style: v.style) * v.size.height + DiskIndex.headerAllowance
    }
}

/// The disk tier's in-memory index: a multimap from key digest to variants, kept in
/// least-recently-used order.
///
/// - Records (40 bytes: the entry and two links of a doubly linked recency list) live in one
///   array under stable ids; freed ids are reused.
/// - An open-addressing table (linear probing, backward-shift deletion, at most 75 % full) maps
///   digests to ids: 8 bytes per slot, the low 32 bits of the digest beside the id, so a probe
///   compares tags in adjacent words and reads a record only when the tag matches. Total: about
///   51 to 101 bytes per entry (73 at 100 000), no per-entry allocation.
/// - A lookup probes a handful of adjacent slots; a miss costs no allocation and no syscall. A
///   use moves the record to the newest end of the list (O(1)); choosing N eviction victims takes
///   them from the oldest end (O(N)), never a scan of the table.
package struct DiskIndex: Sendable {
    /// Per-file allowance for header and key in ``DiskIndexEntry/chargedBytes``.
    package static let headerAllowance = 4096

    package struct Record {
        package var entry: DiskIndexEntry
        /// Neighbours in the recency list (``none`` at the ends).
        package var older: UInt32
        package var newer: UInt32
    }

    private static let none = UInt32.max

    /// Slots: 0 when empty, else `UInt32(truncatingIfNeeded: digest.low) << 32 | (id + 1)`. The
    /// home slot is the tag's low bits, so rehashing and deletion never read a record.
    private var table: [UInt64]
    private var mask: Int
    private var records: [Record] = []
    /// Freed record ids, linked through `newer`.
    private var free = none
    private var oldest = none
    private var newest = none
    /// Number of entries.
    package private(set) var count = 0
    /// Sum of ``DiskIndexEntry/chargedBytes`` over all entries.
    package private(set) var chargedBytes = 0
    /// Source of ``DiskIndexEntry/generation``.
    private var lastGeneration: UInt16 = 0

    package init(minimumCapacity: Int = 64) {
        var capacity = 16
        while capacity * 3 / 4 < minimumCapacity { capacity *= 2 }
        table = [UInt64](repeating: 0, count: capacity)
        mask = capacity - 1
        records.reserveCapacity(minimumCapacity)
    }

    /// Bytes the table and the records occupy.
    package var memoryBytes: Int {
        table.count * MemoryLayout<UInt64>.stride + records.capacity * MemoryLayout<Record>.stride
    }

    @inline(__always) private static func tag(_ digest: ImageEntityID) -> UInt64 { digest.low << 32 }
    @inline(__always) private static func id(_ slot: UInt64) -> Int { Int(truncatingIfNeeded: slot & 0xFFFF_FFFF) - 1 }
    @inline(__always) private func home(_ slot: UInt64) -> Int { Int(truncatingIfNeeded: slot >> 32) & mask }
    @inline(__always) private func home(_ digest: ImageEntityID) -> Int { Int(truncatingIfNeeded: digest.low) & mask }

    /// Continues the generation numbering of `other` (when this index replaces it), so that no
    /// entry here takes the generation of a different file there.
    package mutating func continueGenerations(after other: DiskIndex) { lastGeneration = other.lastGeneration }

    /// The table slot and record id of the file `entry` names.
    private func find(_ entry: DiskIndexEntry) -> (slot: Int, id: Int)? {
        let tag = Self.tag(entry.digest)
        var i = home(entry.digest)
        while table[i] != 0 {
            if table[i] & 0xFFFF_FFFF_0000_0000 == tag {
                let id = Self.id(table[i])
                if records[id].entry.sameFile(entry) { return (i, id) }
            }
            i = (i + 1) & mask
        }
        return nil
    }

    /// Inserts `entry` as the most recently used (with a new generation), or refreshes the entry
    /// for the same file: when `replacedFile`, it takes the verified flag and inode of `entry`
    /// and a new generation; when `use`, it becomes the most recently used (otherwise it keeps its place,
    /// so that a late echo of an event does not reorder the list). Returns whether it was new.
    @discardableResult
    package mutating func insert(_ entry: DiskIndexEntry, replacedFile: Bool = false, use: Bool = false) -> Bool {
        if let (_, id) = find(entry) {
            if replacedFile {
                records[id].entry.isVerified = entry.isVerified
                records[id].entry.inode = entry.inode
                lastGeneration &+= 1
                records[id].entry.generation = lastGeneration
            }
            if use { touch(id) }
            return false
        }
        var stored = entry
        lastGeneration &+= 1
        stored.generation = lastGeneration
        let record = Record(entry: stored, older: newest, newer: Self.none)
        let id: Int
        if free != Self.none {
            id = Int(free)
            free = records[id].newer
            records[id] = record
        } else {
            id = records.count
            precondition(id < Int(UInt32.max - 1), "disk index full")
            records.append(record)
        }
        linkNewest(id)
        var i = home(entry.digest)
        while table[i] != 0 { i = (i + 1) & mask }
        table[i] = Self.tag(entry.digest) | UInt64(id + 1)
        count += 1
        chargedBytes += entry.chargedBytes
        if count * 4 > table.count * 3 { grow() }
        return true
    }

    private mutating func grow() {
        let old = table
        table = [UInt64](repeating: 0, count: old.count * 2)
        mask = table.count - 1
        for slot in old where slot != 0 {
            var i = home(slot)
            while table[i] != 0 { i = (i + 1) & mask }
            table[i] = slot
        }
    }

    /// Appends record `id` at the newest end of the recency list (its links are overwritten).
    private mutating func linkNewest(_ id: Int) {
        records[id].older = newest
        records[id].newer = Self.none
        if newest != Self.none { records[Int(newest)].newer = UInt32(id) } else { oldest = UInt32(id) }
        newest = UInt32(id)
    }

    private mutating func unlink(_ id: Int) {
        let older = records[id].older, newer = records[id].newer
        if older != Self.none { records[Int(older)].newer = newer } else { oldest = newer }
        if newer != Self.none { records[Int(newer)].older = older } else { newest = older }
    }

    /// The id of the record for the file `entry` names, or `nil`. Ids stay valid until the
    /// entry is removed.
    package func slot(of entry: DiskIndexEntry) -> Int? { find(entry)?.id }

    package subscript(id: Int) -> DiskIndexEntry { records[id].entry }

    /// Marks the entry `id` as the most recently used.
    package mutating func touch(_ id: Int) {
        guard newest != UInt32(id) else { return }
        unlink(id)
        linkNewest(id)
    }

    /// Marks `entry`'s file verified, unless the name now holds another file (another generation).
    package mutating func setVerified(_ entry: DiskIndexEntry) {
        if let (_, id) = find(entry), records[id].entry.generation == entry.generation { records[id].entry.isVerified = true }
    }

    /// Removes the file `entry` names; returns whether it was present.
    @discardableResult
    package mutating func remove(_ entry: DiskIndexEntry) -> Bool {
        guard let (slot, id) = find(entry) else { return false }
        remove(slot: slot, id: id)
        return true
    }

    private mutating func remove(slot: Int, id: Int) {
        chargedBytes -= records[id].entry.chargedBytes
        count -= 1
        unlink(id)
        records[id].newer = free
        free = UInt32(id)
        // Backward shift: move each following slot whose home is not in (hole, j] into the hole.
        var hole = slot
        var j = (slot + 1) & mask
        while table[j] != 0 {
            let h = home(table[j])
            if (j - h) & mask >= (j - hole) & mask {
                table[hole] = table[j]
                hole = j
            }
            j = (j + 1) & mask
        }
        table[hole] = 0
    }

    /// Removes record `id` (found by probing for its id from its digest's home slot).
    private mutating func remove(id: Int) {
        let wanted = UInt64(id + 1)
        var i = home(records[id].entry.digest)
        while table[i] & 0xFFFF_FFFF != wanted { i = (i + 1) & mask }
        remove(slot: i, id: id)
    }

    /// Removes every variant of `digest`; returns them.
    package mutating func removeAll(digest: ImageEntityID) -> [DiskIndexEntry] {
        var removed: [DiskIndexEntry] = []
        while let id = withCandidates(of: digest, { candidates in candidates.next() }) {
            removed.append(records[id].entry)
            remove(id: id)
        }
        return removed
    }

    /// The id of the best variant of `digest` for `query`, by ``VariantMatcher`` (the one
    /// tolerance rule, whole originals included). No allocation, no syscall.
    package func bestMatch(for digest: ImageEntityID, query: SizeQuery) -> Int? {
        withCandidates(of: digest) { candidates in
            VariantMatcher.bestMatch(in: candidates, for: query) { id in
                let entry = candidates.records[id].entry
                return (entry.variant, entry.isWholeOriginal)
            }
        }
    }

    private func withCandidates<R>(of digest: ImageEntityID, _ body: (inout Candidates) -> R) -> R {
        table.withUnsafeBufferPointer { table in
            records.withUnsafeBufferPointer { records in
                var candidates = Candidates(table: table, records: records, digest: digest, start: home(digest), mask: mask)
                return body(&candidates)
            }
        }
    }

    /// Record ids of the variants of one digest, in probe order.
    private struct Candidates: Sequence, IteratorProtocol {
        let table: UnsafeBufferPointer<UInt64>
        let records: UnsafeBufferPointer<Record>
        let digest: ImageEntityID
        let tag: UInt64
        var position: Int
        let mask: Int
        init(table: UnsafeBufferPointer<UInt64>, records: UnsafeBufferPointer<Record>, digest: ImageEntityID, start: Int, mask: Int) {
            self.table = table
            self.records = records
            self.digest = digest
            self.tag = DiskIndex.tag(digest)
            self.position = start
            self.mask = mask
        }
        mutating func next() -> Int? {
            while true {
                let slot = table[position]
                if slot == 0 { return nil }
                position = (position + 1) & mask
                if slot & 0xFFFF_FFFF_0000_0000 == tag {
                    let id = DiskIndex.id(slot)
                    if records[id].entry.digest == digest { return id }
                }
            }
        }
    }

    /// All entries, least recently used first (for rescans, tests and diagnostics).
    package var entries: [DiskIndexEntry] {
        var all: [DiskIndexEntry] = []
        all.reserveCapacity(count)
        forEach { all.append($0) }
        return all
    }

    /// Calls `body` for every entry, least recently used first.
    package func forEach(_ body: (DiskIndexEntry) -> Void) {
        var id = oldest
        while id != Self.none {
            body(records[Int(id)].entry)
            id = records[Int(id)].newer
        }
    }

    /// Removes and returns the least recently used entries, oldest first, until their charged
    /// bytes add up to at least `bytes`, `maximumCount` are taken, or none are left; `excluded`
    /// (the file a store is about to replace) is never taken. Looks at each taken entry once
    /// (plus `excluded`), adding that number to `examined`.
    package mutating func takeLeastRecentlyUsed(
        atLeast bytes: Int, maximumCount: Int, excluding excluded: DiskIndexEntry? = nil, examined: inout Int
    ) -> [DiskIndexEntry] {
        var victims: [DiskIndexEntry] = []
        var freed = 0
        var id = oldest
        while id != Self.none, freed < bytes, victims.count < maximumCount {
            examined += 1
            let current = Int(id)
            id = records[current].newer
            let entry = records[current].entry
            if let excluded, entry.sameFile(excluded) { continue }
            victims.append(entry)
            freed += entry.chargedBytes
            remove(id: current)
        }
        return victims
    }
}
