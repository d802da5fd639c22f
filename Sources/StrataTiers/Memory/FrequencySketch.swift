import StrataBase
/// An approximate, aging count of how often each key was seen recently: TinyLFU's admission
/// filter (a count-min sketch of 4-bit counters).
///
/// Each key maps to four counters inside one 64-byte block, so an update touches one cache
/// line. Updates are *conservative* (only the counters equal to the current minimum grow),
/// which keeps collisions from inflating estimates. After `sampleSize` updates every counter
/// is halved, so the sketch follows a changing popularity instead of remembering forever.
/// Memory: 8 bytes per unit of capacity × `countersPerEntry` / 16. Not thread-safe; the cache
/// that owns it locks.
@usableFromInline
package struct FrequencySketch: ~Copyable {
    /// 4-bit counters, 16 per word; 8 words (64 bytes) per block.
    @usableFromInline package var table: UnsafeMutablePointer<UInt64>
    @usableFromInline package var words: Int
    @usableFromInline package var blockMask: Int
    @usableFromInline package var additions: Int = 0
    /// Number of halvings so far (wrapping); entries keep their own hit counts stamped with it.
    @usableFromInline package var epoch: UInt8 = 0
    @usableFromInline package var sampleSize: Int
    /// The capacity (entries) the table was sized for.
    @usableFromInline package private(set) var capacity: Int

    /// Counters per cached entry (across the four rows). Measured on Zipf 0.8/1.0 traces
    /// (`strata-bench memory`): 64 gives a frequency resolution close to exact LFU at 1 % and
    /// 10 % cache sizes; 16 (Caffeine's density) loses about 1 point of miss-ratio gain on Zipf 0.8
    /// at 1 %, and 128 gains nothing.
    @usableFromInline package static var countersPerEntry: Int { 64 }
    /// Updates between two halvings, per counter of one row. The history spans about
    /// `7 × countersPerEntry / 4` (112) times the capacity in requests; 5, 7, 10 and 15 were
    /// tried on the Zipf traces and 7 gave the lowest miss ratios.
    @usableFromInline package static var samplesPerRowCounter: Int { 7 }
    /// Largest table, in words (32 MiB): beyond it estimates get coarser, never the memory larger.
    @usableFromInline package static var maximumWords: Int { 1 << 22 }

    @usableFromInline
    package init(capacity: Int) {
        let wanted = Swift.max(
            64, Swift.min(Self.maximumWords, capacity.multipliedReportingOverflow(by: Self.countersPerEntry / 16).partialValue))
        var words = 8
        while words < wanted { words <<= 1 }
        table = CacheMemory.allocateZeroed(UInt64.self, count: words)
        self.words = words
        blockMask = words / 8 - 1
        self.capacity = capacity
        // Counters per row = words × 16 / 4.
        sampleSize = Swift.max(64, words * 4 * Self.samplesPerRowCounter)
    }

    @inlinable
    deinit { CacheMemory.deallocate(table, count: words) }

    /// Re-sizes for a larger capacity (forgets the history; happens O(log n) times as a cache
    /// fills, never in steady state).
    @usableFromInline
    package mutating func grow(to newCapacity: Int) {
        guard newCapacity > capacity else { return }
        self = FrequencySketch(capacity: newCapacity)
    }

    /// The four counters of `hash` (one per row, all in one 64-byte block): word indices and
    /// nibble shifts. Row `i` uses word `block × 8 + 2i` or `+ 2i + 1`, so the four words
    /// are distinct.
    @usableFromInline
    package struct Counters {
        @usableFromInline package var w0, w1, w2, w3: Int
        @usableFromInline package var s0, s1, s2, s3: UInt64

        @inlinable @inline(__always)
        package init(_ hash: Int, blockMask: Int) {
            let h = FrequencySketch.mix(hash)
            let base = (Int(truncatingIfNeeded: h) & blockMask) &* 8
            // Bits above the block index choose, for each of the 4 rows, one of two words and
            // one of 16 nibbles (5 bits per row).
            let sel = Int(truncatingIfNeeded: h >> 40)
            w0 = base | (sel & 1)
            s0 = UInt64(truncatingIfNeeded: (sel >> 1) & 15) &* 4
            w1 = base | 2 | ((sel >> 5) & 1)
            s1 = UInt64(truncatingIfNeeded: (sel >> 6) & 15) &* 4
            w2 = base | 4 | ((sel >> 10) & 1)
            s2 = UInt64(truncatingIfNeeded: (sel >> 11) & 15) &* 4
            w3 = base | 6 | ((sel >> 15) & 1)
            s3 = UInt64(truncatingIfNeeded: (sel >> 16) & 15) &* 4
        }
    }

    @inlinable @inline(__always)
    package static func mix(_ hash: Int) -> UInt64 {
        // Swift's hashes are already SipHash-quality; one multiply spreads them over the
        // bits used above even for hashes that differ only in high bits.
        UInt64(bitPattern: Int64(hash)) &* 0x9E37_79B9_7F4A_7C15
    }

    /// The four counter values of `c`.
    @inlinable @inline(__always)
    package func read(_ c: Counters) -> (UInt64, UInt64, UInt64, UInt64) {
        (
            (table[c.w0] >> c.s0) & 15, (table[c.w1] >> c.s1) & 15,
            (table[c.w2] >> c.s2) & 15, (table[c.w3] >> c.s3) & 15
        )
    }

    /// The estimated recent frequency of `hash` (0...15).
    @inlinable
    package func frequency(_ hash: Int) -> Int {
        let (c0, c1, c2, c3) = read(Counters(hash, blockMask: blockMask))
        return Int(Swift.min(Swift.min(c0, c1), Swift.min(c2, c3)))
    }

    /// Records one occurrence of `hash`; returns its estimate afterwards (what
    /// ``frequency(_:)`` would now return).
    @inlinable
    @discardableResult
    package mutating func increment(_ hash: Int) -> Int {
        let c = Counters(hash, blockMask: blockMask)
        let (c0, c1, c2, c3) = read(c)
        let minimum = Swift.min(Swift.min(c0, c1), Swift.min(c2, c3))
        guard minimum < 15 else { return 15 }
        if c0 == minimum { table[c.w0] &+= 1 << c.s0 }
        if c1 == minimum { table[c.w1] &+= 1 << c.s1 }
        if c2 == minimum { table[c.w2] &+= 1 << c.s2 }
        if c3 == minimum { table[c.w3] &+= 1 << c.s3 }
        additions &+= 1
        if additions >= sampleSize {
            age()
            return Int((minimum + 1) >> 1)
        }
        return Int(minimum + 1)
    }

    /// Counts one access towards the next halving without touching the table: a resident
    /// entry's hits are counted in the entry itself (see ``TinyLFUCore``) and added to the
    /// table when it leaves.
    @inlinable
    package mutating func tick() {
        additions &+= 1
        if additions >= sampleSize { age() }
    }

    /// Counts `count` accesses at once (hits taken without the lock, handed over later).
    @inlinable
    package mutating func tick(count: Int) {
        additions &+= count
        while additions >= sampleSize { age() }
    }

    /// Adds `amount` occurrences of `hash` (conservatively: the counters below the new
    /// estimate are raised to it), without counting them towards the next halving.
    @inlinable
    package mutating func add(_ hash: Int, _ amount: Int) {
        guard amount > 0 else { return }
        let c = Counters(hash, blockMask: blockMask)
        let (c0, c1, c2, c3) = read(c)
        let minimum = Swift.min(Swift.min(c0, c1), Swift.min(c2, c3))
        let target = Swift.min(15, minimum + UInt64(amount))
        if c0 < target { table[c.w0] = table[c.w0] & ~(15 << c.s0) | (target << c.s0) }
        if c1 < target { table[c.w1] = table[c.w1] & ~(15 << c.s1) | (target << c.s1) }
        if c2 < target { table[c.w2] = table[c.w2] & ~(15 << c.s2) | (target << c.s2) }
        if c3 < target { table[c.w3] = table[c.w3] & ~(15 << c.s3) | (target << c.s3) }
    }

    /// Halves every counter (the "reset" of TinyLFU). O(table), amortised O(1) per update.
    @usableFromInline
    package mutating func age() {
        epoch &+= 1
        additions /= 2
        for i in 0..<words {
            table[i] = (table[i] >> 1) & 0x7777_7777_7777_7777
        }
    }

    /// Forgets everything.
    @usableFromInline
    package mutating func clear() {
        for i in 0..<words { table[i] = 0 }
        additions = 0
    }
}
