import CStrataSIMD
import StrataBase

/// Streams an image's rows, top to bottom, into every level of its pyramid at once, and hands
/// each tile over as soon as its rows are complete (libvips' pyramid in one pass).
///
/// Each level keeps one strip of a tile row (`tileSize` rows of its width); two finished rows of
/// a level make one row of the next (a 2×2 box mean, rounded, in premultiplied BGRA), written
/// straight into that level's strip. When a strip is full, or its level ends, its tiles go to
/// `emit`, left to right, and the strip starts over. So memory is bounded by the strips —
/// `tileSize` × 4 bytes × (the sum of the levels' widths), under twice level 0's share — never by
/// the image's height. Tiles come in order per level; coarser levels' tiles come between
/// finer ones as their rows complete.
///
/// One pass at a time. ``pipelined(forkJoin:decode:)`` runs it on two threads: the decode of
/// the next strip of level 0 (into a second buffer) beside the reduction and emission of the
/// last one; the two touch disjoint memory and are joined before either goes on (hence the
/// unchecked `Sendable`). `emit`'s image is a view of a strip, valid only during the call
/// (copy it); `emit` runs on one thread at a time.
package final class PyramidReducer: @unchecked Sendable {
    package let geometry: PyramidGeometry
    /// The levels this reducer makes: its input is the first one's rows.
    package let levels: Range<Int>
    private let emit: (TileAddress, PixelImage) throws -> Void
    private var strips: [Strip]

    /// One level's tile row in progress.
    /// Level 0's strip and the second buffer a pipelined pass decodes into meanwhile.
    private var spare: PixelStorage?

    private struct Strip {
        var storage: PixelStorage
        let stride: Int
        let size: PixelSize
        /// Rows of the strip written.
        var filled = 0
        /// Rows of the strip already reduced into the next level.
        var reduced = 0
        /// The tile row this strip is.
        var tileRow = 0
        /// Rows of the level written so far.
        var rowsDone = 0
    }

    /// A reducer of `levels` of `geometry` (default: all): its input is the rows of the first
    /// of them (level 0, the image, or a coarser level decoded straight at its scale).
    package init(geometry: PyramidGeometry, levels: Range<Int>? = nil, emit: @escaping (TileAddress, PixelImage) throws -> Void) {
        let levels = levels ?? geometry.levels.indices
        precondition(!levels.isEmpty && levels.upperBound <= geometry.levels.count, "PyramidReducer: no such levels")
        self.geometry = geometry
        self.levels = levels
        self.emit = emit
        strips = geometry.levels[levels].map { size in
            let stride = PixelLayout.bytesPerRow(width: size.width, style: .bgra32Premultiplied)
            let rows = min(size.height, geometry.tileSize)
            return Strip(storage: PixelStorage(uninitializedByteCount: stride * rows), stride: stride, size: size)
        }
    }

    /// Bytes the strips hold: the pass's memory beyond the decoder's.
    package var stripBytes: Int { strips.reduce(0) { $0 + $1.storage.count } }

    /// Whether every row of the image has been written.
    package var isComplete: Bool { strips[0].rowsDone == strips[0].size.height }

    /// The size of the input (the first level's).
    package var inputSize: PixelSize { strips[0].size }

    /// Lets `body` write the next rows of the image: it gets where row `n` of the image goes,
    /// the stride, and how many rows fit (at least 1), and returns how many it wrote. Their
    /// reductions and any tiles they complete follow before this returns.
    package func write<E: Error>(_ body: (UnsafeMutableRawPointer, _ stride: Int, _ capacity: Int) throws(E) -> Int) throws {
        precondition(!isComplete, "PyramidReducer: every row is written")
        let s = strips[0]
        let capacity = min(geometry.tileSize - s.filled, s.size.height - s.rowsDone)
        let written = try body(s.storage.base + s.filled * s.stride, s.stride, capacity)
        precondition(written >= 0 && written <= capacity, "PyramidReducer: wrote \(written) rows of \(capacity)")
        strips[0].filled += written
        strips[0].rowsDone += written
        try advance(0)
    }

    /// Feeds the whole image through `decode(rows, stride, count)`, which writes the next
    /// `count` rows of the image (a strip: `tileSize` rows, fewer at the end) from `rows`,
    /// decoding strip n+1 on this thread while strip n is reduced and its tiles emitted on a
    /// helper from `forkJoin` (or after it, here, when no helper starts). Memory: one more
    /// level-0 strip. Throws the first error of either side; nothing runs after it.
    package func pipelined(
        forkJoin: ForkJoin, decode: @escaping @Sendable (UnsafeMutableRawPointer, _ stride: Int, _ count: Int) throws -> Void
    ) throws {
        precondition(strips[0].rowsDone == 0 && strips[0].filled == 0, "PyramidReducer: a pipelined pass starts from the top")
        let height = strips[0].size.height, tile = geometry.tileSize, stride = strips[0].stride
        if spare == nil { spare = PixelStorage(uninitializedByteCount: strips[0].storage.count) }
        var fed = min(tile, height)
        try decode(strips[0].storage.base, stride, fed)
        var ready = fed
        while ready > 0 {
            let next = min(tile, height - fed)
            let target = spare!
            let failure = Lock<(any Error)?>(nil)
            let rows = ready
            forkJoin.forEach(next > 0 ? 2 : 1) { [self] part in
                do {
                    if part == 1 {
                        try decode(target.base, stride, next)
                    } else {
                        try consume(rows)
                    }
                } catch {
                    failure.withLock { if $0 == nil { $0 = error } }
                }
            }
            if let error = failure.withLock({ $0 }) { throw error }
            // The decoded strip becomes level 0's; its old buffer is the next spare.
            spare = strips[0].storage
            strips[0].storage = target
            fed += next
            ready = next
        }
    }

    /// Level 0's strip holds `rows` new rows (its buffer was written outside): reduce and emit.
    private func consume(_ rows: Int) throws {
        strips[0].filled += rows
        strips[0].rowsDone += rows
        try advance(0)
    }

    /// Copies `rows` rows of BGRA pixels (`stride` bytes apart, the image's width each) as the
    /// next rows of the image.
    package func write(rows: Int, from base: UnsafeRawPointer, stride: Int) throws {
        var done = 0
        let rowBytes = strips[0].size.width * 4
        while done < rows {
            var copied = 0
            try write { (destination, destinationStride, capacity) -> Int in
                copied = min(capacity, rows - done)
                for y in 0..<copied {
                    (destination + y * destinationStride).copyMemory(from: base + (done + y) * stride, byteCount: rowBytes)
                }
                return copied
            }
            done += copied
        }
    }

    /// Reduces the finished pairs of `level`'s strip into the next level, and emits the strip's
    /// tiles when it is full or the level is done. (Here and below, `level` indexes `strips`:
    /// pyramid level `levels.lowerBound + level`.)
    private func advance(_ level: Int) throws {
        let last = level + 1 == strips.count
        if !last {
            while strips[level].reduced + 2 <= strips[level].filled {
                let r = strips[level].reduced
                strips[level].reduced += 2
                try reduce(level, r, r + 1)
            }
        }
        let s = strips[level]
        let levelDone = s.rowsDone == s.size.height
        guard s.filled == geometry.tileSize || (levelDone && s.filled > 0) else { return }
        if !last, s.reduced < s.filled {  // the level's lone last row
            strips[level].reduced += 1
            try reduce(level, s.filled - 1, s.filled - 1)
        }
        try emitTiles(level)
        strips[level].filled = 0
        strips[level].reduced = 0
        strips[level].tileRow += 1
    }

    /// One row of `level + 1` from rows `a` and `b` of `level`'s strip.
    private func reduce(_ level: Int, _ a: Int, _ b: Int) throws {
        let above = strips[level], below = strips[level + 1]
        strata_reduce_2x2(
            (above.storage.base + a * above.stride).assumingMemoryBound(to: UInt8.self),
            (above.storage.base + b * above.stride).assumingMemoryBound(to: UInt8.self), above.size.width,
            (below.storage.base + below.filled * below.stride).assumingMemoryBound(to: UInt8.self))
        strips[level + 1].filled += 1
        strips[level + 1].rowsDone += 1
        try advance(level + 1)
    }

    private func emitTiles(_ level: Int) throws {
        let s = strips[level], tile = geometry.tileSize, pyramidLevel = levels.lowerBound + level
        for column in 0..<geometry.grid(pyramidLevel).columns {
            let x = column * tile
            let view = PixelImage(
                width: min(tile, s.size.width - x), height: s.filled, bytesPerRow: s.stride, style: .bgra32Premultiplied,
                storage: s.storage, offset: x * 4)
            try emit(TileAddress(level: pyramidLevel, column: column, row: s.tileRow), view)
        }
    }
}
