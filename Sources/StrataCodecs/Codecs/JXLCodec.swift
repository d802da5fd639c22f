import CJXL
import StrataBase

/// JPEG XL through libjxl (Debian's libjxl 0.7): the decoder (``JXLCodec``'s decoding
/// extension) and the encoder of `format=jxl` answers.
///
/// - Pixels: 8-bit RGB, gray8 images as one gray channel; a bare codestream (no container:
///   nothing in it needs boxes).
/// - Alpha: an alpha channel only when some pixel is not opaque.
/// - Quality 1…99 is lossy (XYB) at the Butteraugli distance ``distance(forQuality:)``, the
///   mapping `cjxl -q` uses; 100 is lossless (modular), as WebP's 100 is.
/// - Effort 1…9 (fastest…slowest), libjxl's scale; ``defaultEffort`` is the service's.
/// - Colour: sRGB answers are signalled as sRGB in the codestream's colour encoding (no ICC
///   profile); with a profile (``/StrataBase/ColourOutput/original``) the ICC profile is
///   embedded.
/// - Threads: none of libjxl's: the service encodes on the engine's pool, one encode per pool
///   thread.
///
/// Cost: the encode dominates, tens to hundreds of milliseconds for a 1024 px photo at the
/// default effort (less than AVIF's; see Benchmarks); every call has its own libjxl objects,
/// so it is thread-safe.
public enum JXLCodec {
    /// The encoder effort `strata serve` uses (libjxl's `JXL_ENC_FRAME_SETTING_EFFORT`, cjxl's
    /// `-e`). Chosen by `Scripts/bench-jxl.sh` (docs/Benchmarks.md, "JPEG XL answers"): effort 5
    /// makes effort 7's bytes at equal SSIM in about half its time; effort 3 is faster again but
    /// costs noticeably more bytes.
    public static let defaultEffort = 5
    /// The largest side a level-5 codestream (the default, which every decoder reads) holds.
    public static let maximumSide = 262_144
    /// The most pixels a level-5 codestream holds.
    public static let maximumPixels = 1 << 28

    /// The Butteraugli distance of `quality` (1…100), libjxl's own mapping (cjxl's `-q`, and
    /// libjxl 0.9's `JxlEncoderDistanceFromQuality`, which 0.7 lacks): 0 (lossless) at 100;
    /// `0.1 + (100 − q) × 0.09` from 30 up (1.0 at 90, 1.9 at 80); below 30,
    /// `53/3000 × q² − 23/20 × q + 25` (continuous at 30: 6.4; 23.9 at 1).
    public static func distance(forQuality quality: Int) -> Double {
        let q = Double(min(100, max(1, quality)))
        if q >= 100 { return 0 }
        if q >= 30 { return 0.1 + (100 - q) * 0.09 }
        return 53.0 / 3000.0 * q * q - 23.0 / 20.0 * q + 25.0
    }

    /// `image` as ``ImageEncoder/encode(_:as:quality:profile:speed:)`` encodes it, at `effort`
    /// (`Scripts/bench-jxl.sh` compares efforts).
    @_spi(Benchmarks) public static func encode(_ image: PixelImage, quality: Int, effort: Int) throws(ImageEncodingError) -> [UInt8] {
        let (pixels, hasAlpha) = PixelOps.straightBGRA(image)
        return try encode(
            straightBGRA: pixels, size: image.size, alpha: hasAlpha, gray: image.style == .gray8, quality: quality, effort: effort,
            profile: nil)
    }

