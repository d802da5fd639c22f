/// Where a `fill` crop sits in the source when the source's aspect differs from the box's.
///
/// - ``center`` (the default) and the eight compass points keep that part of the image: `north`
///   keeps the top edge, `southeast` the bottom-right corner.
/// - ``focalPoint(x:y:)``: a point (in hundredths of the width and height, 0…100) that stays in
///   the crop, as near its centre as the edges allow. Hundredths bound the variants a client
///   can make and let a purge name them all; a step of 1 % of a side moves a crop very little.
/// - ``smart``: a crop chosen by ``Saliency`` (edges, saturation and skin tones at a small
///   scale), computed from a small image, not from the original.
///
/// Every gravity is a focus (``focus``) the crop is centred on and then clamped to the source:
/// `north` is the focus (0.5, 0), `southeast` (1, 1). The gravity is part of a variant's
/// identity (``CacheKey/init(_:colour:gravity:)``). Cost: none — a value.
public enum Gravity: Hashable, Sendable, CustomStringConvertible {
    case center, north, south, east, west, northeast, northwest, southeast, southwest
    /// A focal point in hundredths (0…100) of the width and height.
    case focalPoint(x: Int, y: Int)
    case smart

    /// The named gravities, as the service's `gravity=` spells them.
    public static let named: [Gravity] = [
        .center, .north, .south, .east, .west, .northeast, .northwest, .southeast, .southwest, .smart,
    ]

    /// The fixed point the crop is centred on (0…1 each way), `nil` for ``smart`` (which needs
    /// the image).
    public var focus: CropFocus? {
        switch self {
        case .center: return CropFocus(x: 0.5, y: 0.5)
        case .north: return CropFocus(x: 0.5, y: 0)
        case .south: return CropFocus(x: 0.5, y: 1)
        case .east: return CropFocus(x: 1, y: 0.5)
        case .west: return CropFocus(x: 0, y: 0.5)
        case .northeast: return CropFocus(x: 1, y: 0)
        case .northwest: return CropFocus(x: 0, y: 0)
        case .southeast: return CropFocus(x: 1, y: 1)
        case .southwest: return CropFocus(x: 0, y: 1)
        case .focalPoint(let x, let y): return CropFocus(x: Double(x) / 100, y: Double(y) / 100)
        case .smart: return nil
        }
    }

    /// `center`, `north`, …, `smart`, or `fp:X,Y` with X and Y in 0…1 (rounded to hundredths).
    public var description: String {
        switch self {
        case .center: return "center"
        case .north: return "north"
        case .south: return "south"
        case .east: return "east"
        case .west: return "west"
        case .northeast: return "northeast"
        case .northwest: return "northwest"
        case .southeast: return "southeast"
        case .southwest: return "southwest"
        case .smart: return "smart"
        case .focalPoint(let x, let y): return "fp:\(Self.decimal(x)),\(Self.decimal(y))"
        }
    }

    /// Parses what ``description`` writes (`fp:` coordinates as decimals in 0…1, rounded to
    /// hundredths); `nil` for anything else.
    public init?(parsing input: some StringProtocol) {
        let text = Substring(input)
        if let named = Self.named.first(where: { $0.description == text }) {
            self = named
            return
        }
        guard text.hasPrefix("fp:") else { return nil }
        let parts = text.dropFirst(3).split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count == 2, let x = Self.hundredths(parts[0]), let y = Self.hundredths(parts[1]) else { return nil }
        self = .focalPoint(x: x, y: y)
    }

    /// A decimal in 0…1 (digits, one optional point; no sign, exponent or `nan`) in hundredths.
    private static func hundredths(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 12, text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            text.filter({ $0 == "." }).count <= 1, text != ".", let value = Double(text), value >= 0, value <= 1
        else { return nil }
        return Int((value * 100).rounded())
    }

    /// Hundredths as the shortest decimal: 0, 1, 0.5, 0.05.
    private static func decimal(_ hundredths: Int) -> String {
        if hundredths % 100 == 0 { return String(hundredths / 100) }
        return hundredths % 10 == 0 ? "0.\(hundredths / 10)" : (hundredths < 10 ? "0.0\(hundredths)" : "0.\(hundredths)")
    }

    /// Every focal point a client can name (101 × 101), for purges that must reach each one.
    public static var allFocalPoints: [Gravity] {
        (0...100).flatMap { x in (0...100).map { y in Gravity.focalPoint(x: x, y: y) } }
    }
}

/// The point (0…1 of the width and height) a `fill` crop is centred on before it is clamped
/// to the source.
public struct CropFocus: Hashable, Sendable {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = min(1, max(0, x))
        self.y = min(1, max(0, y))
    }

    public static let center = CropFocus(x: 0.5, y: 0.5)
}
