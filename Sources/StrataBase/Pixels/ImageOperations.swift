/// What a request does to an image besides sizing it: a trim of a uniform border, a manual crop,
/// a flip and a quarter-turn (the original's geometry, before the resize), padding to the box
/// (`mode=pad`), a background, and a Gaussian blur and a sharpen (on the resized pixels).
///
/// They apply in one fixed order: trim → crop → flip → rotate → resize (fit, fill or pad) →
/// blur → sharpen. The crop's coordinates are those of the trimmed original (after EXIF
/// orientation); the box, the gravity and the padding are those of the flipped and rotated
/// image, as the client sees it.
///
/// The operations are part of a variant's identity: a key with operations is derived from the
/// source key (``CacheKey/init(_:colour:gravity:operations:)``), so tolerance matching only
/// ever serves a variant made with the same ones, and its ``canonical`` text goes into the
/// key, the ETag and the encoded cache's key. Cost: a value; the pixel work is in the renderer.
public struct ImageOperations: Hashable, Sendable, CustomStringConvertible {
    /// Removes a border whose colour stays within this distance (0…255, in 8-bit levels) of the
    /// top-left pixel's, found as `vips_find_trim` finds it (a 3×3 median first).
    public var trim: Int?
    /// Whose colour the trim's border has: the top-left pixel's (the default) or the
    /// bottom-right one's (thumbor's `trim:bottom-right`).
    public var trimFromBottomRight = false
    /// A region of the (trimmed) original kept before the resize.
    public var crop: CropRegion?
    /// The crop is in the original's pixels even after a trim (thumbor's order): the region kept
    /// is the crop inside the trimmed box, or the trimmed box where they do not meet.
    public var cropInOriginal = false
    /// A mirror before the rotation.
    public var flip: Flip?
    /// Clockwise quarter turns (0…3).
    public var quarterTurns: Int
    /// Fit inside the box, then fill the rest of it (`mode=pad`).
    public var pad: PadExtension?
    /// The colour of the padding, and of transparency in a JPEG answer (`bg=`).
    public var background: BackgroundColour?
    /// A Gaussian blur of this standard deviation, in output pixels.
    public var blur: Double?
    /// An unsharp mask of this standard deviation on the lightness, in output pixels.
    public var sharpen: Double?

    /// No operation.
    public static let none = ImageOperations()

    public init(
        trim: Int? = nil, crop: CropRegion? = nil, flip: Flip? = nil, quarterTurns: Int = 0, pad: PadExtension? = nil,
        background: BackgroundColour? = nil, blur: Double? = nil, sharpen: Double? = nil
    ) {
        self.trim = trim
        self.crop = crop
        self.flip = flip
        self.quarterTurns = ((quarterTurns % 4) + 4) % 4
        self.pad = pad
        self.background = background
        self.blur = blur
        self.sharpen = sharpen
    }

    /// Whether nothing is done.
    @inlinable
    public var isEmpty: Bool { self == .none }

    /// Whether the original's geometry changes before the resize (trim, crop, flip, rotation).
    public var changesGeometry: Bool { trim != nil || crop != nil || flip != nil || quarterTurns != 0 }

    /// Whether pixels change after the resize (padding, blur, sharpen): a variant made with them
    /// cannot be resampled to another size and stay the same operation.
    public var filtersOutput: Bool { pad != nil || blur != nil || sharpen != nil }

    /// Whether the rotation swaps the box's sides (90° or 270°).
    public var turnsBox: Bool { quarterTurns % 2 == 1 }

    /// The text that identifies these operations in keys and ETags: `name:value` parts joined by
    /// `;`, in the order they apply (ASCII, never a NUL). Empty for ``none``.
    public var canonical: String {
        var parts: [String] = []
        if let trim { parts.append("trim:\(trim)") }
        if trimFromBottomRight { parts.append("trimfrom:br") }
        if let crop { parts.append("\(cropInOriginal ? "ocrop" : "crop"):\(crop)") }
        if let flip { parts.append("flip:\(flip.rawValue)") }
        if quarterTurns != 0 { parts.append("rot:\(quarterTurns * 90)") }
        if let pad { parts.append("pad:\(pad.rawValue)") }
        if let background { parts.append("bg:\(background)") }
        if let blur { parts.append("blur:\(Self.decimal(blur))") }
        if let sharpen { parts.append("sharpen:\(Self.decimal(sharpen))") }
        return parts.joined(separator: ";")
    }

