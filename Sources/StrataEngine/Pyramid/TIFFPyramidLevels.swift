import CStrataSIMD
import StrataBase
import StrataCodecs

/// A pyramidal TIFF's own images as the levels of a tile pyramid: each level is read from the
/// TIFF's image of that size, or from the nearest finer one (at most ``maximumGap`` levels
/// finer) and box-reduced, so no level is computed from the full resolution. What
/// `vips tiffsave --pyramid` (one page per level), `--subifd` and scanners write.
///
/// An image counts as pyramid level *n* when its sides are within a pixel of the original's
/// divided by 2ⁿ (writers round either way); only images decoded in blocks (tiles, or strips
/// of their whole width) of at most four tiles a side are used, since a region's read decodes
/// every block it touches whole. A file whose images
/// do not cover every level within the gap is not pyramidal: it goes through the streaming
/// pass of its first image.
package struct TIFFPyramidLevels: Sendable, Hashable {
    /// The most levels a tile may be reduced by (a region of `tileSize` × 2^gap squared is read).
    package static let maximumGap = 2

    /// For each pyramid level, the TIFF image it is read from and that image's pyramid level.
    package let sources: [Source]

    package struct Source: Sendable, Hashable {
        package var image: TIFFCodec.Level
        package var level: Int
    }

    /// The levels of `geometry` from the file's `images` (``TIFFCodec/levels(_:)``), or `nil`
    /// when they are not a pyramid of it.
    package init?(images: [TIFFCodec.Level], geometry: PyramidGeometry) {
        guard let first = images.first, first.size == geometry.size else { return nil }
        var exact: [Int: TIFFCodec.Level] = [:]
        let largestBlock = 4 * geometry.tileSize
        for image in images where image.block.width <= largestBlock && image.block.height <= largestBlock {
            for n in geometry.levels.indices where exact[n] == nil && Self.matches(image.size, level: n, of: geometry.size) {
                exact[n] = image
            }
        }
        guard exact[0] != nil, exact.count > 1 else { return nil }
        var sources: [Source] = []
        for n in geometry.levels.indices {
            guard let m = (max(0, n - Self.maximumGap)...n).reversed().first(where: { exact[$0] != nil }) else { return nil }
            sources.append(Source(image: exact[m]!, level: m))
        }
        self.sources = sources
    }

    /// Whether an image of `size` is level `n` of an original of `original`: each side within
    /// one pixel of the original's divided by 2ⁿ (exact for level 0).
    package static func matches(_ size: PixelSize, level n: Int, of original: PixelSize) -> Bool {
        guard n > 0 else { return size == original }
        func close(_ side: Int, _ full: Int) -> Bool { side >= 1 && abs((side << n) - full) <= 1 << n }
        return close(size.width, original.width) && close(size.height, original.height)
    }

    /// Makes every tile of `geometry` from the file's images, coarse to fine, the tiles
    /// `waiting()` names first (a viewer's requests during the build), and hands each to `emit`
    /// (a view valid during the call). Memory: two regions of `tileSize` × 2^gap squared (the
    /// largest gap used).
    package func run(
        _ bytes: UnsafeRawBufferPointer, geometry: PyramidGeometry, waiting: () -> [TileAddress],
        emit: (TileAddress, PixelImage) throws -> Void
    ) throws {
        let reader = try TIFFCodec.RegionReader(bytes)
        let side = geometry.tileSize << (zip(sources, sources.indices).map { $1 - $0.level }.max() ?? 0)
        let region = PixelStorage(uninitializedByteCount: side * side * 4)
        let scratch = PixelStorage(uninitializedByteCount: side * side * 4)
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
            let image = try make(tile, geometry: geometry, reader: reader, region: region, scratch: scratch)
            try emit(tile, image)
        }
    }

    /// `tile` read from its level's image into `region` (`scratch` for the reductions): a view
    /// of one of the two.
    private func make(
        _ tile: TileAddress, geometry: PyramidGeometry, reader: TIFFCodec.RegionReader, region: PixelStorage, scratch: PixelStorage
    ) throws -> PixelImage {
        let source = sources[tile.level], page = source.image.size
        let gap = tile.level - source.level, scale = 1 << gap
        let rect = geometry.rect(of: tile), levelSize = geometry.levels[source.level]
        // The tile's pixels in the source level, then in its image, which may be a pixel short
        // of the level at the right and bottom (the writer rounded down): those repeat its last.
        let x = rect.x * scale, y = rect.y * scale
        let width = min(rect.size.width * scale, levelSize.width - x), height = min(rect.size.height * scale, levelSize.height - y)
        let x0 = min(x, page.width - 1), y0 = min(y, page.height - 1)
        let read = PixelSize(width: min(x + width, page.width) - x0, height: min(y + height, page.height) - y0)
        let stride = width * 4
        try reader.read(source.image, x: x0, y: y0, size: read, into: scratch.base.assumingMemoryBound(to: UInt32.self))
        let from = scratch.base.assumingMemoryBound(to: UInt32.self), to = region.base.assumingMemoryBound(to: UInt32.self)
        for row in 0..<height {
            let sourceRow = from + min(y + row - y0, read.height - 1) * read.width
            let target = to + row * width
            for column in 0..<width { target[column] = sourceRow[min(x + column - x0, read.width - 1)] }
        }
        // Halved `gap` times, as the streaming pass reduces (a lone last row or column is
        // averaged with itself).
        var size = PixelSize(width: width, height: height), current = region, other = scratch
        for _ in 0..<gap {
            let half = PixelSize(width: (size.width + 1) / 2, height: (size.height + 1) / 2)
            for row in 0..<half.height {
                let a = current.base + 2 * row * stride, b = current.base + min(2 * row + 1, size.height - 1) * stride
                strata_reduce_2x2(
                    a.assumingMemoryBound(to: UInt8.self), b.assumingMemoryBound(to: UInt8.self), size.width,
                    (other.base + row * stride).assumingMemoryBound(to: UInt8.self))
            }
            size = half
            swap(&current, &other)
        }
        precondition(size == rect.size, "TIFFPyramidLevels: a tile of \(size), not \(rect.size)")
        return PixelImage(
            width: size.width, height: size.height, bytesPerRow: stride, style: .bgra32Premultiplied, storage: current, offset: 0)
    }
}
