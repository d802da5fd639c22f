import CJXL
import StrataBase

/// The decoding half of ``JXLCodec``: libjxl's decoder over the bytes in place (a bare
/// codestream or the ISOBMFF container), the header without pixels and the first frame as
/// premultiplied BGRA. Every libjxl object is freed before returning.
///
/// - **Depth**: libjxl renders 8-, 16-bit and float images as 8-bit samples.
/// - **Gray** images come out as B = G = R (libjxl expands them).
/// - **Alpha**: the first alpha channel, premultiplied here unless the file's is already
///   (associated alpha); an image without alpha comes out opaque.
/// - **Orientation**: the codestream's orientation (EXIF's eight values) is left to
///   ``ImageDecoder``, which applies it as it applies a JPEG's (libjxl's own re-orientation is
///   turned off, so the header's coded size is what libjxl writes).
/// - **Colour**: the profile of the decoded pixels (`JXL_COLOR_PROFILE_TARGET_DATA`): the
///   original ICC profile of a lossless or `uses_original_profile` file, the encoded colour
///   space of a lossy (XYB) one. A lossy file whose original was an ICC profile would come out
///   as linear sRGB, which 8 bits cannot hold without banding: such files are rendered to sRGB
///   by libjxl instead (out-of-gamut colours clipped, as Little CMS's conversion of a matrix
///   profile clips them). sRGB and sRGB gray need no conversion (``EmbeddedColour/none``); other
///   gray encodings are a gray profile; PQ and HLG are ``EmbeddedColour/unusable(_:)`` (no tone
///   mapping).
/// - **Animation**: the first frame (coalesced: the whole canvas); ``ImageHeader/isAnimated``
///   says so.
/// - **Limits**: the caller checks the header's size against ``DecodingLimits`` before any
///   decode; the decode checks the basic info again before libjxl allocates the frame.
/// - **Threads**: ``threads(for:)``: libjxl's thread runner only for a decode large enough to
///   repay it, and only while a core is idle.
/// - **Errors**: input that ends early is ``ImageDecodingError/Reason/truncated`` (the input is
///   never closed, so libjxl asks for more instead of failing); anything else libjxl refuses is
///   ``ImageDecodingError/Reason/corrupt(_:)``.
extension JXLCodec {
    /// Threads for a decode of `pixels`: 2 from 4 megapixels up when a core is idle
    /// (``ProgressiveJPEGSplit/hasIdleCores(pending:)``), else 1. libjxl's groups are 256×256
    /// pixels, too few in a small image to share; and on two busy cores a second thread measured
    /// no faster (0.9–1.1× a 2560×1600 decode's time, lossy and lossless), so a loaded server
    /// decodes each image on one thread, several images at once.
    package static func threads(for pixels: Int) -> Int {
        pixels >= 4_000_000 && ProgressiveJPEGSplit.hasIdleCores() ? 2 : 1
    }

    /// A libjxl decoder over bytes it does not copy (they must outlive it), with a thread
    /// runner when asked for more than one thread.
    private final class Decoder {
        let handle: OpaquePointer
        private var runner: UnsafeMutableRawPointer?

        init(_ bytes: UnsafeRawBufferPointer, events: [JxlDecoderStatus], threads: Int) throws(ImageDecodingError) {
            guard let base = bytes.baseAddress, bytes.count > 0, let handle = JxlDecoderCreate(nil) else {
                throw ImageDecodingError(.corrupt("libjxl cannot create a decoder"), format: .jxl)
            }
            self.handle = handle
            var ok = JxlDecoderSubscribeEvents(handle, Int32(events.reduce(0) { $0 | $1.rawValue })) == JXL_DEC_SUCCESS
            ok = ok && JxlDecoderSetKeepOrientation(handle, JXL_TRUE) == JXL_DEC_SUCCESS
            if threads > 1, let runner = JxlThreadParallelRunnerCreate(nil, threads) {
                self.runner = runner
                ok = ok && JxlDecoderSetParallelRunner(handle, JxlThreadParallelRunner, runner) == JXL_DEC_SUCCESS
            }
            // The input is not closed: a file that ends early makes libjxl ask for more input,
            // which is the typed `truncated`, instead of an error it prints to standard error.
            ok = ok && JxlDecoderSetInput(handle, base.assumingMemoryBound(to: UInt8.self), bytes.count) == JXL_DEC_SUCCESS
            guard ok else { throw ImageDecodingError(.corrupt("libjxl refused the decoder's settings"), format: .jxl) }
        }

