/// What distinguishes two cached variants of one key: their size, content mode and style.
public struct VariantDescriptor: Hashable, Sendable, CustomStringConvertible {
    public var size: PixelSize
    public var mode: ContentMode
    public var style: PixelStyle

    @inlinable
    public init(size: PixelSize, mode: ContentMode = .fit, style: PixelStyle = .default) {
        self.size = size
        self.mode = mode
        self.style = style
    }

    public var description: String { "\(size)-\(mode.code)\(style.code)" }
}

/// A request for "an image about this big": a bounding box, a content mode, a style, a
/// tolerance and whether the answer may be enlarged — everything the rule of
/// ``VariantMatcher`` reads of a request.
public struct SizeQuery: Hashable, Sendable {
    /// The bounding box W×H.
    public var box: PixelSize
    public var mode: ContentMode
    public var style: PixelStyle
    /// Accepted relative deviation of the fill ratio from 1; 0 means exact. Default 0.20.
    public var tolerance: Double
    /// Whether the request accepts an original enlarged past its size; without it (default) a
    /// *whole original* smaller than a `fit` box is an exact answer (the source has nothing
    /// larger).
    public var allowUpscale: Bool
    /// Accepted deviation below 1 — a smaller variant, which the caller would enlarge — when it
    /// differs from ``tolerance``: 0 asks for a variant at least as large as the box (IIIF
    /// tiles: downsampling only), within ``tolerance`` above it. `nil`: ``tolerance`` both ways.
    public var upscaleTolerance: Double?

    /// The deviation accepted below 1.
    @inlinable
    public var lowerTolerance: Double { upscaleTolerance ?? tolerance }

    public static let defaultTolerance = 0.20

    /// Checks a tolerance before it reaches
    /// ``init(box:mode:style:tolerance:allowUpscale:upscaleTolerance:)`` (which traps on a bad
    /// one): finite and within 0...1.
    public static func validate(tolerance: Double) throws(ConfigurationError) {
        if !(tolerance >= 0 && tolerance <= 1) {
            throw .init(key: "tolerance", value: "\(tolerance)", reason: "must be a number within 0...1 (0.2 is 20 %)")
        }
    }

    @inlinable
    public init(
        box: PixelSize, mode: ContentMode = .fit, style: PixelStyle = .default,
        tolerance: Double = SizeQuery.defaultTolerance, allowUpscale: Bool = false, upscaleTolerance: Double? = nil
    ) {
        precondition(tolerance >= 0 && tolerance.isFinite, "tolerance must be finite and ≥ 0")
        precondition(upscaleTolerance.map { $0 >= 0 && $0.isFinite } ?? true, "upscale tolerance must be finite and ≥ 0")
        self.box = box
        self.mode = mode
        self.style = style
        self.tolerance = tolerance
        self.allowUpscale = allowUpscale
        self.upscaleTolerance = upscaleTolerance
    }

    /// Whether fill ratio `q` is within this query's tolerances.
    @inlinable
    public func accepts(_ q: Double) -> Bool { VariantMatcher.withinTolerance(q, lower: lowerTolerance, upper: tolerance) }
}

/// The one implementation of the tolerance rule; the memory tier, the disk tier's index and the
/// image tables' format choice all call it (`VariantRuleTests` runs one table of cases against
/// the three).
///
/// For a variant w×h (same key, mode and style) and a box W×H, the *fill ratio* is
/// `q = max(w/W, h/H)` for `fit` and `q = w/W` for `fill` (whose variants must have the box's
/// aspect, within one pixel of rounding). A *whole original* (the original at full size, kept
/// because a `fit` box was larger) has `q = 1` for every `fit` box that contains it, unless the
/// query allows upscaling. A variant matches when `1 − t ≤ q ≤ 1 + t` (below 1, the query's
/// upscale tolerance when it has one: 0 takes no variant smaller than the box); the match
/// closest to `q = 1` wins, and the larger wins a tie. Cost: O(n) over the candidates, no
/// allocation.
public enum VariantMatcher {
    /// The fill ratio of `variant` for `query`, or `nil` when it cannot serve the query at any
    /// tolerance (another mode or style, or a `fill` variant of another aspect). A whole
    /// original inside a `fit` box counts as exact (1) unless `query.allowUpscale`.
    @inlinable
    public static func fillRatio(of variant: VariantDescriptor, wholeOriginal: Bool = false, for query: SizeQuery) -> Double? {
        guard let q = plainFillRatio(of: variant, for: query) else { return nil }
        if wholeOriginal, !query.allowUpscale, query.mode == .fit, q <= 1 { return 1 }
        return q
    }

