import CWebP
import StrataBase

/// libwebp calls: features, (scaled) decode into external memory, first frame of an
/// animation, encode. Stateless; every libwebp object is freed before returning.
package enum WebPCodec {
    package struct Features {
        package var size: PixelSize
        package var hasAlpha: Bool
        package var isAnimated: Bool
        /// VP8 (lossy) rather than VP8L (lossless); false for an animation of either.
        package var isLossy: Bool
    }

    package static func features(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> Features {
        var f = WebPBitstreamFeatures()
        let status = WebPGetFeatures(bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, &f)
        guard status == VP8_STATUS_OK else { throw error(status, while: "reading the header") }
        return Features(
            size: PixelSize(width: Int(f.width), height: Int(f.height)),
            hasAlpha: f.has_alpha != 0, isAnimated: f.has_animation != 0, isLossy: f.format == 1)
    }

    /// Decodes a still WebP as premultiplied BGRA (MODE_bgrA) into `destination`, scaled to
    /// `size` (libwebp's rescaler) when it differs from the coded size.
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, codedSize: PixelSize, size: PixelSize,
        into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        var config = WebPDecoderConfig()
        guard WebPInitDecoderConfig(&config) != 0 else {
            throw ImageDecodingError(.unsupported("libwebp ABI mismatch"), format: .webp)
        }
        if size != codedSize {
            config.options.use_scaling = 1
            config.options.scaled_width = Int32(size.width)
            config.options.scaled_height = Int32(size.height)
        }
        // libwebp's second thread (in-loop filtering beside entropy decoding), as libvips uses.
        config.options.use_threads = 1
        config.output.colorspace = MODE_bgrA
        config.output.is_external_memory = 1
        config.output.width = Int32(size.width)
        config.output.height = Int32(size.height)
        config.output.u.RGBA.rgba = destination.assumingMemoryBound(to: UInt8.self)
        config.output.u.RGBA.stride = Int32(stride)
        config.output.u.RGBA.size = stride * (size.height - 1) + size.width * 4
        let status = WebPDecode(bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, &config)
        WebPFreeDecBuffer(&config.output)
        guard status == VP8_STATUS_OK else { throw error(status, while: "decoding") }
    }

    /// Decodes the first frame of an animated WebP (composited on its canvas, premultiplied
    /// BGRA) into `destination`, which has the canvas size.
    package static func decodeFirstFrame(
        _ bytes: UnsafeRawBufferPointer, canvas: PixelSize, into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        let decoder = try animationDecoder(bytes)
        defer { WebPAnimDecoderDelete(decoder) }
        var info = WebPAnimInfo()
        guard WebPAnimDecoderGetInfo(decoder, &info) != 0,
            Int(info.canvas_width) == canvas.width, Int(info.canvas_height) == canvas.height
        else {
            throw ImageDecodingError(.corrupt("animation canvas disagrees with the header"), format: .webp)
        }
        var frame: UnsafeMutablePointer<UInt8>?
        var timestamp: Int32 = 0
        guard WebPAnimDecoderGetNext(decoder, &frame, &timestamp) != 0, let frame else {
            throw ImageDecodingError(.corrupt("the first frame cannot be decoded (truncated or damaged)"), format: .webp)
        }
        let rowBytes = canvas.width * 4
        for y in 0..<canvas.height {
            (destination + y * stride).copyMemory(from: frame + y * rowBytes, byteCount: rowBytes)
        }
    }

    package static func error(_ status: VP8StatusCode, while action: String) -> ImageDecodingError {
        switch status {
        case VP8_STATUS_NOT_ENOUGH_DATA:
            return ImageDecodingError(.truncated, format: .webp)
        case VP8_STATUS_UNSUPPORTED_FEATURE:
            return ImageDecodingError(.unsupported("libwebp: unsupported feature while \(action)"), format: .webp)
        case VP8_STATUS_OUT_OF_MEMORY:
            return ImageDecodingError(.corrupt("libwebp ran out of memory while \(action)"), format: .webp)
        case VP8_STATUS_INVALID_PARAM:
            return ImageDecodingError(.corrupt("libwebp rejected the parameters while \(action)"), format: .webp)
        default:
            return ImageDecodingError(.corrupt("libwebp: bitstream error while \(action) (status \(status.rawValue))"), format: .webp)
        }
    }

    /// Encodes straight (un-premultiplied), tightly packed BGRA.
    package static func encode(
        straightBGRA pixels: [UInt8], size: PixelSize, quality: Int, lossless: Bool
    ) throws(ImageEncodingError) -> [UInt8] {
        guard size.width <= 16383, size.height <= 16383 else {
            throw ImageEncodingError(.tooLarge(size, maximumSide: 16383), format: .webp)
        }
        var output: UnsafeMutablePointer<UInt8>?
        let count = pixels.withUnsafeBufferPointer { p in
            lossless
                ? WebPEncodeLosslessBGRA(p.baseAddress, Int32(size.width), Int32(size.height), Int32(size.width * 4), &output)
                : WebPEncodeBGRA(
                    p.baseAddress, Int32(size.width), Int32(size.height), Int32(size.width * 4),
                    Float(quality), &output)
        }
        defer { if let output { WebPFree(output) } }
        guard count > 0, let output else {
            throw ImageEncodingError(.encoderFailed("WebPEncodeBGRA returned no data"), format: .webp)
        }
        return Array(UnsafeBufferPointer(start: output, count: count))
    }
}
