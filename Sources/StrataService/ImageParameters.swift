import Foundation
import Strata
import StrataConfiguration

/// The encodings an image can be sent in. `raw` is the BGRA (or the variant's style) rows as
/// the engine holds them.
public enum ResponseFormat: String, Sendable, Hashable, CaseIterable {
    case webp, jpeg, png, avif, gif, jxl, raw

    /// The response format of an encoder's format (`nil`: one answers are never encoded in).
    package init?(_ format: ImageFormat) {
        switch format {
        case .webp: self = .webp
        case .jpeg: self = .jpeg
        case .png: self = .png
        case .avif: self = .avif
        case .gif: self = .gif
        case .jxl: self = .jxl
        case .heic, .tiff, .jp2: return nil
        }
    }

    /// The encoder's format (`nil` for `raw`).
    package var imageFormat: ImageFormat? {
        switch self {
        case .webp: return .webp
        case .jpeg: return .jpeg
        case .png: return .png
        case .avif: return .avif
        case .gif: return .gif
        case .jxl: return .jxl
        case .raw: return nil
        }
    }

    package var contentType: String {
        switch self {
        case .webp: return "image/webp"
        case .jpeg: return "image/jpeg"
        case .png: return "image/png"
        case .avif: return "image/avif"
        case .gif: return "image/gif"
        case .jxl: return "image/jxl"
        case .raw: return "application/octet-stream"
        }
    }

    /// Whether requests choose its quality (`quality=`): the lossy encodings.
    package var hasQuality: Bool { self == .jpeg || self == .webp || self == .avif || self == .jxl }
}

/// What an image URL asks for — `/images/{key}?w=&h=&mode=&tolerance=&format=&quality=&exact=`
/// — parsed and checked, before anything else runs.
///
/// The key is the path after `/images/`, each segment percent-decoded; a segment that is
/// empty, `.`, `..`, or decodes to one containing `/` or NUL is refused, so a key never
/// names anything outside the source. Unknown or repeated parameters are refused too (a
/// typo is a 400, not a silently different image). Cost: one pass over the target.
public struct ImageParameters: Sendable, Hashable {
    public var key: String
    public var box: PixelSize
    public var mode: ContentMode
    public var tolerance: Double?
    /// `nil`: negotiate from `Accept`.
    public var format: ResponseFormat?
    public var quality: Int?
    public var exact: Bool
    /// The device pixel ratio the box was multiplied by (`dpr`, lowered when the product would
    /// pass `http.maxDimension`); `nil` when the request named none. Answered as `Content-DPR`.
    public var dpr: Double?
    /// Where a `fill` crop sits, or the image in a `pad` box (`gravity=`; `center` when the
    /// request names none).
    public var gravity: Gravity = .center
    /// Trim, crop, flip, rotation, padding, background, blur and sharpen (`trim=`, `crop=`,
    /// `flip=`, `rot=`, `mode=pad` with `extend=`, `bg=`, `blur=`, `sharpen=`).
    public var operations = ImageOperations.none
    /// The watermark laid on the answer (`watermark=NAME` with `wmpos`, `wmopacity`, `wmscale`,
    /// `wmmargin`), `nil` for none.
    public var watermark: WatermarkPlacement?
    /// `frames=1`: an animated original answered as its first frame (else animated, where the
    /// answer's format is WebP).
    public var still = false

    /// The route's prefix.
    package static let prefix = "/images/"

    /// `Content-DPR`: the device pixel ratio an answer was sized for.
    package static let contentDPR = "Content-DPR"

    /// ``dpr`` as `Content-DPR` writes it: at most three decimals, no trailing zeros (`2`, `1.5`).
    package var dprText: String? {
        guard let dpr else { return nil }
        var text = String(format: "%.3f", dpr)
        while text.hasSuffix("0") { text.removeLast() }
        if text.hasSuffix(".") { text.removeLast() }
        return text
    }