    public var description: String { canonical.isEmpty ? "none" : canonical }

    /// Parses ``canonical`` (`nil` for anything it never writes).
    public init?(canonical text: Substring) {
        self.init()
        guard !text.isEmpty else { return }
        for part in text.split(separator: ";", omittingEmptySubsequences: false) {
            guard let colon = part.firstIndex(of: ":") else { return nil }
            let value = part[part.index(after: colon)...]
            switch part[..<colon] {
            case "trim":
                guard let v = Int(value), (0...255).contains(v) else { return nil }
                trim = v
            case "trimfrom":
                guard value == "br" else { return nil }
                trimFromBottomRight = true
            case "crop", "ocrop":
                guard let v = CropRegion(parsing: value) else { return nil }
                crop = v
                cropInOriginal = part.hasPrefix("ocrop")
            case "flip":
                guard let v = Flip(rawValue: String(value)) else { return nil }
                flip = v
            case "rot":
                guard let v = Int(value), [90, 180, 270].contains(v) else { return nil }
                quarterTurns = v / 90
            case "pad":
                guard let v = PadExtension(rawValue: String(value)) else { return nil }
                pad = v
            case "bg":
                guard let v = BackgroundColour(hex: value) else { return nil }
                background = v
            case "blur":
                guard let v = Double(value), Self.blurRange.contains(v) else { return nil }
                blur = v
            case "sharpen":
                guard let v = Double(value), Self.sharpenRange.contains(v) else { return nil }
                sharpen = v
            default: return nil
            }
        }
    }

    /// Accepted blur standard deviations (a larger one costs more taps than it is worth: scale
    /// the image down instead).
    public static let blurRange = 0.3...50.0
    /// Accepted sharpen standard deviations.
    public static let sharpenRange = 0.3...10.0

    /// `value` rounded to hundredths, written without trailing zeros (`2`, `0.5`, `1.25`).
    package static func decimal(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        let whole = hundredths / 100, fraction = hundredths % 100
        if fraction == 0 { return "\(whole)" }
        return fraction % 10 == 0 ? "\(whole).\(fraction / 10)" : "\(whole).\(fraction < 10 ? "0" : "")\(fraction)"
    }

    /// `value` rounded to hundredths (what ``canonical`` keeps).
    package static func hundredths(_ value: Double) -> Double { (value * 100).rounded() / 100 }

    /// A mirror: `h` left to right, `v` top to bottom.
    public enum Flip: String, Sendable, Hashable, CaseIterable {
        case h, v
    }

    /// How the padding of `mode=pad` is filled: the background colour, the edge pixels repeated,
    /// or the image mirrored at its edges (libvips' `embed` extends).
    public enum PadExtension: String, Sendable, Hashable, CaseIterable {
        case background, copy, mirror
    }
}

/// An sRGB colour with alpha, as `bg=RRGGBB[AA]` writes it (straight, not premultiplied).
public struct BackgroundColour: Hashable, Sendable, CustomStringConvertible {
    public var red: UInt8
    public var green: UInt8
    public var blue: UInt8
    public var alpha: UInt8

    public init(red: UInt8, green: UInt8, blue: UInt8, alpha: UInt8 = 255) {
        self.red = red
        self.green = green
        self.blue = blue
        self.alpha = alpha
    }

    /// Transparent black: the padding when no `bg` is given.
    public static let transparent = BackgroundColour(red: 0, green: 0, blue: 0, alpha: 0)

    /// Six or eight hex digits (either case).
    public init?(hex: Substring) {
        guard hex.utf8.count == 6 || hex.utf8.count == 8, hex.allSatisfy(\.isHexDigit), let value = UInt32(hex, radix: 16) else {
            return nil
        }
        let v = hex.utf8.count == 6 ? value << 8 | 0xFF : value
        self.init(red: UInt8(v >> 24), green: UInt8(v >> 16 & 0xFF), blue: UInt8(v >> 8 & 0xFF), alpha: UInt8(v & 0xFF))
    }

