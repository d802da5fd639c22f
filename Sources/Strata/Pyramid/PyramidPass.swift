/// One streaming pass over an original into a ``PyramidReducer``: the decode that feeds the
/// pyramid's rows, chosen from the header so that memory stays bounded by bands, never by the
/// image.
///
/// - A JPEG (EXIF orientation 1, not CMYK or YCCK) is read in rows through libjpeg's scanline
///   API straight into level 0's strip. A *progressive* JPEG makes libjpeg hold the whole
///   image's coefficients (3–6 bytes a pixel) while it decodes, so it is taken only up to
///   `wholeDecodePixels`, like a whole decode.
/// - A TIFF (orientation 1) is read in bands of whole strips or tiles through libtiff.
/// - Anything else (PNG, WebP, AVIF, HEIF, GIF, other orientations, CMYK) is decoded whole,
///   up to `wholeDecodePixels`, and fed in rows.
///
/// Colour is not touched here: the pass hands over the decoded pixels, and the caller converts
/// each tile (as the renderer converts after its resample).
enum PyramidPass {
    /// How the original's rows are produced.
    enum Feed: Sendable, Hashable {
        case jpegRows, tiffBands, wholeDecode
    }

    /// The feed for an original with `header`, or the reason it cannot be made into a pyramid
    /// (too many pixels for the feed it needs).
    static func feed(
        for header: ImageHeader, bytes: UnsafeRawBufferPointer, maxSourcePixels: Int, wholeDecodePixels: Int
    ) throws(ImageDecodingError) -> Feed {
        let pixels = header.codedSize.pixelCount
        if pixels > maxSourcePixels {
            throw ImageDecodingError(.tooLarge(pixels: pixels, limit: maxSourcePixels), format: header.format)
        }
        let feed: Feed
        switch header.format {
        case .jpeg where header.orientation == 1 && !header.isCMYK && !Metadata.jpegMarkers(bytes).isProgressive:
            feed = .jpegRows
        case .tiff where header.orientation == 1:
            feed = .tiffBands
        default:
            feed = .wholeDecode
        }
        if feed == .wholeDecode || (header.format == .jpeg && feed != .jpegRows), pixels > wholeDecodePixels {
            let why =
                header.format == .jpeg && header.orientation == 1 && !header.isCMYK
                ? "a progressive JPEG" : "a \(header.format) image that is not read in bands"
            throw ImageDecodingError(
                .unsupported(
                    "\(why) of \(pixels) pixels is decoded whole, and that is limited to \(wholeDecodePixels) pixels; "
                        + "convert it to a baseline JPEG or a tiled TIFF"),
                format: header.format)
        }
        return feed
    }

    /// Feeds every row of the original (`bytes`, whose header is `header`) to `reducer`, whose
    /// geometry is the original's size. Throws the decode's ``ImageDecodingError`` or what the
    /// reducer's `emit` threw.
    static func run(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, feed: Feed, wholeDecodePixels: Int, into reducer: PyramidReducer
    ) throws {
        precondition(reducer.geometry.size == header.size, "PyramidPass: the reducer is for another size")
        switch feed {
        case .jpegRows:
            let jpeg = JPEGRowDecompressor()
            guard let size = try jpeg.start(bytes, factor: .one) else {
                throw ImageDecodingError(.unsupported("a CMYK JPEG is not read in rows"), format: .jpeg)
            }
            guard size == header.size else {
                jpeg.abort()
                throw ImageDecodingError(.corrupt("the image decodes to \(size), not the \(header.size) its header gave"), format: .jpeg)
            }
            do {
                while !reducer.isComplete {
                    try reducer.write { (destination, stride, capacity) throws(ImageDecodingError) -> Int in
                        try jpeg.read(into: destination, stride: stride, count: capacity)
                    }
                }
            } catch {
                jpeg.abort()
                throw error
            }
            try jpeg.finish()
        case .tiffBands:
            // The band reader's errors are decoding errors; what `emit` throws is kept aside.
            var stopped: (any Error)?
            do {
                try TIFFCodec.decodeBands(bytes, size: header.codedSize) { (band, _, rows) throws(ImageDecodingError) in
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
            let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: wholeDecodePixels))
            let image = try decoder.decode(bytes, minimumSize: nil)
            try image.withUnsafeBytes { raw in
                try reducer.write(rows: image.height, from: raw.baseAddress!, stride: image.bytesPerRow)
            }
        }
    }
}
