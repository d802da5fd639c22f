#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import CStrataLinux
import Synchronization

/// Lets the readers of a set of ``Lock``-protected structures skip their locks: a read-biased
/// lock in the manner of BRAVO (Dice & Kogan, 2019), with a reader count per processor.
///
/// Use it where lookups far outnumber changes and a lookup under the lock would spend most of
/// its time moving the lock's cache line between cores (``MemoryCache``'s hits). A reader calls
/// ``enter(_:)``: it counts itself in its processor's cell for that structure and, if the
/// structure's bias is on, reads it without the lock, then ``leave(_:hit:)``. A writer takes the
/// structure's ``Lock`` and calls ``revoke(_:)``, which turns the bias off and waits until every
/// processor's cell shows no reader inside, then ``restore(_:)`` before it unlocks. A reader
/// that finds the bias off takes the lock like a writer.
///
/// - Cost: a read is two atomic adds on a cache line only its processor's threads write, and one load of
///   a line that changes only when the structure is written: no line moves between cores while
///   nothing is written. A write adds one store and one load per processor row (a write on a
///   16-core machine reads 16 lines that the readers there wrote). A reader descheduled inside
///   its read holds a writer up until it runs again (the writer spins, then yields).
/// - Hits and misses: a reader may count a hit (the top 32 bits of its cell) or a miss (a
///   second word beside the cell, on the same line) as it leaves; ``revoke(_:)`` hands the
///   writer what was counted since its last call, so statistics stay exact while no cell counts
///   2³² hits between two writes of its structure.
/// - Readers write nothing the writer reads without the lock except through atomics: anything
///   a lock-free reader changes in the structure must be an atomic access.
@usableFromInline
package struct ReaderBias: ~Copyable, @unchecked Sendable {
    /// `cells[row * rowCells + 2 * structure]`: readers inside (low 32 bits) and hits counted
    /// by them (high 32 bits); the next word, the misses they counted. Row = processor id
    /// modulo `rows`; each row starts on its own line.
    @usableFromInline package let cells: UnsafeMutablePointer<Atomic<UInt64>>
    @usableFromInline package let rowCells: Int
    @usableFromInline package let rowMask: Int
    /// Per structure, a 64-byte-aligned block: the bias word (1 on, 0 off), then, written only
    /// under the structure's lock, each row's miss count and the high half of each row's cell
    /// at the last revoke (``missesSeen(_:)``, ``hitsSeen(_:)``).
    @usableFromInline package let blocks: UnsafeMutableRawPointer
    @usableFromInline package let blockSize: Int

    @usableFromInline package static var line: Int { 64 }

    /// Counts for `structures` structures, all biased towards readers.
    @usableFromInline
    package init(structures: Int) {
        precondition(structures >= 1)
        var rows = 1
        while rows < Processors.configured && rows < 256 { rows *= 2 }
        let line = Self.line
        rowCells = (structures * 16 + line - 1) / line * line / 8
        rowMask = rows - 1
        let cellBytes = rows * rowCells * 8
        cells = UnsafeMutableRawPointer.allocate(byteCount: cellBytes, alignment: line)
            .bindMemory(to: Atomic<UInt64>.self, capacity: rows * rowCells)
        for i in 0..<rows * rowCells { (cells + i).initialize(to: Atomic(0)) }
        blockSize = (8 + 12 * rows + line - 1) / line * line
        blocks = UnsafeMutableRawPointer.allocate(byteCount: blockSize * structures, alignment: line)
        for s in 0..<structures {
            let block = blocks + s * blockSize
            block.bindMemory(to: Atomic<UInt32>.self, capacity: 1).initialize(to: Atomic(1))
            (block + 8).bindMemory(to: UInt64.self, capacity: rows).initialize(repeating: 0, count: rows)
            (block + 8 + 8 * rows).bindMemory(to: UInt32.self, capacity: rows).initialize(repeating: 0, count: rows)
        }
    }

    deinit {
        UnsafeMutableRawPointer(cells).deallocate()
        blocks.deallocate()
    }

    @inlinable package var rows: Int { rowMask + 1 }

    @inlinable
    package func bias(_ structure: Int) -> UnsafeMutablePointer<Atomic<UInt32>> {
        (blocks + structure * blockSize).assumingMemoryBound(to: Atomic<UInt32>.self)
    }

    @inlinable
    package func missesSeen(_ structure: Int) -> UnsafeMutablePointer<UInt64> {
        (blocks + structure * blockSize + 8).assumingMemoryBound(to: UInt64.self)
    }

    @inlinable
    package func hitsSeen(_ structure: Int) -> UnsafeMutablePointer<UInt32> {
        (blocks + structure * blockSize + 8 + 8 * rows).assumingMemoryBound(to: UInt32.self)
    }

    /// Starts a lock-free read of `structure`: the reader's cell, to pass to ``leave(_:hit:)``,
    /// or `nil` when a writer holds the structure (take its lock instead).
    @inlinable
    package func enter(_ structure: Int) -> Int? {
        let cell = (Int(strata_current_cpu()) & rowMask) * rowCells + 2 * structure
        // Counted first, then the bias checked (both sequentially consistent): a writer that
        // turned the bias off before this check sees the count and waits for `leave`.
        cells[cell].wrappingAdd(1, ordering: .sequentiallyConsistent)
        if bias(structure).pointee.load(ordering: .sequentiallyConsistent) != 0 { return cell }
        cells[cell].wrappingSubtract(1, ordering: .releasing)
        return nil
    }

    /// Ends the read begun by ``enter(_:)``, counting one hit when `hit`.
    @inlinable
    package func leave(_ cell: Int, hit: Bool) {
        // +2³² − 1: one more hit and one reader fewer in a single add (the low half is ≥ 1).
        cells[cell].wrappingAdd(hit ? 0xFFFF_FFFF : UInt64.max, ordering: .releasing)
    }

    /// Ends the read begun by ``enter(_:)``, counting one miss.
    @inlinable
    package func leaveMissing(_ cell: Int) {
        cells[cell + 1].wrappingAdd(1, ordering: .relaxed)  // published by the release below
        cells[cell].wrappingSubtract(1, ordering: .releasing)
    }

    /// With `structure`'s lock held: turns its readers away and waits for those inside to
    /// leave; returns the hits and misses they counted since the last call. Follow with
    /// ``restore(_:)`` before unlocking.
    @usableFromInline
    package func revoke(_ structure: Int) -> (hits: UInt64, misses: UInt64) {
        bias(structure).pointee.store(0, ordering: .sequentiallyConsistent)
        let seen = hitsSeen(structure), missesSeen = missesSeen(structure)
        var hits: UInt64 = 0, misses: UInt64 = 0
        for row in 0..<rows {
            let cell = cells + row * rowCells + 2 * structure
            var value = cell.pointee.load(ordering: .sequentiallyConsistent)
            var spins = 0
            while value & 0xFFFF_FFFF != 0 {
                spins += 1
                if spins < 1_000 { strata_spin_pause() } else { sched_yield() }
                value = cell.pointee.load(ordering: .sequentiallyConsistent)
            }
            let high = UInt32(truncatingIfNeeded: value >> 32)
            hits &+= UInt64(high &- seen[row])
            seen[row] = high
            let missed = (cell + 1).pointee.load(ordering: .relaxed)  // ordered by the load above
            misses &+= missed &- missesSeen[row]
            missesSeen[row] = missed
        }
        return (hits, misses)
    }

    /// Lets readers of `structure` in again without its lock (the writes made under it are
    /// published to them).
    @inlinable
    package func restore(_ structure: Int) {
        bias(structure).pointee.store(1, ordering: .releasing)
    }
}