    /// The pixel in premultiplied BGRA.
    public var premultipliedBGRA: SIMD4<UInt8> {
        func times(_ c: UInt8) -> UInt8 { UInt8((Int(c) * Int(alpha) + 127) / 255) }
        return SIMD4(times(blue), times(green), times(red), alpha)
    }

    /// Eight lower-case hex digits, `RRGGBBAA`.
    public var description: String {
        let value = UInt32(red) << 24 | UInt32(green) << 16 | UInt32(blue) << 8 | UInt32(alpha)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 8 - hex.count) + hex
    }
}

/// A manual crop: a rectangle in pixels of the original, or in fractions (0…1) of its sides.
public struct CropRegion: Hashable, Sendable, CustomStringConvertible {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double
    /// Whether the numbers are fractions of the sides (else pixels).
    public var isFraction: Bool

    /// Pixels: whole numbers, `width` and `height` at least 1. Fractions: within 0…1 (rounded
    /// to thousandths), `width` and `height` above 0.
    public init?(x: Double, y: Double, width: Double, height: Double, isFraction: Bool) {
        if isFraction {
            func thousandths(_ v: Double) -> Double { (v * 1000).rounded() / 1000 }
            let (x, y, w, h) = (thousandths(x), thousandths(y), thousandths(width), thousandths(height))
            guard (0...1).contains(x), (0...1).contains(y), w > 0, w <= 1, h > 0, h <= 1 else { return nil }
            (self.x, self.y, self.width, self.height) = (x, y, w, h)
        } else {
            let limit = Double(1 << 20)
            guard [x, y, width, height].allSatisfy({ $0 == $0.rounded() && $0 >= 0 && $0 <= limit }), width >= 1, height >= 1
            else { return nil }
            (self.x, self.y, self.width, self.height) = (x, y, width, height)
        }
        self.isFraction = isFraction
    }

    /// `x,y,w,h`: whole numbers are pixels; numbers with a decimal point are fractions (all four
    /// must then have one, so `0.0,0.5,1.0,0.5` is the lower half).
    public init?(parsing text: Substring) {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let dotted = parts.filter { $0.contains(".") }.count
        guard dotted == 0 || dotted == 4 else { return nil }
        var numbers: [Double] = []
        for part in parts {
            guard !part.isEmpty, part.utf8.allSatisfy({ $0 == UInt8(ascii: ".") || ($0 >= 0x30 && $0 <= 0x39) }),
                let value = Double(part)
            else { return nil }
            numbers.append(value)
        }
        self.init(x: numbers[0], y: numbers[1], width: numbers[2], height: numbers[3], isFraction: dotted == 4)
    }

    /// The crop in pixels of an image of `size`, clamped to it; `nil` when nothing of it is inside.
    public func rect(in size: PixelSize) -> (x: Int, y: Int, width: Int, height: Int)? {
        let sw = Double(size.width), sh = Double(size.height)
        var x0 = x, y0 = y, x1 = x + width, y1 = y + height
        if isFraction { (x0, y0, x1, y1) = (x0 * sw, y0 * sh, x1 * sw, y1 * sh) }
        let left = Int(x0.rounded()), top = Int(y0.rounded())
        let right = min(size.width, Int(x1.rounded())), bottom = min(size.height, Int(y1.rounded()))
        guard left < right, top < bottom else { return nil }
        return (left, top, right - left, bottom - top)
    }

    /// `x,y,w,h` as parsed: whole numbers for pixels, decimals with a point for fractions.
    public var description: String {
        func text(_ v: Double) -> String {
            guard isFraction else { return "\(Int(v))" }
            let thousandths = Int((v * 1000).rounded())
            var digits = String(thousandths % 1000)
            digits = String(repeating: "0", count: 3 - digits.count) + digits
            while digits.count > 1, digits.hasSuffix("0") { digits.removeLast() }
            return "\(thousandths / 1000).\(digits)"
        }
        return "\(text(x)),\(text(y)),\(text(width)),\(text(height))"
    }
}