        deinit {
            JxlDecoderDestroy(handle)
            if let runner { JxlThreadParallelRunnerDestroy(runner) }
        }

        /// The next event; throws for the end of the input and for libjxl's refusal.
        func next(while action: String) throws(ImageDecodingError) -> JxlDecoderStatus {
            let status = JxlDecoderProcessInput(handle)
            switch status {
            case JXL_DEC_NEED_MORE_INPUT: throw ImageDecodingError(.truncated, format: .jxl)
            case JXL_DEC_ERROR: throw ImageDecodingError(.corrupt("libjxl refused the data while \(action)"), format: .jxl)
            default: return status
            }
        }

        func basicInfo() throws(ImageDecodingError) -> JxlBasicInfo {
            var info = JxlBasicInfo()
            guard JxlDecoderGetBasicInfo(handle, &info) == JXL_DEC_SUCCESS else {
                throw ImageDecodingError(.corrupt("libjxl gave no basic info"), format: .jxl)
            }
            return info
        }

        /// The colour space of the decoded pixels, as an encoded description, when it has one.
        func dataEncoding() -> JxlColorEncoding? {
            var encoding = JxlColorEncoding()
            guard JxlDecoderGetColorAsEncodedProfile(handle, nil, JXL_COLOR_PROFILE_TARGET_DATA, &encoding) == JXL_DEC_SUCCESS
            else { return nil }
            return encoding
        }

        /// At the `JXL_DEC_COLOR_ENCODING` event: asks for sRGB pixels where libjxl would
        /// otherwise write linear ones (a lossy file whose original colour was an ICC profile).
        func preferNonLinear(_ info: JxlBasicInfo) {
            guard info.uses_original_profile == JXL_FALSE, let data = dataEncoding(), data.transfer_function == JXL_TRANSFER_FUNCTION_LINEAR
            else { return }
            var srgb = JxlColorEncoding()
            JxlColorEncodingSetToSRGB(&srgb, info.num_color_channels == 1 ? JXL_TRUE : JXL_FALSE)
            _ = JxlDecoderSetPreferredColorProfile(handle, &srgb)
        }

        /// The colour of the decoded pixels (after ``preferNonLinear(_:)``).
        func colour() -> EmbeddedColour {
            if let data = dataEncoding() {
                if data.transfer_function == JXL_TRANSFER_FUNCTION_PQ || data.transfer_function == JXL_TRANSFER_FUNCTION_HLG {
                    return .unusable(.invalid("a PQ or HLG (HDR) transfer function is not converted"))
                }
                let srgbTone = data.white_point == JXL_WHITE_POINT_D65 && data.transfer_function == JXL_TRANSFER_FUNCTION_SRGB
                if srgbTone && data.color_space == JXL_COLOR_SPACE_GRAY { return .none }
                if srgbTone && data.color_space == JXL_COLOR_SPACE_RGB && data.primaries == JXL_PRIMARIES_SRGB { return .none }
            }
            var size = 0
            guard JxlDecoderGetICCProfileSize(handle, nil, JXL_COLOR_PROFILE_TARGET_DATA, &size) == JXL_DEC_SUCCESS, size > 0 else {
                return .unusable(.invalid("libjxl describes the colour space with no ICC profile"))
            }
            guard size <= ColourProfile.maximumByteCount else { return .unusable(.tooLarge(bytes: size)) }
            var icc = [UInt8](repeating: 0, count: size)
            guard JxlDecoderGetColorAsICCProfile(handle, nil, JXL_COLOR_PROFILE_TARGET_DATA, &icc, size) == JXL_DEC_SUCCESS else {
                return .unusable(.malformedContainer("libjxl could not write the ICC profile"))
            }
            return EmbeddedProfiles.profile(icc)
        }
    }

