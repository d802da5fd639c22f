import Strata

/// The region parameter of an IIIF image request: `full`, `square`, `x,y,w,h` (pixels of the
/// original) or `pct:x,y,w,h` (percentages of its sides). The same syntax in 2.1 and 3.0.
///
/// Parsing is pure and allocation-light; ``resolve(in:squareFocus:)`` turns it into whole pixels of a
/// given original, clipped at the right and bottom edges as the specification says.
public enum IIIFRegion: Sendable, Hashable {
    case full
    case square
    case pixels(x: Int, y: Int, width: Int, height: Int)
    case percent(x: Double, y: Double, width: Double, height: Double)

    /// Parses the region segment; a malformed one is a 400 naming the region.
    public init(parsing text: Substring) throws(ServiceError) {
        switch text {
        case "full": self = .full
        case "square": self = .square
        default:
            if text.hasPrefix("pct:") {
                guard let fields = IIIFNumbers.fields(text.dropFirst(4), count: 4),
                    let x = IIIFNumbers.decimal(fields[0]), let y = IIIFNumbers.decimal(fields[1]),
                    let w = IIIFNumbers.decimal(fields[2]), let h = IIIFNumbers.decimal(fields[3])
                else { throw Self.malformed(text) }
                guard w > 0, h > 0 else { throw Self.empty(text) }
                self = .percent(x: x, y: y, width: w, height: h)
            } else {
                guard let fields = IIIFNumbers.fields(text, count: 4),
                    let x = IIIFNumbers.whole(fields[0]), let y = IIIFNumbers.whole(fields[1]),
                    let w = IIIFNumbers.whole(fields[2]), let h = IIIFNumbers.whole(fields[3])
                else { throw Self.malformed(text) }
                guard w > 0, h > 0 else { throw Self.empty(text) }
                self = .pixels(x: x, y: y, width: w, height: h)
            }
        }
    }

    /// The region in whole pixels of an original of `size`: a region that crosses the right
    /// or bottom edge is clipped to it; one that starts outside the image is a 400.
    /// Percentages are rounded to the nearest pixel.
    /// `square` is the largest square, centred on `squareFocus` and kept inside the image.
    public func resolve(in size: PixelSize, squareFocus: CropFocus = .center) throws(ServiceError) -> IIIFRect {
        let (W, H) = (size.width, size.height)
        let x: Int, y: Int, w: Int, h: Int
        switch self {
        case .full:
            return IIIFRect(x: 0, y: 0, width: W, height: H)
        case .square:
            let side = min(W, H)
            func origin(_ focus: Double, _ length: Int) -> Int {
                let slack = length - side
                if focus == 0.5 { return slack / 2 }
                return min(slack, max(0, Int((focus * Double(length) - Double(side) / 2).rounded())))
            }
            return IIIFRect(x: origin(squareFocus.x, W), y: origin(squareFocus.y, H), width: side, height: side)
        case .pixels(let px, let py, let pw, let ph):
            (x, y, w, h) = (px, py, pw, ph)
        case .percent(let px, let py, let pw, let ph):
            x = Int((px * Double(W) / 100).rounded())
            y = Int((py * Double(H) / 100).rounded())
            // The far edge rounded, so that adjacent percentage regions tile without gaps.
            w = Int(((px + pw) * Double(W) / 100).rounded()) - x
            h = Int(((py + ph) * Double(H) / 100).rounded()) - y
        }
        guard x < W, y < H else {
            throw ServiceError(.badRequest, "bad_region", "the region starts outside the \(W)×\(H) image")
        }
        let clipped = IIIFRect(x: x, y: y, width: min(w, W - x), height: min(h, H - y))
        guard clipped.width > 0, clipped.height > 0 else {
            throw ServiceError(.badRequest, "bad_region", "the region is less than a pixel of the \(W)×\(H) image")
        }
        return clipped
    }

    package static func malformed(_ text: Substring) -> ServiceError {
        ServiceError(
            .badRequest, "bad_region",
            "region \(String(text).debugDescription): expected full, square, x,y,w,h or pct:x,y,w,h")
    }

    package static func empty(_ text: Substring) -> ServiceError {
        ServiceError(.badRequest, "bad_region", "region \(String(text).debugDescription): width and height must be above zero")
    }
}
