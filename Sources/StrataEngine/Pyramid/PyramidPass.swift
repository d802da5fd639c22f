import StrataBase
import StrataCodecs
/// One streaming pass over an original into a ``PyramidReducer``: the decode that feeds the
/// pyramid's rows, chosen from the header so that memory stays bounded by bands, never by the
/// image.
///
/// - A JPEG (EXIF orientation 1, not CMYK or YCCK) is read in rows through libjpeg's scanline
///   API straight into the strips, in two passes when its level 1 is at least ``screenSide``
///   long: first straight at the scale of ``coarseLevel(of:)`` (1/2, 1/4 or 1/8: libjpeg's DCT
///   scaling, each pixel the mean of a 2ⁿ × 2ⁿ block, as n 2 × 2 reductions would make it,
///   without the full inverse DCT) for that level and the coarser ones — a viewer's first
///   screen — then at full size for the finer ones.
///   A *progressive* JPEG makes libjpeg hold the whole image's coefficients (3–6 bytes a
///   pixel) while it decodes, so it is taken only up to `wholeDecodePixels`, like a whole
///   decode.
/// - A pyramidal TIFF (orientation 1; its own reduced images, as pages or SubIFDs, cover every
///   level: ``TIFFPyramidLevels``) gives each tile from its own image of the tile's level, read
///   as a region, the tiles a viewer waits for first: nothing is reduced from the full size.
/// - A JPEG 2000 file is read in bands of region decodes, in two passes as a JPEG (its own
///   reduced level one finer than the coarse level, halved, for the coarse one), the tiles a
///   viewer waits for decoded out of turn
///   (``JP2PyramidLevels``).
/// - Another TIFF (orientation 1) is read in bands of whole strips or tiles through libtiff.
/// - A PNG (not interlaced, orientation 1) is read in rows through libpng's row API
///   (`PNGRowReader`).
/// - A still WebP (orientation 1) is read in rows through libwebp's incremental decoder
///   (`WebPRowReader`). Only a lossy one without alpha is bounded by the bands: libwebp holds
///   the alpha plane or a lossless image whole, so those are taken up to `wholeDecodePixels`.
/// - Anything else (an interlaced PNG, an animated WebP, AVIF, HEIF, GIF, other orientations,
///   CMYK) is decoded whole, up to `wholeDecodePixels`, and fed in rows.
///
/// Colour is not touched here: the pass hands over the decoded pixels, and the caller converts
/// each tile (as the renderer converts after its resample).
package enum PyramidPass {
    /// The side of a viewer's first screen: the home view of a whole image, which a JPEG's
    /// coarse pass makes first.
    package static let screenSide = 1024

    /// The first level a JPEG's coarse pass makes: the coarsest of levels 1–3 (libjpeg scales
    /// by 1/8 at most) whose long side is still at least ``screenSide``, so that a viewer's
    /// home view needs no tile of the full pass; `nil` when level 1 is shorter (one pass).
    package static func coarseLevel(of geometry: PyramidGeometry) -> Int? {
        (1...3).reversed().first { level in
            level < geometry.levels.count && max(geometry.levels[level].width, geometry.levels[level].height) >= screenSide
        }
    }

    /// How the original's rows are produced.
    package enum Feed: Sendable, Hashable {
        case jpegRows, tiffBands, pngRows, webpRows, wholeDecode
        case tiffLevels(TIFFPyramidLevels)
        case jp2Levels(JP2PyramidLevels)
    }

    /// The feed for an original with `header` cut into `geometry`, or the reason it cannot be
    /// made into a pyramid (too many pixels for the feed it needs).
    package static func feed(
        for header: ImageHeader, bytes: UnsafeRawBufferPointer, geometry: PyramidGeometry, maxSourcePixels: Int,
        wholeDecodePixels: Int
    ) throws(ImageDecodingError) -> Feed {
        let pixels = header.codedSize.pixelCount
        if pixels > maxSourcePixels {
            throw ImageDecodingError(.tooLarge(pixels: pixels, limit: maxSourcePixels), format: header.format)
        }
        let feed: Feed
        switch header.format {
        case .jpeg where header.orientation == 1 && !header.isCMYK && !Metadata.jpegMarkers(bytes).isProgressive:
            feed = .jpegRows
        case .png where header.orientation == 1 && !isInterlacedPNG(bytes):
            feed = .pngRows
        case .webp where header.orientation == 1 && !header.isAnimated:
            feed = .webpRows
        case .tiff where header.orientation == 1:
            feed = TIFFPyramidLevels(images: try TIFFCodec.levels(bytes), geometry: geometry).map { .tiffLevels($0) } ?? .tiffBands
        case .jp2:
            feed = JP2PyramidLevels(features: try JP2Codec.features(bytes), geometry: geometry).map { .jp2Levels($0) } ?? .wholeDecode
        default:
            feed = .wholeDecode
        }
        guard pixels > wholeDecodePixels else { return feed }
        let why: String
        switch feed {
        case .wholeDecode where header.format == .jp2:
            why =
                "a JPEG 2000 file whose image area is off its reference grid's origin (re-encode it, e.g. with opj_compress)"
        case .wholeDecode:
            why =
                header.format == .jpeg && header.orientation == 1 && !header.isCMYK
                ? "a progressive JPEG" : "a \(header.format) image that is not read in bands"
        case .webpRows where !WebPRowReader.isBoundedByBands(bytes):
            why = "a lossless or transparent WebP (libwebp holds it whole while it decodes)"
        default:
            return feed
        }
        throw ImageDecodingError(
            .unsupported(
                "\(why) of \(pixels) pixels is decoded whole, and that is limited to \(wholeDecodePixels) pixels; "
                    + "convert it to a baseline JPEG or a tiled TIFF"),
            format: header.format)
    }

    /// Hands a codec's row reader to the two threads of a pipelined pass, which never use it at
    /// once (``PyramidReducer/pipelined(forkJoin:decode:)`` joins them first).
    private struct HandedOver<Reader>: @unchecked Sendable {
        let reader: Reader
    }

    /// Makes every tile of the original (`bytes`, whose header is `header`) of `geometry` (the
    /// original's size) and hands each to `emit` (on one thread at a time); a JPEG's rows are
    /// decoded on this thread while a helper from `forkJoin` reduces the strip before. A feed
    /// that can make tiles in any order (a pyramidal TIFF's) makes those `waiting()` names
    /// first. A JPEG's passes, a PNG's and a striped or tiled TIFF's call `release` with the
    /// ranges of `bytes` they will not read again for a while (behind the decode, a TIFF band's
    /// strips or tiles, and all of a JPEG between its two passes), so that a mapped file's
    /// pages can leave memory. Throws the decode's
    /// ``ImageDecodingError`` or what `emit` threw.
    package static func run(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, feed: Feed, wholeDecodePixels: Int, forkJoin: ForkJoin,
        geometry: PyramidGeometry, waiting: () -> [TileAddress] = { [] }, release: @escaping @Sendable (Range<Int>) -> Void = { _ in },
        emit: @escaping (TileAddress, PixelImage) throws -> Void
    ) throws {
        precondition(geometry.size == header.size, "PyramidPass: the pyramid is for another size")
        let all = geometry.levels.indices
        switch feed {
        case .jpegRows:
            if let coarse = coarseLevel(of: geometry), JPEGScalingFactor(1, 1 << coarse).scaled(header.codedSize) == geometry.levels[coarse]
            {
                try jpegRows(
                    bytes, factor: JPEGScalingFactor(1, 1 << coarse),
                    into: PyramidReducer(geometry: geometry, levels: coarse..<all.count, emit: emit), forkJoin: forkJoin,
                    release: release)
                // The full pass reads from the start again, at its own pace.
                release(0..<bytes.count)
                try jpegRows(
                    bytes, factor: .one, into: PyramidReducer(geometry: geometry, levels: 0..<coarse, emit: emit), forkJoin: forkJoin,
                    release: release)
            } else {
                try jpegRows(
                    bytes, factor: .one, into: PyramidReducer(geometry: geometry, emit: emit), forkJoin: forkJoin, release: release)
            }
        case .tiffLevels(let levels):
            try levels.run(bytes, geometry: geometry, waiting: waiting, emit: emit)
        case .jp2Levels(let levels):
            try levels.run(bytes, geometry: geometry, waiting: waiting, emit: emit)
        case .pngRows:
            let png = try PNGRowReader(bytes)
            guard png.size == geometry.size else {
                throw ImageDecodingError(.corrupt("libpng reads \(png.size), the header says \(geometry.size)"), format: .png)
            }
            // libpng's state passes between the two threads, never used by both at once.
            let handed = HandedOver(reader: png)
            let releaseBehind = releasing(release)
            try pipelined(PyramidReducer(geometry: geometry, emit: emit), forkJoin: forkJoin) {
                let count = try handed.reader.read(into: $0, stride: $1, count: $2)
                releaseBehind(handed.reader.consumedBytes)
                return count
            }
        case .webpRows:
            let webp = try WebPRowReader(bytes)
            guard webp.size == geometry.size else {
                throw ImageDecodingError(.corrupt("libwebp reads \(webp.size), the header says \(geometry.size)"), format: .webp)
            }
            let handed = HandedOver(reader: webp)
            try pipelined(PyramidReducer(geometry: geometry, emit: emit), forkJoin: forkJoin) {
                try handed.reader.read(into: $0, stride: $1, count: $2)
            }
        case .tiffBands:
            let reducer = PyramidReducer(geometry: geometry, emit: emit)
            // The band reader's errors are decoding errors; what `emit` throws is kept aside.
            var stopped: (any Error)?
            do {
                try TIFFCodec.decodeBands(bytes, size: header.codedSize, consumed: release) { (band, _, rows) throws(ImageDecodingError) in
                    do {
                        try reducer.write(rows: rows, from: band, stride: header.codedSize.width * 4)
                    } catch {
                        stopped = error
                        throw ImageDecodingError(.unsupported("the pyramid stopped the pass"), format: .tiff)
                    }
                }
            } catch {
                throw stopped ?? error
            }
        case .wholeDecode:
            let reducer = PyramidReducer(geometry: geometry, emit: emit)
            let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: wholeDecodePixels))
            let image = try decoder.decode(bytes, minimumSize: nil)
            try image.withUnsafeBytes { raw in
                try reducer.write(rows: image.height, from: raw.baseAddress!, stride: image.bytesPerRow)
            }
        }
    }
}