    /// The header: the basic info and the colour, no pixels decoded (the caller checks it
    /// against the limits).
    package static func header(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> ImageHeader {
        let decoder = try Decoder(bytes, events: [JXL_DEC_BASIC_INFO, JXL_DEC_COLOR_ENCODING], threads: 1)
        var info: JxlBasicInfo?
        while true {
            switch try decoder.next(while: "reading the header") {
            case JXL_DEC_BASIC_INFO:
                info = try decoder.basicInfo()
            case JXL_DEC_COLOR_ENCODING:
                guard let info else { throw ImageDecodingError(.corrupt("libjxl gave the colour before the basic info"), format: .jxl) }
                decoder.preferNonLinear(info)
                return ImageHeader(
                    format: .jxl, codedSize: PixelSize(width: Int(info.xsize), height: Int(info.ysize)),
                    orientation: Int(info.orientation.rawValue), hasAlpha: info.alpha_bits > 0,
                    isGrayscale: info.num_color_channels == 1, isAnimated: info.have_animation != 0, colour: decoder.colour())
            case JXL_DEC_SUCCESS:
                throw ImageDecodingError(.corrupt("the file ends before its colour encoding"), format: .jxl)
            default:
                continue
            }
        }
    }

    /// Where libjxl's image-out callback writes: the destination's rows, and how to turn
    /// libjxl's RGBA into Strata's BGRA.
    private struct Output {
        var base: UnsafeMutableRawPointer
        var stride: Int
        var alpha: Bool
        var premultiply: Bool
    }

    /// Decodes the first frame, coded size `size` (before the orientation), as premultiplied
    /// BGRA into `destination` (rows `stride` bytes apart). Returns the threads it decoded on.
    @discardableResult
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, size: PixelSize, maxPixels: Int,
        into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) -> Int {
        let threads = threads(for: size.pixelCount)
        let decoder = try Decoder(bytes, events: [JXL_DEC_BASIC_INFO, JXL_DEC_COLOR_ENCODING, JXL_DEC_FULL_IMAGE], threads: threads)
        var info = JxlBasicInfo()
        // libjxl calls the callback from inside `JxlDecoderProcessInput`, on its threads: the
        // target lives at a fixed address until the decode returns.
        let output = UnsafeMutablePointer<Output>.allocate(capacity: 1)
        output.initialize(to: Output(base: destination, stride: stride, alpha: false, premultiply: false))
        defer { output.deallocate() }
        var format = JxlPixelFormat(num_channels: 4, data_type: JXL_TYPE_UINT8, endianness: JXL_NATIVE_ENDIAN, align: 0)
        while true {
            switch try decoder.next(while: "decoding") {
            case JXL_DEC_BASIC_INFO:
                info = try decoder.basicInfo()
                let coded = PixelSize(width: Int(info.xsize), height: Int(info.ysize))
                guard coded == size else {
                    throw ImageDecodingError(.corrupt("libjxl decodes \(coded), the header passed in says \(size)"), format: .jxl)
                }
                guard coded.pixelCount <= maxPixels else {
                    throw ImageDecodingError(.tooLarge(pixels: coded.pixelCount, limit: maxPixels), format: .jxl)
                }
                output.pointee.alpha = info.alpha_bits > 0
                output.pointee.premultiply = info.alpha_bits > 0 && info.alpha_premultiplied == 0
            case JXL_DEC_COLOR_ENCODING:
                decoder.preferNonLinear(info)
            case JXL_DEC_NEED_IMAGE_OUT_BUFFER:
                let set = JxlDecoderSetImageOutCallback(
                    decoder.handle, &format,
                    { opaque, x, y, count, pixels in
                        guard let opaque, let pixels else { return }
                        let out = opaque.assumingMemoryBound(to: Output.self).pointee
                        PixelOps.rgbRowToBGRA(
                            pixels.assumingMemoryBound(to: UInt8.self), channels: 4, alpha: out.alpha,
                            premultiply: out.premultiply,
                            (out.base + y * out.stride + x * 4).assumingMemoryBound(to: UInt8.self), count)
                    }, output)
                guard set == JXL_DEC_SUCCESS else {
                    throw ImageDecodingError(.unsupported("libjxl cannot write 8-bit RGBA for this image"), format: .jxl)
                }
            case JXL_DEC_FULL_IMAGE:
                return threads
            case JXL_DEC_SUCCESS:
                throw ImageDecodingError(.corrupt("the file has no frame"), format: .jxl)
            default:
                continue
            }
        }
    }
}
