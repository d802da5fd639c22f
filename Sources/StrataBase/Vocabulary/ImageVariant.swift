/// One cached variant as every tier describes it: its pixels' descriptor, the source version it
/// was made from, when it was fetched, and whether it is the *whole original*.
///
/// A whole-original variant is the original at full resolution because the request's box was
/// larger (no upscaling): the source can give nothing bigger, so it serves every `fit` request
/// whose box contains it, not only those within tolerance of its own size (a 640×400 original
/// rendered for a 1024 box is the answer for 1024, 2048, … boxes too).
public struct ImageVariant: Hashable, Sendable, CustomStringConvertible {
    public var descriptor: VariantDescriptor
    public var sourceVersion: SourceVersion
    public var isWholeOriginal: Bool
    /// When the variant's source was fetched (or, for a hit made by another process, when this
    /// process first served it), for revalidation.
    public var fetchedAt: ContinuousClock.Instant
    /// Whether the original is an animation (this variant its first frame): kept by the memory
    /// tier only — the engine writes such variants nowhere else — so that a service answering
    /// animations never takes a still from a tier that cannot say so.
    public var isAnimatedOriginal: Bool

    public init(
        descriptor: VariantDescriptor, sourceVersion: SourceVersion = .unknown, isWholeOriginal: Bool = false,
        fetchedAt: ContinuousClock.Instant = .now, isAnimatedOriginal: Bool = false
    ) {
        self.isAnimatedOriginal = isAnimatedOriginal
        self.descriptor = descriptor
        self.sourceVersion = sourceVersion
        self.isWholeOriginal = isWholeOriginal
        self.fetchedAt = fetchedAt
    }

    public var size: PixelSize { descriptor.size }

    public var description: String {
        "\(descriptor)\(isWholeOriginal ? " (whole original)" : "") v\(sourceVersion)"
    }

    /// The fill ratio this variant offers `query` (``VariantMatcher``'s rule, whole original
    /// included).
    @inlinable
    public func fillRatio(for query: SizeQuery) -> Double? {
        VariantMatcher.fillRatio(of: descriptor, wholeOriginal: isWholeOriginal, for: query)
    }

    /// Whether this variant serves `query`.
    @inlinable
    public func matches(_ query: SizeQuery) -> Bool {
        VariantMatcher.matches(descriptor, wholeOriginal: isWholeOriginal, query)
    }

    /// The best of `variants` for `query` (``VariantMatcher``'s rule), or `nil`.
    @inlinable
    public static func bestMatch(in variants: [ImageVariant], for query: SizeQuery) -> ImageVariant? {
        VariantMatcher.bestMatch(in: variants, for: query, variant: { ($0.descriptor, $0.isWholeOriginal) })
    }
}
