import CAVIF
import StrataBase

/// AVIF encoding through libavif with the aom AV1 encoder (Debian's libavif 0.11.1).
///
/// - Pixels: 8-bit YUV, full range, BT.601 matrix (libavif's default for RGB input). Chroma is
///   4:2:0 below quality 90 and 4:4:4 from 90, as for JPEG; gray8 images become monochrome
///   (4:0:0) AVIFs.
/// - Alpha: an alpha plane only when some pixel is not opaque, coded at half the colour
///   planes' quantizer (cut-out edges show artefacts first).
/// - Colour: sRGB answers are signalled with CICP (BT.709 primaries, sRGB transfer); with a
///   profile (``/StrataBase/ColourOutput/original``) the ICC profile is embedded (`colr` `prof`) and the
///   primaries and transfer left unspecified.
/// - Quality 1…100 maps to one aom quantizer, `((100 − quality) × 63 + 50) / 100` (libavif
///   1.0's mapping of its later `quality` setting), used as both the smallest and the largest
///   quantizer: constant-quality coding.
/// - Speed 0…10 (slowest…fastest), libavif's scale; ``defaultSpeed`` is the service's default.
/// - aom tuned for SSIM (``tune``: libavif 1.0's default for aom; 0.11 leaves aom's PSNR
///   tuning, which spends bytes on noise and blurs less of what the eye notices).
/// - Threads: ``threads`` aom threads per encode. The service encodes on the engine's pool,
///   one encode per pool thread, so each encode stays single-threaded (measured: a second
///   thread saves nothing on a 1024 px answer — one tile — and would take a core from other
///   requests).
///
/// Cost: one conversion to YUV (libyuv) and the AV1 encode, which dominates — hundreds of
/// milliseconds for a 1024 px photo at the default speed (see the README's figures). Every
/// call has its own libavif objects; thread-safe.
public enum AVIFCodec {
    /// The encoder speed `strata serve` uses when `http.avifSpeed` is not set. Measured
    /// (`strata-bench codecs --avif`, 1024 px answers of the Fixtures photos, README's figures):
    /// speed 7 makes 0.55× JPEG's bytes at equal SSIM in about 0.2 s; 6 saves 5 % more for
    /// 1.8× the time, 9 is 5× faster for 7 % more bytes, and 8 is erratic (one photo at 2.6×
    /// speed 7's bytes). An encode is paid once per encoding (coalesced, then cached).
    public static let defaultSpeed = 7
    /// The quality AVIF answers get when the request names none (`http.avifQuality`): its
    /// mean SSIM over the Fixtures photos (0.970) is JPEG quality 80's (0.973), at 0.49× the
    /// bytes.
    public static let defaultQuality = 60
    /// aom threads per encode (``AVIFCodec``'s discussion).
    public static let threads = 1
    /// aom's distortion metric (its `tune` option).
    public static let tune = "ssim"
    /// The largest side aom encodes.
    public static let maximumSide = 65_536

    /// The aom quantizer (0 best … 63 worst) of `quality` (1…100).
    public static func quantizer(forQuality quality: Int) -> Int {
        ((100 - min(100, max(1, quality))) * 63 + 50) / 100
    }

    /// `image` as ``ImageEncoder/encode(_:as:quality:profile:speed:)`` encodes it, on `threads`
    /// aom threads (`strata-bench codecs --avif` compares thread counts).
    @_spi(Benchmarks) public static func encode(
        _ image: PixelImage, quality: Int, speed: Int, threads: Int, tune: String = tune
    ) throws(ImageEncodingError) -> [UInt8] {
        let (pixels, hasAlpha) = PixelOps.straightBGRA(image)
        return try encode(
            straightBGRA: pixels, size: image.size, alpha: hasAlpha, gray: image.style == .gray8, quality: quality, speed: speed,
            profile: nil, threads: threads, tune: tune)
    }

