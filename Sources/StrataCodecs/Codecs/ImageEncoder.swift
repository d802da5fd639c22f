import CTurboJPEG
import StrataBase

/// Encodes a ``/StrataBase/PixelImage`` of any ``/StrataBase/PixelStyle`` as JPEG (libjpeg-turbo), WebP (libwebp), PNG
/// (libpng's simplified API), AVIF (libavif with aom: ``AVIFCodec``) or JPEG XL (libjxl:
/// ``JXLCodec``), for the CLI and the HTTP service.
///
/// - JPEG has no alpha: premultiplied pixels are written as they are (composited over black);
///   gray8 images become grayscale JPEGs. Chroma is 4:2:0 below quality 90, 4:4:4 from 90.
/// - WebP, PNG and AVIF get straight (un-premultiplied) colour; alpha is written only when some
///   pixel is not opaque. WebP quality 100 means lossless. AVIF is 8-bit YUV, 4:2:0 below
///   quality 90 and 4:4:4 from 90 (gray8: 4:0:0), at `speed` (``AVIFCodec``). JPEG XL is
///   lossy (XYB) at libjxl's distance for the quality, lossless at 100 (``JXLCodec``).
/// - GIF (giflib): 255 colours by median cut, no dithering, alpha below half transparent (for
///   animations' answers; ``AnimatedImage/encodedAsGIF()`` writes the animated ones).
///
/// - `profile` (``/StrataBase/ColourOutput/original`` answers) is embedded byte for byte: JPEG APP2
///   `ICC_PROFILE` chunks after the JFIF segment, the WebP `ICCP` chunk (an extended file, via
///   libwebp's mux), the PNG `iCCP` chunk after `IHDR`, the AVIF `colr` `prof` box (libavif),
///   the JPEG XL codestream's ICC profile (libjxl).
///   Not for gray8 images (an RGB profile
///   cannot describe a grayscale file).
///
/// Cost: one conversion pass into a temporary buffer (except JPEG from BGRA/BGRx/gray) plus
/// the library's encode (AVIF's is by far the slowest: hundreds of milliseconds a megapixel); with a profile, one copy of the encoded bytes (and the profile's
/// deflate for PNG). Thread-safe: every call uses its own library state.
public enum ImageEncoder {
    /// The formats ``encode(_:as:quality:profile:speed:)`` writes with quality and profiles (it
    /// writes GIF too, without either; the others throw).
    public static let formats: [ImageFormat] = [.jpeg, .webp, .png, .avif, .jxl]

    /// Encodes `image` as `format`; `quality` (1...100) applies to JPEG, WebP, AVIF and JPEG XL; `profile`,
    /// when given, is embedded (see the type's discussion); `speed` (0 slowest … 10 fastest)
    /// applies to AVIF.
    public static func encode(
        _ image: PixelImage, as format: ImageFormat, quality: Int = 85, profile: ColourProfile? = nil,
        speed: Int = AVIFCodec.defaultSpeed
    ) throws(ImageEncodingError) -> [UInt8] {
        let quality = min(100, max(1, quality))
        let profile = image.style == .gray8 ? nil : profile
        switch format {
        case .jpeg:
            let encoded = try encodeJPEG(image, quality: quality)
            return profile.map { EmbeddedProfiles.embed($0, inJPEG: encoded) } ?? encoded
        case .webp:
            let (pixels, _) = PixelOps.straightBGRA(image)
            let encoded = try WebPCodec.encode(straightBGRA: pixels, size: image.size, quality: quality, lossless: quality >= 100)
            guard let profile else { return encoded }
            guard let tagged = EmbeddedProfiles.embed(profile, inWebP: encoded) else {
                throw ImageEncodingError(.encoderFailed("libwebp's mux refused the ICC profile"), format: .webp)
            }
            return tagged
        case .png:
            let (pixels, hasAlpha) = PixelOps.straightBGRA(image)
            let encoded = try PNGCodec.encode(straightBGRA: pixels, size: image.size, alpha: hasAlpha)
            return profile.map { PNGColourChunks.embed($0, inPNG: encoded) } ?? encoded
        case .avif:
            let (pixels, hasAlpha) = PixelOps.straightBGRA(image)
            return try AVIFCodec.encode(
                straightBGRA: pixels, size: image.size, alpha: hasAlpha, gray: image.style == .gray8, quality: quality, speed: speed,
                profile: profile)
        case .jxl:
            let (pixels, hasAlpha) = PixelOps.straightBGRA(image)
            return try JXLCodec.encode(
                straightBGRA: pixels, size: image.size, alpha: hasAlpha, gray: image.style == .gray8, quality: quality,
                profile: profile)
        case .gif:
            // A one-frame GIF: 255 colours (giflib's median cut), alpha below half transparent.
            return try GIFCodec.encode(AnimatedImage(canvas: image.size, frames: [.init(image: image, duration: 0)], loopCount: 0))
        case .heic, .tiff, .jp2:
            throw ImageEncodingError(.unsupportedFormat, format: format)
        }
    }