    /// Encodes straight (un-premultiplied), tightly packed BGRA; `alpha`: write an alpha channel
    /// (some pixel is not opaque); `gray`: the pixels are gray (B = G = R), write one channel;
    /// `orientation`: the codestream's orientation (EXIF's 1…8) of the stored pixels (answers
    /// are upright: 1; tests write the others).
    package static func encode(
        straightBGRA pixels: [UInt8], size: PixelSize, alpha: Bool, gray: Bool, quality: Int, effort: Int = defaultEffort,
        profile: ColourProfile?, orientation: Int = 1
    ) throws(ImageEncodingError) -> [UInt8] {
        guard size.width <= maximumSide, size.height <= maximumSide, size.pixelCount <= maximumPixels else {
            throw ImageEncodingError(.tooLarge(size, maximumSide: maximumSide), format: .jxl)
        }
        let channels = (gray ? 1 : 3) + (alpha ? 1 : 0)
        let interleaved = interleave(pixels, count: size.pixelCount, gray: gray, alpha: alpha)
        let distance = distance(forQuality: quality)
        guard let encoder = JxlEncoderCreate(nil) else {
            throw ImageEncodingError(.encoderFailed("libjxl could not create an encoder"), format: .jxl)
        }
        defer { JxlEncoderDestroy(encoder) }

        var info = JxlBasicInfo()
        JxlEncoderInitBasicInfo(&info)
        info.xsize = UInt32(size.width)
        info.ysize = UInt32(size.height)
        info.bits_per_sample = 8
        info.num_color_channels = gray ? 1 : 3
        info.alpha_bits = alpha ? 8 : 0
        info.num_extra_channels = alpha ? 1 : 0
        info.uses_original_profile = distance == 0 ? JXL_TRUE : JXL_FALSE
        info.orientation = JxlOrientation(UInt32((1...8).contains(orientation) ? orientation : 1))
        try check(JxlEncoderSetBasicInfo(encoder, &info), encoder, while: "setting the basic info")
        if let profile {
            let set = profile.bytes.withUnsafeBufferPointer { JxlEncoderSetICCProfile(encoder, $0.baseAddress, $0.count) }
            try check(set, encoder, while: "setting the ICC profile")
        } else {
            var srgb = JxlColorEncoding()
            JxlColorEncodingSetToSRGB(&srgb, gray ? JXL_TRUE : JXL_FALSE)
            try check(JxlEncoderSetColorEncoding(encoder, &srgb), encoder, while: "setting the colour encoding")
        }
        guard let settings = JxlEncoderFrameSettingsCreate(encoder, nil) else {
            throw ImageEncodingError(.encoderFailed("libjxl could not create frame settings"), format: .jxl)
        }
        try check(
            JxlEncoderFrameSettingsSetOption(settings, JXL_ENC_FRAME_SETTING_EFFORT, Int64(min(9, max(1, effort)))), encoder,
            while: "setting the effort")
        if distance == 0 {
            try check(JxlEncoderSetFrameLossless(settings, JXL_TRUE), encoder, while: "asking for a lossless frame")
        } else {
            try check(JxlEncoderSetFrameDistance(settings, Float(distance)), encoder, while: "setting the distance")
        }
        var format = JxlPixelFormat(num_channels: UInt32(channels), data_type: JXL_TYPE_UINT8, endianness: JXL_NATIVE_ENDIAN, align: 0)
        let added = interleaved.withUnsafeBytes { JxlEncoderAddImageFrame(settings, &format, $0.baseAddress, $0.count) }
        try check(added, encoder, while: "adding the frame")
        JxlEncoderCloseInput(encoder)
        return try output(of: encoder, guess: max(4096, size.pixelCount / 4))
    }

    /// Straight BGRA as libjxl's interleaved samples: RGB or RGBA, gray or gray and alpha.
    private static func interleave(_ bgra: [UInt8], count: Int, gray: Bool, alpha: Bool) -> [UInt8] {
        let channels = (gray ? 1 : 3) + (alpha ? 1 : 0)
        return [UInt8](unsafeUninitializedCapacity: count * channels) { out, written in
            bgra.withUnsafeBufferPointer { s in
                for i in 0..<count {
                    let p = 4 * i, o = channels * i
                    if gray {
                        out[o] = s[p + 1]
                    } else {
                        out[o] = s[p + 2]
                        out[o + 1] = s[p + 1]
                        out[o + 2] = s[p]
                    }
                    if alpha { out[o + channels - 1] = s[p + 3] }
                }
            }
            written = count * channels
        }
    }

    /// The encoded bytes, in a buffer grown as libjxl asks for more.
    private static func output(of encoder: OpaquePointer, guess: Int) throws(ImageEncodingError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: guess)
        var used = 0
        while true {
            let (status, written) = buffer.withUnsafeMutableBufferPointer { b -> (JxlEncoderStatus, Int) in
                var next: UnsafeMutablePointer<UInt8>? = b.baseAddress! + used
                var available = b.count - used
                let status = JxlEncoderProcessOutput(encoder, &next, &available)
                return (status, b.count - used - available)
            }
            used += written
            switch status {
            case JXL_ENC_SUCCESS:
                buffer.removeSubrange(used...)
                return buffer
            case JXL_ENC_NEED_MORE_OUTPUT:
                buffer.append(contentsOf: repeatElement(0, count: buffer.count))
            default:
                throw failure(encoder, while: "encoding")
            }
        }
    }

    private static func check(_ status: JxlEncoderStatus, _ encoder: OpaquePointer, while action: String) throws(ImageEncodingError) {
        guard status == JXL_ENC_SUCCESS else { throw failure(encoder, while: action) }
    }

    /// A typed error naming libjxl's error condition.
    private static func failure(_ encoder: OpaquePointer, while action: String) -> ImageEncodingError {
        let reason =
            switch JxlEncoderGetError(encoder) {
            case JXL_ENC_ERR_OOM: "out of memory"
            case JXL_ENC_ERR_BAD_INPUT: "bad input (an invalid ICC profile or pixels)"
            case JXL_ENC_ERR_NOT_SUPPORTED: "not supported"
            case JXL_ENC_ERR_API_USAGE: "API misuse"
            case let other: "error \(other.rawValue)"
            }
        return ImageEncodingError(.encoderFailed("libjxl failed while \(action): \(reason)"), format: .jxl)
    }
}
