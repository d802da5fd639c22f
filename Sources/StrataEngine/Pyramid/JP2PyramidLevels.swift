import StrataBase
import StrataCodecs

/// A JPEG 2000 original's own resolution levels as the levels of its tile pyramid: each tile
/// is a region decode (OpenJPEG reads only the code-blocks, and the tiles of a tiled file,
/// that it touches) of one of the file's levels, halved as the pyramid halves. So a viewer's
/// tiles come first and each costs its own region, with no pass over the full resolution
/// before them; memory is two regions.
///
/// Level 0 is the file's full size; level *n* ≥ 1 is the file's level *n* − 1 halved (2 × 2
/// means, as the streaming pass reduces), and past the file's coarsest, that one halved as
/// often as needed. A file's own reduced level is the wavelet's low band, sampled at the
/// top-left of each 2ⁿ block: served as it is, it drifts from a true reduction (against a
/// Lanczos-3 reduction of the full decode, tiles of a detailed photo at 21 dB at level 1 and
/// 26 at level 3, where the box pyramid's are 29 and 35), while one level finer, halved, stays
/// with the box pyramid (level 1 is the box pyramid's own), for four times the region's decode.
///
/// Taken when the file's image area starts at the reference grid's origin (what writers make)
/// and its coarsest level is at most ``maximumSide`` pixels a side (the coarse pyramid levels
/// are read from it whole, then halved): `opj_compress`'s default of 6 resolutions does for up
/// to about 130 megapixels at 512-pixel tiles; more levels (`-n`) for bigger images.
package struct JP2PyramidLevels: Sendable, Hashable {
    /// The largest side of the file's image that a coarse pyramid level is halved from.
    package static let maximumSide = 4096

    package let tiles: OwnLevelTiles

    /// The levels of `geometry` from the file's `features`, or `nil` when they cannot feed it.
    package init?(features: JP2Codec.Features, geometry: PyramidGeometry) {
        guard features.size == geometry.size, features.origin == PixelSize(width: 0, height: 0), features.resolutions >= 1 else {
            return nil
        }
        let coarsest = features.resolutions - 1
        var sources: [OwnLevelTiles.Source] = []
        for n in geometry.levels.indices {
            let level = min(max(0, n - 1), coarsest)
            let size = JP2Codec.reducedSize(features.size, origin: features.origin, reduce: level)
            // Each of the file's levels is the pyramid's of the same index (both halve rounding up).
            guard size == geometry.levels[level] else { return nil }
            if n > level, max(size.width, size.height) > Self.maximumSide { return nil }
            sources.append(OwnLevelTiles.Source(level: level, size: size))
        }
        tiles = OwnLevelTiles(sources: sources)
    }

    /// Threads of one region's decode: OpenJPEG shares a region's code-blocks out.
    package static let threads = min(2, Processors.online)

    /// Makes every tile of `geometry`, coarse to fine, those `waiting()` names first, and hands
    /// each to `emit` (a view valid during the call).
    package func run(
        _ bytes: UnsafeRawBufferPointer, geometry: PyramidGeometry, waiting: () -> [TileAddress],
        emit: (TileAddress, PixelImage) throws -> Void
    ) throws {
        try tiles.run(
            geometry: geometry, waiting: waiting,
            read: { level, x, y, size, out in
                try JP2Codec.decodeRegion(
                    bytes, reduce: tiles.sources[level].level, x: x, y: y, size: size, into: UnsafeMutableRawPointer(out),
                    stride: size.width * 4, threads: size.pixelCount >= 1 << 18 ? Self.threads : 1)
            }, emit: emit)
    }
}
