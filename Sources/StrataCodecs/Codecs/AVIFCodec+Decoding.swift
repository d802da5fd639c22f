import CAVIF
import StrataBase

/// The decoding half of ``AVIFCodec``: libavif calls (dav1d decodes): the header (container only, no AV1 decode) and the decode of
/// the first image to premultiplied BGRA. Stateless; every libavif object is freed before
/// returning.
///
/// - **Depth**: 8-, 10- and 12-bit images are reduced to 8 bits by libavif's YUV → RGB step.
/// - **Alpha**: libavif premultiplies (`alphaPremultiplied`), as the other decoders give it;
///   an image without alpha comes out opaque.
/// - **Orientation**: `irot` and `imir` are mapped to the EXIF orientation they mean
///   (``orientation(angle:mirror:)``) and applied by ``ImageDecoder`` as for a JPEG. `clap`
///   (clean aperture) and `pasp` are ignored: the whole coded picture is decoded.
/// - **Colour**: the `colr` ICC profile when there is one, else the `nclx` code points
///   (``CICPColour``).
/// - **Animation** (`avis` image sequences): the first frame only; ``ImageHeader/isAnimated``
///   says so.
/// - **Limits**: the header (the container, parsed without libavif's limits: no pixel memory)
///   is checked against ``DecodingLimits`` by the caller before any decode; the decode sets
///   libavif's own limits to the same pixel count (dav1d refuses a frame larger than that,
///   whatever the container says); at most ``maxFrames`` frames are indexed; strictness is off
///   (files without `pixi` or with odd `clap`s decode, as in browsers).
extension AVIFCodec {
    package struct Features {
        /// The coded size (before `irot`).
        package var size: PixelSize
        package var orientation: Int
        package var hasAlpha: Bool
        package var isGrayscale: Bool
        package var isAnimated: Bool
        package var colour: EmbeddedColour
    }

    /// The most frames libavif indexes in an image sequence (its default is 2.6 million).
    package static let maxFrames: UInt32 = 100_000
    /// libavif's largest image (`AVIF_DEFAULT_IMAGE_SIZE_LIMIT`, 16384²).
    private static let libraryPixelLimit = 16384 * 16384

    /// A decoder over `bytes` whose container is parsed (no AV1 decoded yet), refusing images
    /// over `pixelLimit` pixels or `sideLimit` a side (0: none). The caller destroys it.
    private static func parsed(
        _ bytes: UnsafeRawBufferPointer, pixelLimit: UInt32, sideLimit: UInt32
    ) throws(ImageDecodingError) -> UnsafeMutablePointer<avifDecoder> {
        guard let decoder = avifDecoderCreate() else {
            throw ImageDecodingError(.corrupt("libavif cannot allocate a decoder"), format: .avif)
        }
        decoder.pointee.imageSizeLimit = pixelLimit
        decoder.pointee.imageDimensionLimit = sideLimit
        decoder.pointee.imageCountLimit = maxFrames
        decoder.pointee.strictFlags = avifStrictFlags(AVIF_STRICT_DISABLED.rawValue)
        decoder.pointee.ignoreExif = AVIF_TRUE
        decoder.pointee.ignoreXMP = AVIF_TRUE
        decoder.pointee.maxThreads = 1
        var result = avifDecoderSetIOMemory(decoder, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count)
        if result == AVIF_RESULT_OK { result = avifDecoderParse(decoder) }
        if result != AVIF_RESULT_OK {
            let error = self.error(result, decoder, while: "reading the container")
            avifDecoderDestroy(decoder)
            throw error
        }
        return decoder
    }

    package static func features(_ bytes: UnsafeRawBufferPointer, maxPixels: Int) throws(ImageDecodingError) -> Features {
        // The container alone is parsed with libavif's largest limits (nothing is allocated for
        // the pixels), so that an image over `maxPixels` is the caller's typed `tooLarge`; one
        // over libavif's own limit is `tooLarge` too, with the size libavif's message names.
        let decoder: UnsafeMutablePointer<avifDecoder>
        do throws(ImageDecodingError) {
            decoder = try parsed(bytes, pixelLimit: UInt32(libraryPixelLimit), sideLimit: 0)
        } catch {
            guard case .corrupt(let message) = error.reason, let claimed = claimedSize(message) else { throw error }
            throw ImageDecodingError(
                .tooLarge(pixels: claimed.pixelCount, limit: min(maxPixels, libraryPixelLimit)), format: .avif)
        }
        defer { avifDecoderDestroy(decoder) }
        guard let image = decoder.pointee.image else {
            throw ImageDecodingError(.corrupt("libavif parsed no image"), format: .avif)
        }
        let i = image.pointee
        let gray = i.yuvFormat == AVIF_PIXEL_FORMAT_YUV400
        let colour: EmbeddedColour
        if i.icc.size > 0, let data = i.icc.data {
            colour = EmbeddedProfiles.profile(Array(UnsafeBufferPointer(start: data, count: i.icc.size)))
        } else {
            colour = CICPColour.colour(
                primaries: Int(i.colorPrimaries), transfer: Int(i.transferCharacteristics), gray: gray)
        }
        let flags = i.transformFlags
        let angle = flags & avifTransformFlags(AVIF_TRANSFORM_IROT.rawValue) != 0 ? Int(i.irot.angle) : 0
        let mirror = flags & avifTransformFlags(AVIF_TRANSFORM_IMIR.rawValue) != 0 ? Int(i.imir.mode) : nil
        return Features(
            size: PixelSize(width: Int(i.width), height: Int(i.height)),
            orientation: orientation(angle: angle, mirror: mirror),
            hasAlpha: decoder.pointee.alphaPresent != 0, isGrayscale: gray,
            isAnimated: decoder.pointee.imageCount > 1, colour: colour)
    }

