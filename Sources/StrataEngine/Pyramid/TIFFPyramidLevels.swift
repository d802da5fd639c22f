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
    /// (a view valid during the call): ``OwnLevelTiles`` over libtiff's region reads.
    package func run(
        _ bytes: UnsafeRawBufferPointer, geometry: PyramidGeometry, waiting: () -> [TileAddress],
        emit: (TileAddress, PixelImage) throws -> Void
    ) throws {
        let reader = try TIFFCodec.RegionReader(bytes)
        let tiles = OwnLevelTiles(sources: sources.map { OwnLevelTiles.Source(level: $0.level, size: $0.image.size) })
        try tiles.run(
            geometry: geometry, waiting: waiting,
            read: { level, x, y, size, out in
                try reader.read(sources[level].image, x: x, y: y, size: size, into: out)
            }, emit: emit)
    }
}