    /// Encodes straight (un-premultiplied), tightly packed BGRA; `alpha`: write an alpha plane
    /// (some pixel is not opaque); `gray`: the pixels are gray (B = G = R), write 4:0:0.
    package static func encode(
        straightBGRA pixels: [UInt8], size: PixelSize, alpha: Bool, gray: Bool, quality: Int, speed: Int,
        profile: ColourProfile?, threads: Int = threads, tune: String = tune
    ) throws(ImageEncodingError) -> [UInt8] {
        guard size.width <= maximumSide, size.height <= maximumSide else {
            throw ImageEncodingError(.tooLarge(size, maximumSide: maximumSide), format: .avif)
        }
        let quality = min(100, max(1, quality))
        let yuv = gray ? AVIF_PIXEL_FORMAT_YUV400 : quality >= 90 ? AVIF_PIXEL_FORMAT_YUV444 : AVIF_PIXEL_FORMAT_YUV420
        guard let image = avifImageCreate(UInt32(size.width), UInt32(size.height), 8, yuv) else {
            throw ImageEncodingError(.encoderFailed("libavif could not allocate the image"), format: .avif)
        }
        defer { avifImageDestroy(image) }
        image.pointee.yuvRange = AVIF_RANGE_FULL
        image.pointee.matrixCoefficients = UInt16(AVIF_MATRIX_COEFFICIENTS_BT601)
        if let profile {
            image.pointee.colorPrimaries = UInt16(AVIF_COLOR_PRIMARIES_UNSPECIFIED)
            image.pointee.transferCharacteristics = UInt16(AVIF_TRANSFER_CHARACTERISTICS_UNSPECIFIED)
            profile.bytes.withUnsafeBufferPointer { avifImageSetProfileICC(image, $0.baseAddress, $0.count) }
        } else {
            image.pointee.colorPrimaries = UInt16(AVIF_COLOR_PRIMARIES_BT709)
            image.pointee.transferCharacteristics = UInt16(AVIF_TRANSFER_CHARACTERISTICS_SRGB)
        }
        var rgb = avifRGBImage()
        avifRGBImageSetDefaults(&rgb, image)
        rgb.format = AVIF_RGB_FORMAT_BGRA
        rgb.depth = 8
        rgb.ignoreAlpha = alpha ? AVIF_FALSE : AVIF_TRUE
        rgb.rowBytes = UInt32(size.width * 4)
        let converted = pixels.withUnsafeBufferPointer { p -> avifResult in
            rgb.pixels = UnsafeMutablePointer(mutating: p.baseAddress)
            return avifImageRGBToYUV(image, &rgb)
        }
        guard converted == AVIF_RESULT_OK else { throw failure(converted, while: "converting to YUV") }

        guard let encoder = avifEncoderCreate() else {
            throw ImageEncodingError(.encoderFailed("libavif could not create an encoder"), format: .avif)
        }
        defer { avifEncoderDestroy(encoder) }
        let quantizer = Int32(quantizer(forQuality: quality))
        encoder.pointee.codecChoice = AVIF_CODEC_CHOICE_AOM
        encoder.pointee.maxThreads = Int32(max(1, threads))
        encoder.pointee.speed = Int32(min(10, max(0, speed)))
        encoder.pointee.minQuantizer = quantizer
        encoder.pointee.maxQuantizer = quantizer
        encoder.pointee.minQuantizerAlpha = quantizer / 2
        encoder.pointee.maxQuantizerAlpha = quantizer / 2
        avifEncoderSetCodecSpecificOption(encoder, "tune", tune)
        var output = avifRWData()
        let written = avifEncoderWrite(encoder, image, &output)
        defer { avifRWDataFree(&output) }
        guard written == AVIF_RESULT_OK, let data = output.data else { throw failure(written, while: "encoding") }
        return Array(UnsafeBufferPointer(start: data, count: output.size))
    }

    /// A typed error with libavif's message for `result`.
    package static func failure(_ result: avifResult, while action: String) -> ImageEncodingError {
        let message = avifResultToString(result).map { String(cString: $0) } ?? "error \(result.rawValue)"
        return ImageEncodingError(.encoderFailed("libavif failed while \(action): \(message)"), format: .avif)
    }
}