    /// `encoded` (a JPEG, WebP or PNG file of `format`) with `profile` embedded as
    /// ``encode(_:as:quality:profile:speed:)`` embeds it, the compressed data untouched: tags a
    /// file without re-encoding it (a file that already has a profile gets a second one; tag
    /// untagged files). Throws when libwebp's mux refuses the file, and for AVIF (whose profile
    /// is written with the encode: encode it with `profile` instead), and likewise for JPEG XL.
    public static func embedding(_ profile: ColourProfile, in encoded: [UInt8], format: ImageFormat) throws(ImageEncodingError) -> [UInt8] {
        switch format {
        case .jpeg: return EmbeddedProfiles.embed(profile, inJPEG: encoded)
        case .png: return PNGColourChunks.embed(profile, inPNG: encoded)
        case .webp:
            guard let tagged = EmbeddedProfiles.embed(profile, inWebP: encoded) else {
                throw ImageEncodingError(.encoderFailed("libwebp's mux refused the file or the ICC profile"), format: .webp)
            }
            return tagged
        case .avif:
            throw ImageEncodingError(
                .encoderFailed("an AVIF's profile cannot be added after the encode: encode it with the profile"), format: .avif)
        case .jxl:
            throw ImageEncodingError(
                .encoderFailed("a JPEG XL profile cannot be added after the encode: encode it with the profile"), format: .jxl)
        case .heic, .gif, .tiff, .jp2:
            throw ImageEncodingError(.unsupportedFormat, format: format)
        }
    }

    private static func encodeJPEG(_ image: PixelImage, quality: Int) throws(ImageEncodingError) -> [UInt8] {
        guard image.width <= 65_500, image.height <= 65_500 else {
            throw ImageEncodingError(.tooLarge(image.size, maximumSide: 65_500), format: .jpeg)
        }
        let compressor = TurboJPEGCompressor()
        let subsampling = quality >= 90 ? TJSAMP_444 : TJSAMP_420
        switch image.style {
        case .bgra32Premultiplied, .bgrx32:
            return try image.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(ImageEncodingError) in
                try compressor.compress(
                    raw.baseAddress!, size: image.size, pitch: image.bytesPerRow,
                    pixelFormat: TJPF_BGRX, subsampling: subsampling, quality: quality)
            }
        case .gray8:
            return try image.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(ImageEncodingError) in
                try compressor.compress(
                    raw.baseAddress!, size: image.size, pitch: image.bytesPerRow,
                    pixelFormat: TJPF_GRAY, subsampling: TJSAMP_GRAY, quality: quality)
            }
        case .rgb565:
            let (pixels, _) = PixelOps.straightBGRA(image)
            let result: Result<[UInt8], ImageEncodingError> = pixels.withUnsafeBytes { raw in
                do throws(ImageEncodingError) {
                    return .success(
                        try compressor.compress(
                            raw.baseAddress!, size: image.size, pitch: image.width * 4,
                            pixelFormat: TJPF_BGRX, subsampling: subsampling, quality: quality))
                } catch { return .failure(error) }
            }
            return try result.get()
        }
    }
}

extension ImageEncoder {
    /// An estimate of the most bytes an encode of a `size` image as `format` holds beyond the
    /// image itself: what the service reserves from the engine's `render.memoryLimit`. From the
    /// libraries' buffers, per pixel: JPEG 3 (libjpeg-turbo's worst-case output buffer), PNG 5
    /// (an unpremultiplied copy and the deflate output), WebP 6 (libwebp's ARGB picture and its
    /// YUV planes), AVIF 12 (the YUV planes and libaom's frame buffers and look-ahead), GIF 9 (straight pixels, three colour planes, the indices, the alpha mask),
    /// JPEG XL 24 (the interleaved copy, libjxl's float XYB planes and its encoder's own), plus 4
    /// for a converted copy of the pixels.
    public static func workingBytes(as format: ImageFormat, size: PixelSize) -> Int {
        let pixels = size.width * size.height
        let perPixel =
            switch format {
            case .jpeg: 3
            case .png: 5
            case .webp: 6
            case .avif: 12
            case .gif: 9
            case .jxl: 24
            case .heic, .tiff, .jp2: 4
            }
        return pixels * (perPixel + 4)
    }
}