    /// The query's parameter names.
    package enum Name: Int, CaseIterable {
        case w, h, mode, tolerance, format, quality, exact, signature, keyID, expiry, dpr, gravity
        case trim, crop, rot, flip, bg, extend, blur, sharpen
        case watermark, wmpos, wmopacity, wmscale, wmmargin, frames

        package var text: String {
            switch self {
            case .w: return "w"
            case .h: return "h"
            case .mode: return "mode"
            case .tolerance: return "tolerance"
            case .format: return "format"
            case .quality: return "quality"
            case .exact: return "exact"
            case .signature: return URLSigner.parameter
            case .keyID: return URLSigner.keyIDParameter
            case .expiry: return URLSigner.expiryParameter
            case .dpr: return "dpr"
            case .gravity: return "gravity"
            case .trim: return "trim"
            case .crop: return "crop"
            case .rot: return "rot"
            case .flip: return "flip"
            case .bg: return "bg"
            case .extend: return "extend"
            case .blur: return "blur"
            case .sharpen: return "sharpen"
            case .watermark: return "watermark"
            case .wmpos: return "wmpos"
            case .wmopacity: return "wmopacity"
            case .wmscale: return "wmscale"
            case .wmmargin: return "wmmargin"
            case .frames: return "frames"
            }
        }

        /// The name spelled by `bytes`, compared byte for byte (names are ASCII). The first
        /// byte (and, where two names share it, the second or the length) picks the one
        /// candidate, without building `allCases`.
        package init?(_ bytes: Substring.UTF8View) {
            let name: Name
            let second = bytes.dropFirst().first
            switch bytes.first {
            case UInt8(ascii: "w"):
                switch (bytes.count, second, bytes.dropFirst(2).first) {
                case (1, _, _): name = .w
                case (_, UInt8(ascii: "a"), _): name = .watermark
                case (_, _, UInt8(ascii: "p")): name = .wmpos
                case (_, _, UInt8(ascii: "o")): name = .wmopacity
                case (_, _, UInt8(ascii: "s")): name = .wmscale
                default: name = .wmmargin
                }
            case UInt8(ascii: "h"): name = .h
            case UInt8(ascii: "m"): name = .mode
            case UInt8(ascii: "t"): name = second == UInt8(ascii: "r") ? .trim : .tolerance
            case UInt8(ascii: "f"): name = second == UInt8(ascii: "l") ? .flip : second == UInt8(ascii: "r") ? .frames : .format
            case UInt8(ascii: "q"): name = .quality
            case UInt8(ascii: "e"): name = bytes.count == 3 ? .expiry : second == UInt8(ascii: "x") && bytes.count == 6 ? .extend : .exact
            case UInt8(ascii: "k"): name = .keyID
            case UInt8(ascii: "d"): name = .dpr
            case UInt8(ascii: "g"): name = .gravity
            case UInt8(ascii: "c"): name = .crop
            case UInt8(ascii: "r"): name = .rot
            case UInt8(ascii: "b"): name = second == UInt8(ascii: "g") ? .bg : .blur
            case URLSigner.parameter.utf8.first: name = second == URLSigner.parameter.utf8.dropFirst().first ? .signature : .sharpen
            default: return nil
            }
            guard name.text.utf8.elementsEqual(bytes) else { return nil }
            self = name
        }
    }

