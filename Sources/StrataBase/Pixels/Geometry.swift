/// A size in whole pixels.
public struct PixelSize: Hashable, Sendable, Codable, CustomStringConvertible {
    public var width: Int
    public var height: Int

    @inlinable
    public init(width: Int, height: Int) {
        self.width = width
        self.height = height
    }

    /// `width × height`, saturating instead of trapping on absurd header values.
    @inlinable
    public var pixelCount: Int {
        let (product, overflow) = width.multipliedReportingOverflow(by: height)
        return overflow ? Int.max : product
    }

    /// Whether both sides are at least 1.
    @inlinable
    public var isEmpty: Bool { width <= 0 || height <= 0 }

    public var description: String { "\(width)x\(height)" }

    /// Parses `"WxH"` (as on the command line); `nil` unless both sides are positive integers.
    public init?(parsing text: some StringProtocol) {
        let parts = text.lowercased().split(separator: "x", omittingEmptySubsequences: false)
        guard parts.count == 2, let w = Int(parts[0]), let h = Int(parts[1]), w > 0, h > 0 else { return nil }
        self.init(width: w, height: h)
    }
}

/// How an image is sized into a requested bounding box (see ``VariantMatcher`` for the tolerance rule).
public enum ContentMode: UInt8, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    /// Aspect preserved, the result fits inside the box (the default).
    case fit = 0
    /// Aspect preserved, scaled to cover the box and centre-cropped to exactly the box.
    case fill = 1

    /// A one-letter code used in file names (`f` fit, `c` fill/crop).
    public var code: Character { self == .fit ? "f" : "c" }

    public init?(code: Character) {
        switch code {
        case "f": self = .fit
        case "c": self = .fill
        default: return nil
        }
    }

    public var description: String { self == .fit ? "fit" : "fill" }
}

/// A rectangle in source pixel coordinates (fractional, so that a crop keeps sub-pixel accuracy).
public struct SourceRect: Hashable, Sendable {
    public var x: Double
    public var y: Double
    public var width: Double
    public var height: Double

    public init(x: Double, y: Double, width: Double, height: Double) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}

/// The output geometry for sizing a source into a box: the output size and the source
/// region that maps onto it.
public struct SizingPlan: Hashable, Sendable {
    /// The size of the produced image.
    public var output: PixelSize
    /// The part of the source that is scaled onto `output` (the whole source for `fit`,
    /// a crop centred on the focus for `fill`).
    public var sourceRect: SourceRect

    /// Plans sizing `source` into `box` with `mode`.
    ///
    /// - `fit`: the largest size with the source's aspect that fits in the box (sides rounded,
    ///   at least 1 pixel).
    /// - `fill`: exactly the box; the source is cropped to the box's aspect, the crop centred on
    ///   `focus` (0…1 of each side; ``CropFocus/center`` by default) and then moved inside the
    ///   source (see ``Gravity``).
    ///
    /// Unless `allowUpscale` is set, a source smaller than the box is not enlarged: `fit`
    /// returns the source size, `fill` returns the largest box-aspect crop of the source.
    public init(source: PixelSize, box: PixelSize, mode: ContentMode, allowUpscale: Bool = false, focus: CropFocus = .center) {
        precondition(!source.isEmpty && !box.isEmpty, "sizes must be positive")
        let sw = Double(source.width), sh = Double(source.height)
        let bw = Double(box.width), bh = Double(box.height)
        switch mode {
        case .fit:
            var scale = min(bw / sw, bh / sh)
            if !allowUpscale { scale = min(scale, 1) }
            let w = Self.side(sw * scale, atMost: box.width)
            let h = Self.side(sh * scale, atMost: box.height)
            output = allowUpscale || scale < 1 ? PixelSize(width: w, height: h) : source
            sourceRect = SourceRect(x: 0, y: 0, width: sw, height: sh)
        case .fill:
            let scale = max(bw / sw, bh / sh)
            var out = box
            if !allowUpscale && scale > 1 {
                // Largest crop with the box's aspect that the source can give at 1:1.
                let shrink = 1 / scale
                out = PixelSize(
                    width: Self.side(bw * shrink, atMost: box.width),
                    height: Self.side(bh * shrink, atMost: box.height))
            }
            // Source region with the output's aspect, centred.
            let outAspect = Double(out.width) / Double(out.height)
            // Clamped: binary rounding of the aspect must not make the crop larger than the
            // source (a negative origin of -3e-14 was found by the sizing fuzz harness).
            var cw = sw, ch = sh
            if sw / sh > outAspect { cw = min(sw, sh * outAspect) } else { ch = min(sh, sw / outAspect) }
            output = out
            sourceRect = SourceRect(
                x: Self.origin(focus.x, side: sw, crop: cw), y: Self.origin(focus.y, side: sh, crop: ch), width: cw, height: ch)
        }
    }

    /// Where a crop of `crop` along a side of `side` starts when centred on `focus` (0…1) and kept
    /// inside the side. The centre (0.5) gives exactly `(side − crop) / 2`, as before gravity.
    @inline(__always)
    package static func origin(_ focus: Double, side: Double, crop: Double) -> Double {
        let slack = side - crop
        if focus == 0.5 { return slack / 2 }
        return Swift.min(slack, Swift.max(0, focus * side - crop / 2))
    }

    /// `x` (≥ 0) rounded by `rule` to a side of 1…`limit` pixels. Compared in `Double` first:
    /// near `Int.max` (a box any client may ask for) the product rounds to 2⁶³, which `Int(_:)`
    /// traps on (found by the sizing fuzz harness).
    @inline(__always)
    package static func side(_ x: Double, _ rule: FloatingPointRoundingRule = .toNearestOrAwayFromZero, atMost limit: Int) -> Int {
        let r = x.rounded(rule)
        return r >= Double(limit) ? limit : Swift.max(1, Int(r))
    }
}
