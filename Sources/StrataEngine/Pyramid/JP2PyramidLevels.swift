import StrataBase
import StrataCodecs

/// How a JPEG 2000 original's tile pyramid is made: in two streaming passes of region decodes
/// in bands, as a baseline JPEG's is, with the tiles viewers wait for decoded out of turn.
///
/// 1. **The coarse pass**: the file's own resolution level one finer than the pyramid's
///    ``coarse`` level (the coarsest of levels 2–3 still a screen long,
///    ``PyramidPass/coarseLevel(of:)``), decoded in bands on two threads (OpenJPEG's reduce
///    factor: only the wavelet's lower bands are read), moved by the fraction of a pixel its
///    samples are off a box pyramid's (``lowBandShift(reduce:)``) and halved, is that level and
///    every coarser one: a viewer's first screen. The file's level of the same index would be four
///    times less to decode, but it is its wavelet's low band, not a 2 × 2 mean, and drifts from
///    a reduction of the full size far more than the level above it halved does
///    (docs/Benchmarks.md). When that finer level is the full size, there is one pass.
/// 2. **The full pass**: the full size in bands of whole rows (`JP2Codec.decodeRegion`), each
///    of the file's tiles decoded once a band, reduced into the finer levels as any streaming
///    pass reduces them. Between two bands, the tiles of those levels that requests wait for
///    are made first, each from a region decode of the full size halved as the pass halves
///    (``OwnLevelTiles``): the same pixels as the pass would make, an exact box pyramid.
///
/// Measured against the alternative of reading every tile from the file's own level of it
/// (docs/Benchmarks.md): the file's reduced levels are its wavelet's low bands, not 2 × 2
/// means, and drift from a true reduction level after level, and a region decode per tile
/// costs 25–160 ms where a band costs a full decode's share once.
///
/// Taken when the file's image area starts at the reference grid's origin (what writers
/// make). Memory: one band (``bandPixels`` and OpenJPEG's buffers for it) and two regions.
package struct JP2PyramidLevels: Sendable, Hashable {
    /// The coarsest pyramid level the full pass makes (the coarse pass decodes the file's level
    /// one finer and emits this level and the coarser ones), or `nil`: one pass, at full size.
    package let coarse: Int?

    /// Pixels of one band (whole rows, a multiple of 64 of them, at least 64).
    package static let bandPixels = 4 << 20

    /// The feed for `geometry` from the file's `features`, or `nil` when they do not fit it.
    package init?(features: JP2Codec.Features, geometry: PyramidGeometry) {
        guard features.size == geometry.size, features.origin == PixelSize(width: 0, height: 0) else { return nil }
        coarse = Self.coarseLevel(of: geometry, origin: features.origin, resolutions: features.resolutions)
    }

    /// The level the coarse pass starts at for a file of `resolutions` levels whose image area
    /// starts at `origin`: the first screen's (``PyramidPass/coarseLevel(of:)``) when it is
    /// level 2 or 3 and the file's level above it is the pyramid's; else `nil`, one pass.
    package static func coarseLevel(of geometry: PyramidGeometry, origin: PixelSize, resolutions: Int) -> Int? {
        PyramidPass.coarseLevel(of: geometry).flatMap { level in
            level >= 2 && level - 1 < resolutions
                && JP2Codec.reducedSize(geometry.size, origin: origin, reduce: level - 1) == geometry.levels[level - 1] ? level : nil
        }
    }

    /// A feed whose coarse pass starts at `coarse` (at least 2), whatever the screen: tests.
    package init(coarse: Int?) {
        precondition(coarse.map { $0 >= 2 } ?? true, "JP2PyramidLevels: the coarse pass reads a level above the full size")
        self.coarse = coarse
    }

    /// Rows of a band of a level `width` wide.
    package static func bandRows(width: Int) -> Int { max(64, min(1024, bandPixels / max(1, width) / 64 * 64)) }

    /// The most bytes the pass holds besides the reducer's strips: a band, OpenJPEG's 32-bit
    /// samples for it (four components, and a quarter more), and two regions of the out-of-turn
    /// tiles with OpenJPEG's buffers for one.
    package func workingBytes(geometry: PyramidGeometry) -> Int {
        let band = geometry.size.width * Self.bandRows(width: geometry.size.width)
        let regions = direct(geometry).regionBytes(geometry)
        return band * 4 + band * 20 + 2 * regions + regions * 5
    }

    /// The levels the full pass makes, each read from the full size (the out-of-turn tiles).
    private func direct(_ geometry: PyramidGeometry) -> OwnLevelTiles {
        OwnLevelTiles(sources: (0..<(coarse ?? geometry.levels.count)).map { _ in OwnLevelTiles.Source(level: 0, size: geometry.size) })
    }

    /// Makes every tile of `geometry` and hands each to `emit` (a view valid during the call);
    /// a tile may be handed over twice (out of turn, then by the pass).
    package func run(
        _ bytes: UnsafeRawBufferPointer, geometry: PyramidGeometry, waiting: () -> [TileAddress],
        emit: @escaping (TileAddress, PixelImage) throws -> Void
    ) throws {
        let all = geometry.levels.count
        if let coarse {
            // The finer level's own tiles are left to the full pass: they are its low band.
            let halved = PyramidReducer(geometry: geometry, levels: (coarse - 1)..<all) { tile, image in
                if tile.level >= coarse { try emit(tile, image) }
            }
            try alignedBands(bytes, reduce: coarse - 1, geometry: geometry, into: halved)
        }
        let fine = coarse ?? all
        let tiles = direct(geometry)
        let regionBytes = tiles.regionBytes(geometry)
        // The out-of-turn tiles' regions, allocated when a request first waits.
        var regions: (PixelStorage, PixelStorage)?
        var made = Set<TileAddress>()
        let read: OwnLevelTiles.Read = { _, x, y, size, out in
            try JP2Codec.decodeRegion(
                bytes, reduce: 0, x: x, y: y, size: size, into: UnsafeMutableRawPointer(out), stride: size.width * 4)
        }
        try bands(bytes, reduce: 0, geometry: geometry, into: PyramidReducer(geometry: geometry, levels: 0..<fine, emit: emit)) {
            for tile in waiting() where tile.level < fine && geometry.contains(tile) && !made.contains(tile) {
                made.insert(tile)
                if regions == nil {
                    regions = (PixelStorage(uninitializedByteCount: regionBytes), PixelStorage(uninitializedByteCount: regionBytes))
                }
                try emit(tile, try tiles.make(tile, geometry: geometry, read: read, region: regions!.0, scratch: regions!.1))
            }
        }
    }

    /// Where the file's level `reduce` is sampled, in that level's pixels, against the same
    /// level of a box pyramid: the wavelet's low band keeps the even samples, so its sample `k`
    /// sits at full-size pixel `2ʳk` where the box mean of `2ʳ × 2ʳ` pixels sits at
    /// `2ʳk + (2ʳ − 1) / 2` (3/8 of a pixel at `r` = 2, in both directions).
    package static func lowBandShift(reduce: Int) -> Double { Double((1 << reduce) - 1) / Double(1 << (reduce + 1)) }

    /// The file's level `reduce` decoded in bands on two threads (a viewer waits for them), each
    /// moved by ``lowBandShift(reduce:)`` so that its pixels sit where the box pyramid's do,
    /// into `reducer`. The move is a linear interpolation (a band decoded with a row of the
    /// next on each side): on a detailed photo it came closer to the box reduction of the full
    /// size than Lanczos-3 or a cubic, and as close as a least-squares fit of a 6-tap filter
    /// (docs/Benchmarks.md); unshifted, the halvings drift from it by several dB.
    private func alignedBands(_ bytes: UnsafeRawBufferPointer, reduce: Int, geometry: PyramidGeometry, into reducer: PyramidReducer) throws
    {
        let size = geometry.levels[reduce]
        let rows = Self.bandRows(width: size.width), margin = 1
        let shift = Self.lowBandShift(reduce: reduce)
        let resampler = Resampler(filter: .bilinear)
        var y = 0
        while y < size.height {
            let count = min(rows, size.height - y)
            let top = max(0, y - margin), bottom = min(size.height, y + count + margin)
            var band = PixelImage(width: size.width, height: bottom - top)
            let stride = band.bytesPerRow
            try band.withUnsafeMutableBytes { raw in
                try JP2Codec.decodeRegion(
                    bytes, reduce: reduce, x: 0, y: top, size: PixelSize(width: size.width, height: bottom - top),
                    into: raw.baseAddress!, stride: stride, threads: 2)
            }
            // Taps past the level's edges are dropped (the resampler renormalises the rest).
            let aligned = resampler.resample(
                band, region: SourceRect(x: shift, y: Double(y - top) + shift, width: Double(size.width), height: Double(count)),
                to: PixelSize(width: size.width, height: count))
            try aligned.withUnsafeBytes { try reducer.write(rows: count, from: $0.baseAddress!, stride: aligned.bytesPerRow) }
            y += count
        }
    }

    /// The file's level `reduce` (the pyramid's level of the same index), decoded in bands of
    /// whole rows into `reducer` on the codec's threads for a band's pixels; `between` runs
    /// before each band.
    private func bands(
        _ bytes: UnsafeRawBufferPointer, reduce: Int, geometry: PyramidGeometry, into reducer: PyramidReducer,
        between: () throws -> Void = {}
    ) throws {
        let size = geometry.levels[reduce]
        let rows = Self.bandRows(width: size.width)
        let band = PixelStorage(uninitializedByteCount: size.width * rows * 4)
        var y = 0
        while y < size.height {
            try between()
            let count = min(rows, size.height - y)
            try JP2Codec.decodeRegion(
                bytes, reduce: reduce, x: 0, y: y, size: PixelSize(width: size.width, height: count), into: band.base,
                stride: size.width * 4, threads: JP2Codec.threads(for: size.width * count))
            try reducer.write(rows: count, from: band.base, stride: size.width * 4)
            y += count
        }
    }
}
