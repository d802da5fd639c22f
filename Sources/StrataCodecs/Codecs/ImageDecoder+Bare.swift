import CTurboJPEG
import StrataBase

extension ImageDecoder {
    // MARK: Bare library calls (benchmarks)

    /// Worker threads of each HEVC (HEIC) decode started from now on, process-wide: the cores,
    /// at most 4, by default; 1 decodes on the calling thread, as libheif's own libde265 plugin
    /// does on its one worker (`strata-bench codecs` compares the two).
    package static var hevcDecodeThreads: Int {
        get { HEIFCodec.hevcThreads }
        set { HEIFCodec.hevcThreads = newValue }
    }

    /// The bare library decode the benchmarks time as their anchor and floor: one
    /// `tjDecompress2` (JPEG, TJPF_BGRA, at `scale`, default 1/1), one `WebPDecode`
    /// (MODE_bgrA, scaled to `scale` of the coded size), or the PNG, AVIF, HEIF (the primary
    /// image or the thumbnail of the destination's size), GIF, TIFF, JPEG 2000 or JPEG XL decode straight into
    /// `destination`, with no header check beyond the library's, no orientation and no colour
    /// conversion.
    ///
    /// `destination` must be bgra32Premultiplied; its size picks the scale (for JPEG it must be
    /// the coded size scaled by a libjpeg-turbo factor, checked against `scale` when given; for
    /// WebP any size). Reuse one destination across calls to time the library rather than page
    /// faults. CMYK JPEGs come out as libjpeg-turbo's CMYK→RGB guess; use it for timing only.
    public func decodeBare(
        _ bytes: UnsafeRawBufferPointer, scale: JPEGScalingFactor? = nil,
        into destination: inout PixelImage
    ) throws(ImageDecodingError) {
        guard let format = ImageFormatDetector.detect(bytes) else {
            throw ImageDecodingError(.unrecognizedFormat, format: nil)
        }
        let size = destination.size, stride = destination.bytesPerRow
        precondition(destination.style == .bgra32Premultiplied, "decodeBare: destination must be bgra32Premultiplied")
        if let scale, format == .jpeg {
            let h = try jpeg.readHeader(bytes)
            precondition(
                scale.scaled(h.size) == size,
                "decodeBare: destination is \(size), \(scale) of the JPEG is \(scale.scaled(h.size))")
        }
        try destination.withUnsafeMutableBytes { (dst: UnsafeMutableRawBufferPointer) throws(ImageDecodingError) in
            switch format {
            case .jpeg:
                try jpeg.decompress(bytes, scaledSize: size, pixelFormat: TJPF_BGRA, into: dst.baseAddress!, pitch: stride)
            case .webp:
                let f = try WebPCodec.features(bytes)
                try WebPCodec.decode(bytes, codedSize: f.size, size: size, into: dst.baseAddress!, stride: stride)
            case .png:
                try PNGCodec.decode(bytes, expectedSize: size, into: dst.baseAddress!, stride: stride)
            case .avif:
                try AVIFCodec.decode(bytes, size: size, maxPixels: limits.maxPixels, into: dst.baseAddress!, stride: stride)
            case .heic:
                try HEIFCodec.decode(bytes, size: size, maxPixels: limits.maxPixels, into: dst.baseAddress!, stride: stride)
            case .gif:
                try GIFCodec.decode(bytes, size: size, maxPixels: limits.maxPixels, into: dst.baseAddress!, stride: stride)
            case .tiff:
                try TIFFCodec.decode(bytes, size: size, into: dst.baseAddress!, stride: stride)
            case .jp2:
                try JP2Codec.decode(bytes, size: size, into: dst.baseAddress!, stride: stride)
            case .jxl:
                try JXLCodec.decode(bytes, size: size, maxPixels: limits.maxPixels, into: dst.baseAddress!, stride: stride)
            }
        }
    }
}
