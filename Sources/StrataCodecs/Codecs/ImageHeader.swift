import StrataBase
/// What an encoded image's header says, read without decoding pixels (see
/// `ImageDecoder.readHeader(_:)`).
public struct ImageHeader: Sendable, Hashable {
    public var format: ImageFormat
    /// The displayed size, after the EXIF orientation is applied (sides swapped for 5–8).
    public var size: PixelSize
    /// The size as stored in the file.
    public var codedSize: PixelSize
    /// The EXIF orientation, 1...8 (1 when absent or malformed).
    public var orientation: Int
    public var hasAlpha: Bool
    public var isGrayscale: Bool
    /// An animated WebP, GIF or AVIF (image sequence); Strata decodes its first frame (at full
    /// size).
    public var isAnimated: Bool
    /// A CMYK or YCCK JPEG (its profile, if any, is applied by the decoder).
    public var isCMYK: Bool
    /// The embedded ICC profile (JPEG APP2, WebP `ICCP`, PNG `iCCP` or `cHRM`, AVIF and HEIF
    /// `colr`), or the colour an AVIF or HEIF `nclx` box names, if any.
    public var colour: EmbeddedColour
    /// The (displayed) sizes of the embedded thumbnails a decode may use instead of the full
    /// image, smallest first (HEIF only: see ``ImageDecoder/decodedSize(for:minimumSize:)``).
    public var thumbnails: [PixelSize]
    /// JPEG 2000: the sizes of the file's resolution levels below the full one, smallest first
    /// (a decode reaches each directly: OpenJPEG's reduce factor); empty for other formats.
    public var levels: [PixelSize]

    public init(
        format: ImageFormat, codedSize: PixelSize, orientation: Int = 1, hasAlpha: Bool = false,
        isGrayscale: Bool = false, isAnimated: Bool = false, isCMYK: Bool = false, colour: EmbeddedColour = .none,
        thumbnails: [PixelSize] = [], levels: [PixelSize] = []
    ) {
        self.format = format
        self.codedSize = codedSize
        self.orientation = (1...8).contains(orientation) ? orientation : 1
        self.size =
            self.orientation >= 5
            ? PixelSize(width: codedSize.height, height: codedSize.width) : codedSize
        self.hasAlpha = hasAlpha
        self.isGrayscale = isGrayscale
        self.isAnimated = isAnimated
        self.isCMYK = isCMYK
        self.colour = colour
        self.thumbnails = thumbnails
        self.levels = levels
    }

    /// Whether the orientation swaps width and height (EXIF 5–8).
    public var swapsSides: Bool { orientation >= 5 }
}

/// Limits checked from the header, before any pixel memory is allocated.
public struct DecodingLimits: Sendable, Hashable {
    /// The largest `width × height` accepted (default 100 megapixels). Decoding an image this
    /// size needs `4 × maxPixels` bytes for the BGRA result alone.
    public var maxPixels: Int = 100_000_000

    public init(maxPixels: Int = 100_000_000) {
        precondition(maxPixels > 0, "maxPixels must be positive")
        self.maxPixels = maxPixels
    }
}

/// Why an image could not be decoded; names the format and, when the caller provides one,
/// the input (``ImageDecodingError/named(_:)``).
public struct ImageDecodingError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        /// The bytes are not an image format Strata knows (``ImageFormat``), or are empty.
        case unrecognizedFormat
        /// The data ends early (incomplete download or write).
        case truncated
        /// The data is damaged; the string is the library's message.
        case corrupt(String)
        /// The header claims more pixels than ``DecodingLimits/maxPixels``.
        case tooLarge(pixels: Int, limit: Int)
        /// A valid file using a feature Strata does not decode.
        case unsupported(String)
        /// The request's operations do not apply to this image (a crop outside it).
        case operation(String)
        /// An animation has more frames than ``AnimationLimits/maxFrames``.
        case tooManyFrames(frames: Int, limit: Int)
    }

    public var reason: Reason
    /// The detected format, `nil` when unrecognized.
    public var format: ImageFormat?
    /// The caller's name for the input (a cache key or file name), when known.
    public var inputName: String?

    public init(_ reason: Reason, format: ImageFormat?, inputName: String? = nil) {
        self.reason = reason
        self.format = format
        self.inputName = inputName
    }

    /// The same error naming `inputName`.
    public func named(_ inputName: String) -> ImageDecodingError {
        var copy = self
        copy.inputName = inputName
        return copy
    }

    public var description: String {
        let what = format.map { "\($0.displayName) data" } ?? "data"
        let detail: String
        switch reason {
        case .unrecognizedFormat:
            detail =
                "not a JPEG, WebP, PNG, AVIF, HEIC, GIF, TIFF, JPEG 2000 or JPEG XL image (unrecognized first bytes); check that the source serves an image"
        case .truncated:
            detail = "\(what) is truncated (ends early); the file is incomplete, fetch or write it again"
        case .corrupt(let message):
            detail = "\(what) is corrupt (\(message)); replace the source file"
        case .tooLarge(let pixels, let limit):
            detail = "image of \(pixels) pixels exceeds the limit of \(limit) pixels; raise DecodingLimits.maxPixels if it is trusted"
        case .unsupported(let message):
            detail = "\(what) uses an unsupported feature (\(message)); convert the image to a baseline JPEG, WebP or PNG"
        case .operation(let message):
            detail = message
        case .tooManyFrames(let frames, let limit):
            detail =
                "animation of \(frames) frames or more exceeds the limit of \(limit) frames (source.maxFrames); ask for frames=1 for a still"
        }
        if let inputName { return "\(inputName): \(detail)" }
        return detail
    }
}

/// Why an image could not be encoded.
public struct ImageEncodingError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Reason: Sendable, Hashable {
        /// The image is larger than the format allows (WebP: 16383 px per side).
        case tooLarge(PixelSize, maximumSide: Int)
        /// The library failed; the string is its message.
        case encoderFailed(String)
        /// Strata reads this format but does not write it (HEIC, GIF).
        case unsupportedFormat
    }

    public var reason: Reason
    public var format: ImageFormat

    public init(_ reason: Reason, format: ImageFormat) {
        self.reason = reason
        self.format = format
    }

    public var description: String {
        switch reason {
        case .tooLarge(let size, let maximumSide):
            return "cannot encode a \(size) image as \(format.displayName): at most \(maximumSide) pixels per side; resize it first"
        case .encoderFailed(let message):
            return "\(format.displayName) encoder failed: \(message)"
        case .unsupportedFormat:
            return "Strata does not encode \(format.displayName); choose JPEG, WebP, PNG or AVIF"
        }
    }
}
