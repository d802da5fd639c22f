import CStrataSIMD
import StrataBase
import StrataCodecs

/// The tiles of a pyramid read from an original's own reduced images — a pyramidal TIFF's
/// pages (``TIFFPyramidLevels``), a JPEG 2000 file's resolution levels (``JP2PyramidLevels``) —
/// each read as a region of the image of its level, or of the nearest finer one and halved
/// (as the streaming pass reduces), so that no level is computed from the full resolution.
/// Tiles are made coarse to fine, those a viewer waits for first.
///
/// Memory: two regions of the largest a level reads (a tile's side × 2^gap, within its image).
/// Cost: one region read per tile.
package struct OwnLevelTiles: Sendable, Hashable {
    /// The original's image a pyramid level is read from: that image's pyramid level (at most
    /// the tile's) and its size (a writer may round a pixel short of the level's).
    package struct Source: Sendable, Hashable {
        package var level: Int
        package var size: PixelSize

        package init(level: Int, size: PixelSize) {
            self.level = level
            self.size = size
        }
    }

    /// One per pyramid level.
    package let sources: [Source]

    package init(sources: [Source]) {
        self.sources = sources
    }

    /// The most bytes one region of `geometry`'s tiles takes.
    package func regionBytes(_ geometry: PyramidGeometry) -> Int {
        sources.indices.map { level in
            let source = sources[level], side = geometry.tileSize << (level - source.level)
            let image = geometry.levels[source.level]
            return min(side, image.width) * min(side, image.height) * 4
        }.max() ?? 0
    }

    /// Reads `size` pixels at (`x`, `y`) of the image of pyramid level `level`'s source into
    /// `out`, premultiplied BGRA rows of `size.width` pixels.
    package typealias Read = (_ level: Int, _ x: Int, _ y: Int, _ size: PixelSize, _ out: UnsafeMutablePointer<UInt32>) throws -> Void

    /// Makes every tile of `geometry`, coarse to fine, the tiles `waiting()` names first (a
    /// viewer's requests during the build), and hands each to `emit` (a view valid during the
    /// call).
    package func run(
        geometry: PyramidGeometry, waiting: () -> [TileAddress], read: Read, emit: (TileAddress, PixelImage) throws -> Void
    ) throws {
        let bytes = regionBytes(geometry)
        let region = PixelStorage(uninitializedByteCount: bytes)
        let scratch = PixelStorage(uninitializedByteCount: bytes)
        var done = geometry.levels.indices.map { level in
            let grid = geometry.grid(level)
            return [Bool](repeating: false, count: grid.columns * grid.rows)
        }
        var order = geometry.levels.indices.reversed().lazy.flatMap { level in
            let grid = geometry.grid(level)
            return (0..<grid.rows).lazy.flatMap { row in
                (0..<grid.columns).lazy.map { TileAddress(level: level, column: $0, row: row) }
            }
        }.makeIterator()
        func index(_ tile: TileAddress) -> Int { tile.row * geometry.grid(tile.level).columns + tile.column }
        while true {
            var next = waiting().first { geometry.contains($0) && !done[$0.level][index($0)] }
            while next == nil, let candidate = order.next() {
                if !done[candidate.level][index(candidate)] { next = candidate }
            }
            guard let tile = next else { return }
            done[tile.level][index(tile)] = true
            let image = try make(tile, geometry: geometry, read: read, region: region, scratch: scratch)
            try emit(tile, image)
        }
    }

    /// `tile` read from its level's image into `region` (`scratch` for the reductions, both
    /// ``regionBytes(_:)`` long): a view of one of the two, valid until they are reused.
    package func make(
        _ tile: TileAddress, geometry: PyramidGeometry, read: Read, region: PixelStorage, scratch: PixelStorage
    ) throws -> PixelImage {
        let source = sources[tile.level], page = source.size
        let gap = tile.level - source.level, scale = 1 << gap
        let rect = geometry.rect(of: tile), levelSize = geometry.levels[source.level]
        // The tile's pixels in the source level, then in its image, which may be a pixel short
        // of the level at the right and bottom (the writer rounded down): those repeat its last.
        let x = rect.x * scale, y = rect.y * scale
        let width = min(rect.size.width * scale, levelSize.width - x), height = min(rect.size.height * scale, levelSize.height - y)
        let x0 = min(x, page.width - 1), y0 = min(y, page.height - 1)
        let size = PixelSize(width: min(x + width, page.width) - x0, height: min(y + height, page.height) - y0)
        let stride = width * 4
        try read(tile.level, x0, y0, size, scratch.base.assumingMemoryBound(to: UInt32.self))
        let from = scratch.base.assumingMemoryBound(to: UInt32.self), to = region.base.assumingMemoryBound(to: UInt32.self)
        for row in 0..<height {
            let sourceRow = from + min(y + row - y0, size.height - 1) * size.width
            let target = to + row * width
            for column in 0..<width { target[column] = sourceRow[min(x + column - x0, size.width - 1)] }
        }
        // Halved `gap` times, as the streaming pass reduces (a lone last row or column is
        // averaged with itself).
        var current = PixelSize(width: width, height: height), from2 = region, other = scratch
        for _ in 0..<gap {
            let half = PixelSize(width: (current.width + 1) / 2, height: (current.height + 1) / 2)
            for row in 0..<half.height {
                let a = from2.base + 2 * row * stride, b = from2.base + min(2 * row + 1, current.height - 1) * stride
                strata_reduce_2x2(
                    a.assumingMemoryBound(to: UInt8.self), b.assumingMemoryBound(to: UInt8.self), current.width,
                    (other.base + row * stride).assumingMemoryBound(to: UInt8.self))
            }
            current = half
            swap(&from2, &other)
        }
        precondition(current == rect.size, "OwnLevelTiles: a tile of \(current), not \(rect.size)")
        return PixelImage(
            width: current.width, height: current.height, bytesPerRow: stride, style: .bgra32Premultiplied, storage: from2, offset: 0)
    }
}
