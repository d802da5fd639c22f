/// A thumbor URL's path, parsed as thumbor 7 parses it (libthumbor's `Url.regex()`, anchored at
/// the end as tornado anchors a route):
///
/// `/(unsafe|HASH)/[debug/][meta/][trim[:top-left|:bottom-right][:N]/][AxB:CxD/]`
/// `[adaptive-][full-]fit-in/][-]WxH/[left|right|center/][top|bottom|middle/][smart/]`
/// `[filters:NAME(ARGS):…/]IMAGE`
///
/// Every part is optional and ends at a `/`; the image is the rest, which may hold `/` itself.
/// Where the regex would backtrack (a part taken that leaves no image: `/unsafe/smart/` is the
/// image `smart/`), this does the same, so each case of thumbor's own parser tests gives the same
/// parse. Values are the raw text of the path: the image and filters are percent-decoded by the
/// route, not here.
///
/// Cost: one pass over the path, and a few small strings.
package struct ThumborURL: Sendable, Hashable {
    /// What opens the path: `unsafe/`, a signature, or neither (the group is optional: thumbor
    /// then refuses the URL, 400).
    package enum Authority: Sendable, Hashable {
        case none
        case unsafe
        case signature(Substring)
    }

    /// A `WxH` side: absent (0), pixels, or `orig` (the original's).
    package enum Side: Sendable, Hashable {
        case pixels(Int)
        case orig

        package static let absent = Side.pixels(0)

        /// Whether the side was given (thumbor's truthiness: 0 is not).
        package var isGiven: Bool { self != .absent }
    }

    package enum HorizontalAlignment: String, Sendable, Hashable { case left, center, right }
    package enum VerticalAlignment: String, Sendable, Hashable { case top, middle, bottom }

    /// `trim[:top-left|:bottom-right][:N]`: the corner whose colour is the border's, and the
    /// tolerance (0 when the URL names none, as thumbor reads it).
    package struct Trim: Sendable, Hashable {
        package enum Corner: String, Sendable, Hashable {
            case topLeft = "top-left"
            case bottomRight = "bottom-right"
        }
        package var corner: Corner = .topLeft
        /// Whether the URL named the corner (kept to write the URL back as it was).
        package var namedCorner = false
        package var tolerance: Int?

        package var text: String {
            var text = "trim"
            if namedCorner { text += ":" + corner.rawValue }
            if let tolerance { text += ":\(tolerance)" }
            return text
        }
    }

    /// `AxB:CxD`: the manual crop's corners in the original's pixels.
    package struct Crop: Sendable, Hashable {
        package var left: Int
        package var top: Int
        package var right: Int
        package var bottom: Int
    }

    package var authority = Authority.none
    package var debug = false
    package var meta = false
    package var trim: Trim?
    package var crop: Crop?
    package var adaptive = false
    package var full = false
    package var fitIn = false
    package var width = Side.absent
    package var height = Side.absent
    package var horizontalFlip = false
    package var verticalFlip = false
    package var halign = HorizontalAlignment.center
    package var valign = VerticalAlignment.middle
    package var smart = false
    /// Whether the path had a `WxH`, an alignment segment: a part that says the default (`x`,
    /// `center`, `middle`) still takes its segment, so the URL is written back with it.
    package var namedSize = false
    package var namedHalign = false
    package var namedValign = false
    /// The filters' text between `filters:` and the `/` after its last `)`, raw.
    package var filters: Substring = ""
    /// The image part, raw (percent-encoded as sent).
    package var image: Substring = ""
    /// What a signature signs: the path after `/HASH/` (thumbor signs the raw path).
    package var signed: Substring = ""

    package init() {}

    /// Parses `path` (the request's path, or what follows the route's prefix: a leading `/` is
    /// optional, as in thumbor's regex). `nil` where thumbor's route does not match: an empty
    /// image, or a line feed anywhere (the regex's `.` takes none).
    package init?(path: Substring) {
        let bytes = Array(path.utf8)
        guard !bytes.contains(UInt8(ascii: "\n")) else { return nil }
        var parser = Parser(bytes: bytes, text: path)
        var start = 0
        if bytes.first == UInt8(ascii: "/") { start = 1 }
        // The regex's leading `/?` gives its `/` back when nothing else matches (`/` is the image `/`).
        guard parser.match(part: 0, at: start) || (start == 1 && parser.match(part: 0, at: 0)) else { return nil }
        self = parser.url
    }

    /// The URL written back as libthumbor's `Url.generate_options` writes its options, then the
    /// image: parsing it gives this parse again (the authority aside, which it leaves out).
    package var options: String {
        var parts: [String] = []
        if debug { parts.append("debug") }
        if meta { parts.append("meta") }
        if let trim { parts.append(trim.text) }
        if let crop { parts.append("\(crop.left)x\(crop.top):\(crop.right)x\(crop.bottom)") }
        if fitIn { parts.append((adaptive ? "adaptive-" : "") + (full ? "full-" : "") + "fit-in") }
        func side(_ side: Side) -> String {
            switch side {
            case .pixels(let value): value == 0 ? "" : String(value)
            case .orig: "orig"
            }
        }
        if namedSize || width.isGiven || height.isGiven || horizontalFlip || verticalFlip {
            parts.append((horizontalFlip ? "-" : "") + side(width) + "x" + (verticalFlip ? "-" : "") + side(height))
        }
        if namedHalign || halign != .center { parts.append(halign.rawValue) }
        if namedValign || valign != .middle { parts.append(valign.rawValue) }
        if smart { parts.append("smart") }
        if !filters.isEmpty { parts.append("filters:" + filters) }
        parts.append(String(image))
        return parts.joined(separator: "/")
    }

    /// The regex's groups in order, matched with its backtracking: each optional part is tried
    /// taken first, then skipped; the signature's lazy `.+?` and the filters' `.+?\)` try their
    /// shortest match first. Only an empty image fails a match, so backtracking is shallow.
    private struct Parser {
        let bytes: [UInt8]
        let text: Substring
        var url = ThumborURL()

        init(bytes: [UInt8], text: Substring) {
            self.bytes = bytes
            self.text = text
        }

        func slice(_ range: Range<Int>) -> Substring {
            let utf8 = text.utf8
            let lower = utf8.index(utf8.startIndex, offsetBy: range.lowerBound)
            let upper = utf8.index(lower, offsetBy: range.count)
            return Substring(utf8[lower..<upper])
        }

        /// The end of the segment starting at `start` (the index of its `/`), `nil` when no `/`
        /// follows.
        func segmentEnd(_ start: Int) -> Int? {
            var index = start
            while index < bytes.count {
                if bytes[index] == UInt8(ascii: "/") { return index }
                index += 1
            }
            return nil
        }

        func segment(_ start: Int) -> (ArraySlice<UInt8>, next: Int)? {
            guard let end = segmentEnd(start) else { return nil }
            return (bytes[start..<end], end + 1)
        }

        /// Whether the parts from `part` on match the path from `position` to its end.
        mutating func match(part: Int, at position: Int) -> Bool {
            let saved = url
            switch part {
            case 0:
                // (?:(?:(?P<unsafe>unsafe)|(?P<hash>.+?))/)?
                if let (segment, next) = segment(position), segment.elementsEqual("unsafe".utf8) {
                    url.authority = .unsafe
                    if match(part: 1, at: next) { return true }
                    url = saved
                }
                var slash = position + 1
                while slash < bytes.count {
                    if bytes[slash] == UInt8(ascii: "/") {
                        url.authority = .signature(slice(position..<slash))
                        url.signed = slice((slash + 1)..<bytes.count)
                        if match(part: 1, at: slash + 1) { return true }
                        url = saved
                    }
                    slash += 1
                }
                return match(part: 1, at: position)
            case 1...9:
                // debug/ meta/ trim/ crop/ fit-in/ WxH/ halign/ valign/ smart/: one segment each.
                if let (segment, next) = segment(position), take(part, segment) {
                    if match(part: part + 1, at: next) { return true }
                    url = saved
                }
                return match(part: part + 1, at: position)
            case 10:
                // (?:filters:(?P<filters>.+?\))/)?
                let prefix = "filters:".utf8
                if bytes[position...].starts(with: prefix) {
                    let start = position + prefix.count
                    var close = start + 1
                    while close + 1 < bytes.count {
                        if bytes[close] == UInt8(ascii: ")"), bytes[close + 1] == UInt8(ascii: "/") {
                            url.filters = slice(start..<(close + 1))
                            if match(part: 11, at: close + 2) { return true }
                            url = saved
                        }
                        close += 1
                    }
                }
                return match(part: 11, at: position)
            default:
                // (?P<image>.+)$
                guard position < bytes.count else { return false }
                url.image = slice(position..<bytes.count)
                return true
            }
        }

        /// Whether `segment` is part `part` (1…9) of the grammar; if it is, sets it on the URL.
        mutating func take(_ part: Int, _ segment: ArraySlice<UInt8>) -> Bool {
            func word(_ text: String) -> Bool { segment.elementsEqual(text.utf8) }
            let text = { String(decoding: segment, as: UTF8.self) }
            switch part {
            case 1 where word("debug"): url.debug = true
            case 2 where word("meta"): url.meta = true
            case 3:
                guard let trim = Self.trim(segment) else { return false }
                url.trim = trim
            case 4:
                guard let crop = Self.crop(segment) else { return false }
                url.crop = crop
            case 5:
                guard let (adaptive, full) = Self.fitIn(segment) else { return false }
                (url.fitIn, url.adaptive, url.full) = (true, adaptive, full)
            case 6:
                guard let dimensions = Self.dimensions(segment) else { return false }
                (url.horizontalFlip, url.width, url.verticalFlip, url.height) = dimensions
                url.namedSize = true
            case 7:
                guard let align = HorizontalAlignment(rawValue: text()) else { return false }
                (url.halign, url.namedHalign) = (align, true)
            case 8:
                guard let align = VerticalAlignment(rawValue: text()) else { return false }
                (url.valign, url.namedValign) = (align, true)
            case 9 where word("smart"): url.smart = true
            default: return false
            }
            return true
        }

        /// `trim(?::(?:top-left|bottom-right))?(?::\d+)?`
        static func trim(_ segment: ArraySlice<UInt8>) -> Trim? {
            guard segment.starts(with: "trim".utf8) else { return nil }
            var rest = segment.dropFirst(4)
            var trim = Trim()
            for corner in [Trim.Corner.topLeft, .bottomRight] where rest.starts(with: (":" + corner.rawValue).utf8) {
                trim.corner = corner
                trim.namedCorner = true
                rest = rest.dropFirst(corner.rawValue.utf8.count + 1)
                break
            }
            if rest.first == UInt8(ascii: ":") {
                let digits = rest.dropFirst()
                guard let value = number(digits) else { return nil }
                trim.tolerance = value
                rest = []
            }
            return rest.isEmpty ? trim : nil
        }

        /// `\d+x\d+:\d+x\d+`
        static func crop(_ segment: ArraySlice<UInt8>) -> Crop? {
            let halves = segment.split(separator: UInt8(ascii: ":"), omittingEmptySubsequences: false)
            guard halves.count == 2 else { return nil }
            func pair(_ half: ArraySlice<UInt8>) -> (Int, Int)? {
                let sides = half.split(separator: UInt8(ascii: "x"), omittingEmptySubsequences: false)
                guard sides.count == 2, let a = number(sides[0]), let b = number(sides[1]) else { return nil }
                return (a, b)
            }
            guard let (left, top) = pair(halves[0]), let (right, bottom) = pair(halves[1]) else { return nil }
            return Crop(left: left, top: top, right: right, bottom: bottom)
        }

        /// `(adaptive-)?(full-)?fit-in`
        static func fitIn(_ segment: ArraySlice<UInt8>) -> (adaptive: Bool, full: Bool)? {
            var rest = segment
            let adaptive = rest.starts(with: "adaptive-".utf8)
            if adaptive { rest = rest.dropFirst(9) }
            let full = rest.starts(with: "full-".utf8)
            if full { rest = rest.dropFirst(5) }
            return rest.elementsEqual("fit-in".utf8) ? (adaptive, full) : nil
        }

        /// `(-)?(\d+|orig)?x(-)?(\d+|orig)?`
        static func dimensions(_ segment: ArraySlice<UInt8>) -> (Bool, Side, Bool, Side)? {
            guard let x = segment.firstIndex(of: UInt8(ascii: "x")) else { return nil }
            func side(_ text: ArraySlice<UInt8>) -> (flip: Bool, side: Side)? {
                var text = text
                let flip = text.first == UInt8(ascii: "-")
                if flip { text = text.dropFirst() }
                if text.isEmpty { return (flip, .absent) }
                if text.elementsEqual("orig".utf8) { return (flip, .orig) }
                guard let value = number(text) else { return nil }
                return (flip, .pixels(value))
            }
            guard let (hFlip, width) = side(segment[..<x]), let (vFlip, height) = side(segment[(x + 1)...]) else { return nil }
            return (hFlip, width, vFlip, height)
        }

        /// `\d+` as a number, saturating at `Int.max` (Python's integers have no bound; a side
        /// that large is refused later, by the route's limits).
        static func number(_ digits: ArraySlice<UInt8>) -> Int? {
            guard !digits.isEmpty else { return nil }
            var value = 0
            for digit in digits {
                guard digit >= UInt8(ascii: "0"), digit <= UInt8(ascii: "9") else { return nil }
                let (times, overflow) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(Int(digit - UInt8(ascii: "0")))
                value = overflow || overflow2 ? Int.max : sum
            }
            return value
        }
    }
}