    /// Parses the raw path (after the route prefix) and query of a request target.
    public init(path: Substring, query: Substring?, maxDimension: Int) throws(ServiceError) {
        key = try Self.key(fromPath: path)
        // One slot per known name, filled in a single pass over the query's bytes.
        var values = InlineArray<26, Substring?>(repeating: nil)
        var rest = (query ?? "").utf8[...]
        while !rest.isEmpty {
            let ampersand = rest.firstIndex(of: UInt8(ascii: "&")) ?? rest.endIndex
            let pair = rest[..<ampersand]
            rest = ampersand == rest.endIndex ? rest[ampersand...] : rest[rest.index(after: ampersand)...]
            if pair.isEmpty { continue }
            let equals = pair.firstIndex(of: UInt8(ascii: "="))
            let nameBytes = pair[..<(equals ?? pair.endIndex)]
            guard let name = Name(nameBytes) else {
                throw .badParameter(
                    "unknown parameter \(String(Substring(nameBytes)).debugDescription): use w, h, dpr, mode, gravity, tolerance, format, quality, exact, trim, crop, flip, rot, bg, extend, blur, sharpen, watermark, wmpos, wmopacity, wmscale, wmmargin, frames"
                )
            }
            guard values[name.rawValue] == nil else { throw .badParameter("parameter \(name.text) is given twice") }
            values[name.rawValue] = Self.decoded(equals.map { Substring(pair[pair.index(after: $0)...]) } ?? "")
        }
        func value(_ name: Name) -> Substring? { values[name.rawValue] }
        func dimension(_ name: Name) throws(ServiceError) -> Int? {
            guard let text = value(name) else { return nil }
            guard let value = Int(text), value >= 1, value <= maxDimension else {
                throw .badParameter("\(name.text)=\(text): expected a whole number of pixels, 1…\(maxDimension) (http.maxDimension)")
            }
            return value
        }
        var width = try dimension(.w)
        var height = try dimension(.h)
        if let text = value(.dpr) {
            guard let ratio = Double(text), (1...4).contains(ratio), (ratio * 2).rounded() == ratio * 2 else {
                throw .badParameter("dpr=\(text): expected a device pixel ratio from 1 to 4, in steps of 0.5")
            }
            // The named sides times the ratio, lowered so that neither passes the maximum.
            let named = Swift.max(width ?? 1, height ?? 1)
            let factor = Swift.min(ratio, Double(maxDimension) / Double(named))
            func scaled(_ side: Int?) -> Int? {
                side.map { Swift.min(maxDimension, Swift.max(1, Int((Double($0) * factor).rounded()))) }
            }
            (width, height) = (scaled(width), scaled(height))
            dpr = factor
        }
        var padded = false
        switch value(.mode) {
        case nil, "fit": mode = .fit
        case "fill": mode = .fill
        case "pad":
            // The answer is the box: matched like a fill (same aspect), rendered as a fit padded.
            mode = .fill
            padded = true
        case let other?: throw .badParameter("mode=\(other): expected fit, fill or pad")
        }
        operations = try Self.operations(value, padded: padded)
        watermark = try Self.watermark(value)
        switch value(.frames) {
        case nil: break
        case "1": still = true
        case let other?: throw .badParameter("frames=\(other): expected 1 (an animation's first frame, as a still)")
        }
        if let text = value(.gravity) {
            guard let parsed = Gravity(parsing: text) else {
                throw .badParameter(
                    "gravity=\(text): expected center, north, south, east, west, northeast, northwest, southeast, southwest, smart or fp:X,Y (X and Y in 0…1)"
                )
            }
            guard mode == .fill else {
                throw .badParameter("gravity=\(text) places a crop or a padded image: it needs mode=fill or mode=pad")
            }
            if parsed == .smart, padded || operations.changesGeometry {
                throw .badParameter("gravity=smart chooses a crop of the original: it cannot go with mode=pad, trim, crop, flip or rot")
            }
            gravity = parsed
        }
        switch (width, height) {
        case (nil, nil): throw .badParameter("give w, h or both (the box, in pixels)")
        case (let w?, let h?): box = PixelSize(width: w, height: h)
        case (let w?, nil), (nil, let w?):
            guard mode == .fit else { throw .badParameter("mode=\(padded ? "pad" : "fill") needs both w and h") }
            // One side: the other is unbounded (up to the maximum), so it alone limits the fit.
            box = width != nil ? PixelSize(width: w, height: maxDimension) : PixelSize(width: maxDimension, height: w)
        }
        if let text = value(.tolerance) {
            guard let value = Double(text), (0...1).contains(value) else {
                throw .badParameter("tolerance=\(text): expected a number in 0…1 (0: exactly this size)")
            }
            tolerance = value
        }
        if let text = value(.format) {
            guard let value = ResponseFormat(rawValue: String(text)) else {
                throw .badParameter("format=\(text): expected avif, jxl, webp, jpeg, png, gif or raw")
            }
            format = value
        }
        if let text = value(.quality) {
            guard let value = Int(text), (1...100).contains(value) else {
                throw .badParameter("quality=\(text): expected 1…100")
            }
            quality = value
        }
        switch value(.exact) {
        case nil, "0", "false": exact = false
        case "1", "true", "": exact = true
        case let other?: throw .badParameter("exact=\(other): expected true or false")
        }
    }