extension PyramidPass {
    /// The parts of each round of a 1/8-scale read (``JPEGEighthReader``): one a core.
    package static let eighthParts = min(Processors.online, 16)

    /// One scanline decode of a JPEG at `factor` into `reducer` (whose input is that scale's
    /// level), pipelined: a strip decoded on this thread beside the reduction of the last. At
    /// 1/8 a file ``JPEGEighthReader`` takes is read by it instead, on every core.
    /// The data behind the decoder's position is handed to `release` as it goes.
    fileprivate static func jpegRows(
        _ bytes: UnsafeRawBufferPointer, factor: JPEGScalingFactor, into reducer: PyramidReducer, forkJoin: ForkJoin,
        release: @escaping @Sendable (Range<Int>) -> Void
    ) throws {
        let releaseBehind = releasing(release)
        if factor == JPEGScalingFactor(1, 8), let eighth = try JPEGEighthReader(bytes) {
            guard eighth.size == reducer.inputSize else {
                throw ImageDecodingError(
                    .corrupt("the image decodes to \(eighth.size), not the \(reducer.inputSize) its header gave"), format: .jpeg)
            }
            try eighth.read(parts: eighthParts, forkJoin: forkJoin) { rows, stride, count in
                try reducer.write(rows: count, from: rows, stride: stride)
                releaseBehind(eighth.consumedBytes)
            }
            return
        }
        let jpeg = JPEGRowDecompressor()
        guard let size = try jpeg.start(bytes, factor: factor) else {
            throw ImageDecodingError(.unsupported("a CMYK JPEG is not read in rows"), format: .jpeg)
        }
        guard size == reducer.inputSize else {
            jpeg.abort()
            throw ImageDecodingError(.corrupt("the image decodes to \(size), not the \(reducer.inputSize) its header gave"), format: .jpeg)
        }
        // libjpeg's state passes between the two threads, never used by both at once.
        let handed = HandedOver(reader: jpeg)
        do {
            try pipelined(reducer, forkJoin: forkJoin) {
                let count = try handed.reader.read(into: $0, stride: $1, count: $2)
                releaseBehind(handed.reader.consumedBytes)
                return count
            }
        } catch {
            jpeg.abort()
            throw error
        }
        try jpeg.finish()
    }
}