    @inlinable
    package static func plainFillRatio(of variant: VariantDescriptor, for query: SizeQuery) -> Double? {
        guard variant.mode == query.mode, variant.style == query.style else { return nil }
        let w = Double(variant.size.width), h = Double(variant.size.height)
        let bw = Double(query.box.width), bh = Double(query.box.height)
        switch query.mode {
        case .fit:
            return Swift.max(w / bw, h / bh)
        case .fill:
            // Same aspect as the box: h ≈ w × H / W within one pixel of rounding.
            guard abs(h - w * bh / bw) <= 1.0 else { return nil }
            return w / bw
        }
    }

    /// Whether `variant` is within the query's tolerance.
    @inlinable
    public static func matches(_ variant: VariantDescriptor, wholeOriginal: Bool = false, _ query: SizeQuery) -> Bool {
        guard let q = fillRatio(of: variant, wholeOriginal: wholeOriginal, for: query) else { return false }
        return query.accepts(q)
    }

    /// Whether fill ratio `q` is within tolerance `t` (exactly 1 when `t` is 0).
    @inlinable
    public static func withinTolerance(_ q: Double, _ t: Double) -> Bool { withinTolerance(q, lower: t, upper: t) }

    /// Whether fill ratio `q` is within `lower` below 1 and `upper` above it (exactly 1 when
    /// both are 0).
    @inlinable
    public static func withinTolerance(_ q: Double, lower: Double, upper: Double) -> Bool {
        if lower == 0, upper == 0 { return q == 1 }
        // A hair of slack so that 0.8 and 1.2 themselves match despite binary rounding.
        let eps = 1e-9
        return q >= 1 - lower - eps && q <= 1 + upper + eps
    }

    /// Whether `a` is a better match than `b` (closer to q = 1; larger on a tie).
    ///
    /// Distances equal up to binary rounding (0.9 vs 1.1) are a tie: each distance is rounded
    /// to a grid of 10⁻⁹ first. Rounding to a grid, not comparing the difference with 10⁻⁹,
    /// keeps the order transitive, so a scan's best is never beaten by another candidate (with
    /// a threshold, 1, 1 + 0.8·10⁻⁹ and 1 + 1.6·10⁻⁹ would each beat the one before).
    @inlinable
    public static func isBetter(_ qa: Double, than qb: Double) -> Bool {
        let da = distanceBucket(qa), db = distanceBucket(qb)
        if da != db { return da < db }
        return qa > qb
    }

    /// `|q − 1|` on a grid of 10⁻⁹ (see ``isBetter(_:than:)``).
    @inlinable
    package static func distanceBucket(_ q: Double) -> Double { (abs(q - 1) * 1e9).rounded() }

    /// The best match among `candidates`, or `nil`. `variant` reads each candidate's descriptor
    /// and whole-original flag, so callers scan their own index entries without building arrays.
    @inlinable
    public static func bestMatch<C: Sequence>(
        in candidates: C, for query: SizeQuery, variant: (C.Element) -> (descriptor: VariantDescriptor, isWholeOriginal: Bool)
    ) -> C.Element? {
        var best: C.Element?
        var bestQ = 0.0
        for candidate in candidates {
            let (descriptor, whole) = variant(candidate)
            guard let q = fillRatio(of: descriptor, wholeOriginal: whole, for: query), query.accepts(q) else { continue }
            if best == nil || isBetter(q, than: bestQ) {
                best = candidate
                bestQ = q
            }
        }
        return best
    }

    /// The best match among candidates none of which is a whole original (table formats).
    @inlinable
    public static func bestMatch<C: Sequence>(
        in candidates: C, for query: SizeQuery, descriptor: (C.Element) -> VariantDescriptor
    ) -> C.Element? {
        bestMatch(in: candidates, for: query, variant: { (descriptor($0), false) })
    }

    /// The best match among plain descriptors.
    @inlinable
    public static func bestMatch<C: Sequence>(in candidates: C, for query: SizeQuery) -> VariantDescriptor?
    where C.Element == VariantDescriptor {
        bestMatch(in: candidates, for: query, descriptor: { $0 })
    }
}