    /// The watermark the query names, checked (`nil` without `watermark=`; its placement
    /// parameters alone are a 400).
    private static func watermark(_ value: (Name) -> Substring?) throws(ServiceError) -> WatermarkPlacement? {
        guard let name = value(.watermark) else {
            for other in [Name.wmpos, .wmopacity, .wmscale, .wmmargin] where value(other) != nil {
                throw .badParameter("\(other.text) places a watermark: it needs watermark=NAME")
            }
            return nil
        }
        guard HTTPServiceSettings.isValidPresetName(name) else {
            throw .badParameter("watermark=\(name): expected the name of one of http.watermarks")
        }
        var placement = WatermarkPlacement(name: String(name))
        if let text = value(.wmpos) {
            if text == "tile" {
                placement.gravity = nil
            } else {
                guard let gravity = Gravity(parsing: text), Gravity.named.contains(gravity), gravity != .smart else {
                    throw .badParameter(
                        "wmpos=\(text): expected center, north, south, east, west, northeast, northwest, southeast (default), southwest or tile"
                    )
                }
                placement.gravity = gravity
            }
        }
        if let text = value(.wmopacity) {
            guard let opacity = Double(text), opacity > 0, opacity <= 1 else {
                throw .badParameter("wmopacity=\(text): expected a number in 0…1 (above 0; 1 keeps the watermark's own alpha)")
            }
            placement.opacity = max(0.01, ImageOperations.hundredths(opacity))
        }
        if let text = value(.wmscale) {
            guard let scale = Double(text), scale > 0, scale <= 1 else {
                throw .badParameter("wmscale=\(text): expected the watermark's width as a share of the answer's, above 0 and at most 1")
            }
            placement.scale = max(0.01, ImageOperations.hundredths(scale))
        }
        if let text = value(.wmmargin) {
            guard let margin = Int(text), (0...1000).contains(margin) else {
                throw .badParameter("wmmargin=\(text): expected 0…1000 pixels")
            }
            placement.margin = margin
        }
        return placement
    }

    /// The operations the query names, checked (`padded`: `mode=pad`).
    private static func operations(_ value: (Name) -> Substring?, padded: Bool) throws(ServiceError) -> ImageOperations {
        var operations = ImageOperations()
        if let text = value(.trim) {
            guard let threshold = text.isEmpty ? 10 : Int(text), (0...255).contains(threshold) else {
                throw .badParameter("trim=\(text): expected a threshold of 0…255 levels from the corner's colour (10 when empty)")
            }
            operations.trim = threshold
        }
        if let text = value(.crop) {
            guard let region = CropRegion(parsing: text) else {
                throw .badParameter(
                    "crop=\(text): expected x,y,w,h in whole pixels (w and h at least 1) or in fractions of the sides with a decimal point (0.1,0.1,0.5,0.5)"
                )
            }
            operations.crop = region
        }
        if let text = value(.flip) {
            guard let flip = ImageOperations.Flip(rawValue: String(text)) else {
                throw .badParameter("flip=\(text): expected h (left to right) or v (top to bottom)")
            }
            operations.flip = flip
        }
        if let text = value(.rot) {
            guard let degrees = Int(text), [0, 90, 180, 270].contains(degrees) else {
                throw .badParameter("rot=\(text): expected 0, 90, 180 or 270 (degrees clockwise)")
            }
            operations.quarterTurns = degrees / 90
        }
        if let text = value(.extend) {
            guard padded else { throw .badParameter("extend=\(text) fills a padded box: it needs mode=pad") }
            guard let extend = ImageOperations.PadExtension(rawValue: String(text)) else {
                throw .badParameter("extend=\(text): expected background, copy or mirror")
            }
            operations.pad = extend
        } else if padded {
            operations.pad = .background
        }
        if let text = value(.bg) {
            guard let colour = BackgroundColour(hex: text) else {
                throw .badParameter("bg=\(text): expected RRGGBB or RRGGBBAA in hex")
            }
            operations.background = colour
        }
        func sigma(_ name: Name, _ range: ClosedRange<Double>) throws(ServiceError) -> Double? {
            guard let text = value(name) else { return nil }
            guard let sigma = Double(text), range.contains(sigma) else {
                throw .badParameter(
                    "\(name.text)=\(text): expected a standard deviation of \(ImageOperations.decimal(range.lowerBound))…\(ImageOperations.decimal(range.upperBound)) pixels"
                )
            }
            return ImageOperations.hundredths(sigma)
        }
        operations.blur = try sigma(.blur, ImageOperations.blurRange)
        operations.sharpen = try sigma(.sharpen, ImageOperations.sharpenRange)
        return operations
    }