    /// The size in libavif's "dimensions are too large [WxH]" message, if that is the message.
    private static func claimedSize(_ message: String) -> PixelSize? {
        guard let range = message.range(of: "dimensions are too large [") else { return nil }
        let sides = message[range.upperBound...].prefix { $0 != "]" }.split(separator: "x").compactMap { Int($0) }
        guard sides.count == 2 else { return nil }
        return PixelSize(width: sides[0], height: sides[1])
    }

    /// The EXIF orientation that an `irot` of `angle` × 90° anticlockwise followed by an `imir`
    /// of `mirror` (0: top and bottom exchanged, 1: left and right; `nil`: none) amounts to
    /// (ISO/IEC 23008-12 applies `irot` before `imir`).
    package static func orientation(angle: Int, mirror: Int?) -> Int {
        let a = angle & 3
        switch mirror {
        case nil: return [1, 8, 3, 6][a]
        case 0: return [4, 5, 2, 7][a]
        default: return [2, 7, 4, 5][a]
        }
    }

    /// Decodes the first image, coded size `size` (before orientation), as premultiplied BGRA
    /// into `destination` (rows `stride` bytes apart).
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, size: PixelSize, maxPixels: Int,
        into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        // The decode refuses what the header check let through only if the AV1 frame or the
        // container says otherwise: libavif and dav1d get the same pixel limit.
        let decoder = try parsed(
            bytes, pixelLimit: UInt32(min(max(maxPixels, 1), libraryPixelLimit)), sideLimit: UInt32(min(max(maxPixels, 1), 1 << 16)))
        defer { avifDecoderDestroy(decoder) }
        let result = avifDecoderNextImage(decoder)
        guard result == AVIF_RESULT_OK else { throw error(result, decoder, while: "decoding") }
        guard let image = decoder.pointee.image else {
            throw ImageDecodingError(.corrupt("libavif decoded no image"), format: .avif)
        }
        // The AV1 payload may disagree with the container's `ispe`.
        guard Int(image.pointee.width) == size.width, Int(image.pointee.height) == size.height else {
            throw ImageDecodingError(
                .corrupt("the AV1 frame is \(image.pointee.width)x\(image.pointee.height), the container says \(size)"),
                format: .avif)
        }
        var rgb = avifRGBImage()
        avifRGBImageSetDefaults(&rgb, image)
        rgb.format = AVIF_RGB_FORMAT_BGRA
        rgb.depth = 8
        rgb.alphaPremultiplied = AVIF_TRUE
        rgb.pixels = destination.assumingMemoryBound(to: UInt8.self)
        rgb.rowBytes = UInt32(stride)
        let converted = avifImageYUVToRGB(image, &rgb)
        guard converted == AVIF_RESULT_OK else { throw error(converted, decoder, while: "converting to RGB") }
    }

    private static func error(
        _ result: avifResult, _ decoder: UnsafeMutablePointer<avifDecoder>, while action: String
    ) -> ImageDecodingError {
        let name = String(cString: avifResultToString(result))
        let detail = withUnsafeBytes(of: &decoder.pointee.diag.error) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        let message = "libavif: \(name) while \(action)\(detail.isEmpty ? "" : ": \(detail)")"
        switch result {
        case AVIF_RESULT_TRUNCATED_DATA, AVIF_RESULT_IO_ERROR:
            return ImageDecodingError(.truncated, format: .avif)
        case AVIF_RESULT_NO_CODEC_AVAILABLE, AVIF_RESULT_NOT_IMPLEMENTED, AVIF_RESULT_UNSUPPORTED_DEPTH:
            return ImageDecodingError(.unsupported(message), format: .avif)
        default:
            return ImageDecodingError(.corrupt(message), format: .avif)
        }
    }
}
