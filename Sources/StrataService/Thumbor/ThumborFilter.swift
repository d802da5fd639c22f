import Strata

/// One of thumbor's filters (`filters:NAME(ARGS):…`) that Strata answers, its arguments read as
/// thumbor's `BaseFilter` patterns read them (numbers, decimals, booleans, quoted or bare
/// strings, each with optional spaces around it; trailing arguments with defaults optional).
///
/// Where thumbor silently skips a filter it does not know, or one whose arguments do not match
/// its pattern, Strata refuses the URL (400) naming the filter: a URL that asks for something is
/// never answered without it (docs/Thumbor.md lists the filters Strata does not have).
package enum ThumborFilter: Sendable, Hashable {
    /// What `fill()` fills the box with.
    package enum Fill: Sendable, Hashable {
        case colour(BackgroundColour)
        case transparent
        /// The image's median colour.
        case auto
        /// The image itself, stretched to the box and blurred.
        case blur
    }

    /// `watermark()`'s position along one side: pixels from the start (negative: from the
    /// end), a percentage of the side (`20p`), centred, or repeated.
    package enum WatermarkPosition: Sendable, Hashable {
        case pixels(Int)
        case percent(Int, fromEnd: Bool)
        case center
        case repeated
    }

    /// `watermark(KEY, X, Y, ALPHA[, W_RATIO, H_RATIO])`.
    package struct Watermark: Sendable, Hashable {
        package var key: String
        package var x: WatermarkPosition
        package var y: WatermarkPosition
        /// Transparency, 0 (opaque) … 100 (invisible), subtracted from the mark's alpha.
        package var alpha: Int
        /// The mark's largest width and height as percentages of the image (`nil`: none).
        package var widthRatio: Int?
        package var heightRatio: Int?
    }

    case format(ResponseFormat)
    case quality(Int)
    case fill(Fill, transparentToo: Bool)
    case backgroundColor(BackgroundColour)
    case blur(radius: Int, sigma: Double)
    case sharpen(amount: Double, radius: Double, luminanceOnly: Bool)
    case watermark(Watermark)
    case grayscale
    /// Counter-clockwise degrees, a multiple of 90 in 0…270 (others are ignored by thumbor).
    case rotate(Int)
    case noUpscale
    case upscale
    case stretch
    case focal(ThumborURL.Crop)
    case stripICC
    case stripEXIF
    case maxBytes(Int)
    case roundCorner(a: Int, b: Int, red: Int, green: Int, blue: Int, transparent: Bool)
    case brightness(Int)
    case contrast(Int)
    case rgb(Int, Int, Int)
    case saturation(Double)
    case proportion(Double)

    /// thumbor's filters Strata does not answer (a 400 names them): docs/Thumbor.md.
    package static let unsupported: Set<String> = [
        "autojpg", "colorize", "convolution", "curve", "equalize", "extract_focal", "frame", "max_age", "noise", "redeye", "cover",
    ]

    /// The names Strata answers, for refusals.
    package static let names = [
        "format", "quality", "fill", "background_color", "blur", "sharpen", "watermark", "grayscale", "rotate", "no_upscale", "upscale",
        "stretch", "focal", "strip_icc", "strip_exif", "max_bytes", "round_corner", "brightness", "contrast", "rgb", "saturation",
        "proportion",
    ]

    /// The filters of `text` (what follows `filters:`, percent-decoded), in order: split at
    /// `"):"` as thumbor splits them. An unknown filter, one Strata does not have, or arguments
    /// that do not match are a 400 naming the filter.
    package static func parse(_ text: Substring) throws(ServiceError) -> [ThumborFilter] {
        var filters: [ThumborFilter] = []
        var rest = text
        while !rest.isEmpty {
            let end = rest.firstRange(of: "):")
            var part = rest[..<(end?.lowerBound ?? rest.endIndex)]
            if let end {
                part = rest[..<rest.index(after: end.lowerBound)]
                rest = rest[end.upperBound...]
            } else {
                rest = rest[rest.endIndex...]
            }
            filters.append(try filter(part))
        }
        return filters
    }

    /// One `NAME(ARGS)`.
    static func filter(_ text: Substring) throws(ServiceError) -> ThumborFilter {
        let open = text.firstIndex(of: "(")
        let name = String(text[..<(open ?? text.endIndex)])
        guard let open, let close = text.lastIndex(of: ")"), close > open else {
            throw refusal(name, "expected \(name)(…)")
        }
        let arguments = Arguments(name: name, text: text[text.index(after: open)..<close])
        return try arguments.filter()
    }

    static func refusal(_ name: String, _ why: String) -> ServiceError {
        if unsupported.contains(name) {
            return ServiceError(
                .badRequest, "unsupported_filter",
                "filters:\(name)() is one of thumbor's filters that Strata does not answer (docs/Thumbor.md lists them)")
        }
        guard names.contains(name) else {
            return ServiceError(
                .badRequest, "unknown_filter",
                "filters:\(name.debugDescription) is not a filter Strata knows (it answers \(names.joined(separator: ", ")))")
        }
        return ServiceError(.badRequest, "bad_filter", "filters:\(name)(): \(why)")
    }

    /// A filter's argument list, split at commas (not inside a quoted string) and trimmed.
    struct Arguments {
        let name: String
        let values: [Substring]

        init(name: String, text: Substring) {
            self.name = name
            // Trimmed as they are cut: one array (a filter has a few arguments).
            var values: [Substring] = []
            values.reserveCapacity(4)
            var start = text.startIndex
            var index = text.startIndex
            var quoted = false
            while index < text.endIndex {
                let character = text[index]
                if character == "'" {
                    quoted.toggle()
                } else if character == ",", !quoted {
                    values.append(text[start..<index].trimmingSpaces)
                    start = text.index(after: index)
                }
                index = text.index(after: index)
            }
            if start < text.endIndex || !values.isEmpty { values.append(text[start...].trimmingSpaces) }
            self.values = values
        }

        func refuse(_ why: String) -> ServiceError { ThumborFilter.refusal(name, why) }

        /// The arguments' count checked: `required` at least, `required + optional` at most.
        func count(_ required: Int, optional: Int = 0, _ form: String) throws(ServiceError) {
            guard (required...(required + optional)).contains(values.count), !values.contains(where: \.isEmpty) || values.count == 0
            else { throw refuse("expected \(name)(\(form))") }
        }

        func integer(_ index: Int, _ form: String, positive: Bool = false, nonZero: Bool = false) throws(ServiceError) -> Int {
            let text = values[index]
            let digits = text.hasPrefix("-") && !positive ? text.dropFirst() : text
            guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { throw refuse("expected \(name)(\(form))") }
            let value = Int(text) ?? (text.hasPrefix("-") ? Int.min : Int.max)
            if nonZero, value == 0 { throw refuse("expected \(name)(\(form)), the first above 0") }
            return value
        }

        func decimal(_ index: Int, _ form: String) throws(ServiceError) -> Double {
            let text = values[index]
            let negative = text.hasPrefix("-")
            var body = String(negative ? text.dropFirst() : text)
            guard body.contains(where: \.isNumber), body.filter({ $0 == "." }).count <= 1,
                body.allSatisfy({ $0 == "." || ($0.isASCII && $0.isNumber) })
            else { throw refuse("expected \(name)(\(form))") }
            if body.hasPrefix(".") { body = "0" + body }
            if body.hasSuffix(".") { body += "0" }
            guard let value = Double(body), value.isFinite else { throw refuse("expected \(name)(\(form))") }
            return negative ? -value : value
        }

        func boolean(_ index: Int, _ form: String) throws(ServiceError) -> Bool {
            switch values[index] {
            case "true", "True", "1": return true
            case "false", "False", "0": return false
            default: throw refuse("expected \(name)(\(form)), with true or false")
            }
        }

        /// A `String` argument: `'…'` has its quotes removed.
        func string(_ index: Int) -> Substring {
            let text = values[index]
            if text.count >= 3, text.hasPrefix("'"), text.hasSuffix("'") { return text.dropFirst().dropLast() }
            return text
        }

        func colour(_ index: Int, _ form: String) throws(ServiceError) -> BackgroundColour {
            guard let colour = ThumborColours.colour(values[index]) else {
                throw refuse("\(values[index].debugDescription) is not a colour: a CSS name (red) or hex digits (ff0000)")
            }
            return colour
        }

        func position(_ index: Int) throws(ServiceError) -> WatermarkPosition {
            let text = values[index]
            switch text {
            case "center": return .center
            case "repeat": return .repeated
            default:
                let fromEnd = text.hasPrefix("-")
                let body = fromEnd ? text.dropFirst() : text
                let percent = body.hasSuffix("p")
                let digits = percent ? body.dropLast() : body
                guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }) else {
                    throw refuse("a position is pixels (10, -10), a percentage (20p, -20p), center or repeat, not \(text.debugDescription)")
                }
                let value = Int(digits) ?? Int.max
                return percent ? .percent(value, fromEnd: fromEnd) : .pixels(fromEnd ? -value : value)
            }
        }

        func filter() throws(ServiceError) -> ThumborFilter {
            switch name {
            case "format":
                try count(1, "png|jpeg|webp|gif|avif")
                switch string(0).lowercased() {
                case "png": return .format(.png)
                case "jpeg", "jpg": return .format(.jpeg)
                case "webp": return .format(.webp)
                case "gif": return .format(.gif)
                case "avif": return .format(.avif)
                case let other: throw refuse("\(other.debugDescription): Strata writes png, jpeg, webp, gif and avif")
                }
            case "quality":
                try count(1, "0…100")
                return .quality(try integer(0, "0…100", positive: true))
            case "fill":
                try count(1, optional: 1, "COLOUR|transparent|auto|blur[, FILL_TRANSPARENT]")
                let transparentToo = values.count > 1 ? try boolean(1, "COLOUR, FILL_TRANSPARENT") : false
                switch values[0] {
                case "transparent": return .fill(.transparent, transparentToo: transparentToo)
                case "auto": return .fill(.auto, transparentToo: transparentToo)
                case "blur": return .fill(.blur, transparentToo: transparentToo)
                default: return .fill(.colour(try colour(0, "COLOUR")), transparentToo: transparentToo)
                }
            case "background_color":
                try count(1, "COLOUR")
                return .backgroundColor(try colour(0, "COLOUR"))
            case "blur":
                try count(1, optional: 1, "RADIUS[, SIGMA]")
                let radius = try integer(0, "RADIUS[, SIGMA]", positive: true, nonZero: true)
                return .blur(radius: radius, sigma: values.count > 1 ? try decimal(1, "RADIUS, SIGMA") : 0)
            case "sharpen":
                try count(3, "AMOUNT, RADIUS, LUMINANCE_ONLY")
                return .sharpen(
                    amount: try decimal(0, "AMOUNT, RADIUS, LUMINANCE_ONLY"), radius: try decimal(1, "AMOUNT, RADIUS, LUMINANCE_ONLY"),
                    luminanceOnly: try boolean(2, "AMOUNT, RADIUS, LUMINANCE_ONLY"))
            case "watermark":
                try count(4, optional: 2, "IMAGE, X, Y, ALPHA[, W_RATIO, H_RATIO]")
                func ratio(_ index: Int) throws(ServiceError) -> Int? {
                    guard values.count > index, values[index] != "none" else { return nil }
                    let value = try integer(index, "IMAGE, X, Y, ALPHA, W_RATIO|none, H_RATIO|none")
                    return value == 0 ? nil : value
                }
                return .watermark(
                    Watermark(
                        key: String(string(0)), x: try position(1), y: try position(2),
                        alpha: try integer(3, "IMAGE, X, Y, ALPHA (0…100)", positive: true), widthRatio: try ratio(4),
                        heightRatio: try ratio(5)))
            case "grayscale", "no_upscale", "upscale", "stretch", "strip_icc", "strip_exif":
                try count(0, "")
                switch name {
                case "grayscale": return .grayscale
                case "no_upscale": return .noUpscale
                case "upscale": return .upscale
                case "stretch": return .stretch
                case "strip_icc": return .stripICC
                default: return .stripEXIF
                }
            case "rotate":
                try count(1, "DEGREES")
                let degrees = try integer(0, "DEGREES")
                guard degrees % 90 == 0 else { throw refuse("\(degrees): Strata turns by multiples of 90 degrees") }
                return .rotate(((degrees % 360) + 360) % 360)
            case "focal":
                try count(1, "LEFTxTOP:RIGHTxBOTTOM")
                guard let crop = ThumborURL(path: "unsafe/\(string(0))/x")?.crop else {
                    throw refuse("expected focal(LEFTxTOP:RIGHTxBOTTOM) in pixels of the original")
                }
                return .focal(crop)
            case "max_bytes":
                try count(1, "BYTES")
                return .maxBytes(try integer(0, "BYTES", positive: true))
            case "round_corner":
                try count(4, optional: 1, "A|B, R, G, B[, TRANSPARENT]")
                let radii = values[0].split(separator: "|", omittingEmptySubsequences: false)
                guard (1...2).contains(radii.count), radii.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }) else {
                    throw refuse("expected round_corner(A|B, R, G, B[, TRANSPARENT]), A and B whole pixels")
                }
                let a = Int(radii[0]) ?? Int.max
                let form = "A|B, R, G, B[, TRANSPARENT]"
                return .roundCorner(
                    a: a, b: radii.count > 1 ? Int(radii[1]) ?? Int.max : a, red: try integer(1, form, positive: true),
                    green: try integer(2, form, positive: true), blue: try integer(3, form, positive: true),
                    transparent: values.count > 4 ? try boolean(4, form) : false)
            case "brightness", "contrast":
                try count(1, "-100…100")
                let value = try integer(0, "-100…100")
                return name == "brightness" ? .brightness(value) : .contrast(value)
            case "rgb":
                try count(3, "R, G, B")
                return .rgb(try integer(0, "R, G, B"), try integer(1, "R, G, B"), try integer(2, "R, G, B"))
            case "saturation":
                try count(1, "CHANGE")
                return .saturation(try decimal(0, "CHANGE"))
            case "proportion":
                try count(1, "SHARE")
                return .proportion(try decimal(0, "SHARE"))
            default:
                throw refuse("")
            }
        }
    }
}

extension Substring {
    /// Without the spaces and tabs around it (thumbor's `\s*`).
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first.isWhitespace { text = text.dropFirst() }
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        return text
    }
}