    /// `text` percent-decoded (as it is when it has no `%`, or when the escapes are invalid).
    package static func decoded(_ text: Substring) -> Substring {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        return Substring(PercentDecoding.decode(text) ?? String(text))
    }

    /// Checks an already decoded key against the same rules: no empty, `.` or `..` segment,
    /// no NUL (an IIIF identifier, decoded once, may hold `/`).
    package static func checkKey(_ key: String) throws(ServiceError) {
        guard allSegmentsAllowed(Substring(key).utf8) else {
            throw ServiceError(
                .badRequest, "bad_key",
                "the key \(key.debugDescription) has an empty, `.` or `..` segment or a NUL: keys name files inside the source only")
        }
    }

    /// Whether every segment of `bytes`, cut at `/` in place (no array), ``isAllowed(segment:)``.
    static func allSegmentsAllowed(_ bytes: Substring.UTF8View) -> Bool {
        var start = bytes.startIndex
        while true {
            let slash = bytes[start...].firstIndex(of: UInt8(ascii: "/")) ?? bytes.endIndex
            guard isAllowed(segment: bytes[start..<slash]) else { return false }
            if slash == bytes.endIndex { return true }
            start = bytes.index(after: slash)
        }
    }

    /// Whether `segment` (decoded) may be part of a key: not empty, `.` or `..`, no `/` or NUL.
    package static func isAllowed(segment: Substring.UTF8View) -> Bool {
        !segment.isEmpty && !segment.elementsEqual(".".utf8) && !segment.elementsEqual("..".utf8)
            && !segment.contains(UInt8(ascii: "/")) && !segment.contains(0)
    }

    /// The key: path segments, percent-decoded and checked. A path without `%` (the common
    /// case) is checked in place, byte by byte, and copied once.
    package static func key(fromPath path: Substring) throws(ServiceError) -> String {
        func refused() -> ServiceError {
            ServiceError(
                .badRequest, "bad_key",
                "the key \(String(path).debugDescription) has an empty, `.` or `..` segment: keys name files inside the source only")
        }
        let bytes = path.utf8
        guard bytes.contains(UInt8(ascii: "%")) else {
            guard allSegmentsAllowed(bytes) else { throw refused() }
            return String(path)
        }
        var segments: [String] = []
        for raw in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            // A segment without `%` comes back as it is.
            guard let segment = PercentDecoding.decode(Substring(raw)) else {
                throw ServiceError(
                    .badRequest, "bad_key", "the key segment \(String(Substring(raw)).debugDescription) is not valid percent-encoding")
            }
            guard isAllowed(segment: Substring(segment).utf8) else { throw refused() }
            segments.append(segment)
        }
        return segments.joined(separator: "/")
    }
}