extension PyramidPass {
    /// A reader's position handed to `release` as the data behind it, each byte once: called
    /// with the position after each strip (the decode's thread may change between strips).
    fileprivate static func releasing(_ release: @escaping @Sendable (Range<Int>) -> Void) -> @Sendable (Int) -> Void {
        let released = Lock(0)
        return { consumed in
            let from = released.withLock { done in
                defer { done = max(done, consumed) }
                return done
            }
            if consumed > from { release(from..<consumed) }
        }
    }

    /// `reducer`'s pipelined run over a row reader: `read(rows, stride, count)` writes up to
    /// `count` rows and returns how many, and is called until the strip is full.
    fileprivate static func pipelined(
        _ reducer: PyramidReducer, forkJoin: ForkJoin,
        read: @escaping @Sendable (UnsafeMutableRawPointer, _ stride: Int, _ count: Int) throws -> Int
    ) throws {
        try reducer.pipelined(forkJoin: forkJoin) { rows, stride, count in
            var done = 0
            while done < count { done += try read(rows + done * stride, stride, count - done) }
        }
    }
}

extension PyramidPass {
    /// Whether a PNG's `IHDR` (its first chunk, as libpng requires) says Adam7.
    package static func isInterlacedPNG(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count > 28 && bytes[28] != 0
    }
}
