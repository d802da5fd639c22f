import StrataBase
import StrataCodecs
/// A request to the engine: "key K at about W×H".
///
/// Value type; cheap to copy (the key's digest is computed when the ``/StrataBase/CacheKey`` is made).
public struct ImageRequest: Hashable, Sendable {
    public var key: CacheKey
    /// The bounding box the caller wants the image for.
    public var box: PixelSize
    public var mode: ContentMode
    public var style: PixelStyle
    /// Size tolerance (0...1); `nil` takes the engine's configured default (0.2).
    public var tolerance: Double?
    /// `.urgent` (default) runs in the parallel lane; `.prefetch` one at a time, paused while
    /// urgent work waits.
    public var priority: Lane
    /// When set, a larger variant found within tolerance is resampled down to the exact box
    /// (cheaper than the source); the result is exactly what a source render would give.
    public var exactSize: Bool
    /// Allow the source render to enlarge a small original to the box.
    public var allowUpscale: Bool
    /// Tolerance below the box (0...1) when it differs from ``tolerance``: 0 takes only a
    /// variant at least as large as the box, which the caller then reduces (IIIF tiles, which
    /// would otherwise be enlarged from a smaller variant). `nil`: ``tolerance`` both ways.
    public var upscaleTolerance: Double?

    public init(
        key: CacheKey, box: PixelSize, mode: ContentMode = .fit, style: PixelStyle = .default,
        tolerance: Double? = nil, priority: Lane = .urgent, exactSize: Bool = false, allowUpscale: Bool = false,
        upscaleTolerance: Double? = nil
    ) {
        self.key = key
        self.box = box
        self.mode = mode
        self.style = style
        self.tolerance = tolerance
        self.priority = priority
        self.exactSize = exactSize
        self.allowUpscale = allowUpscale
        self.upscaleTolerance = upscaleTolerance
    }

    /// The request as a tier lookup, with `defaultTolerance` where the request names none.
    public func query(defaultTolerance: Double) -> SizeQuery {
        SizeQuery(
            box: box, mode: mode, style: style, tolerance: exactSize ? 0 : (tolerance ?? defaultTolerance),
            allowUpscale: allowUpscale, upscaleTolerance: exactSize ? 0 : upscaleTolerance)
    }

    /// The request as a lookup that may find a larger variant to resample (`exactSize`): an
    /// upper tolerance only. A key whose operations filter the output (padding, blur, sharpen)
    /// has no variant another size can be resampled from: its search is exact.
    package func searchQuery(defaultTolerance: Double) -> SizeQuery {
        if key.string.utf8.contains(0), key.operations.filtersOutput { return query(defaultTolerance: defaultTolerance) }
        return SizeQuery(
            box: box, mode: mode, style: style, tolerance: tolerance ?? defaultTolerance, allowUpscale: allowUpscale,
            upscaleTolerance: upscaleTolerance)
    }

    /// The request for the source tier.
    package var renderRequest: RenderRequest { RenderRequest(box: box, mode: mode, style: style, allowUpscale: allowUpscale) }
}

/// Which tier served an image.
public enum ServingTier: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    case memory, disk, table, shared, source
    public var description: String { rawValue }
}

/// What ``ImageCache/image(for:)`` returns: the pixels, the variant they are, the tier that
/// served them, and their source version and age.
public struct CachedImage: Sendable {
    public var image: PixelImage
    public var variant: ImageVariant
    public var tier: ServingTier
    public var sourceVersion: SourceVersion { variant.sourceVersion }
    /// Time since the variant's source was fetched.
    public var age: Duration { ContinuousClock.now - variant.fetchedAt }

    public init(image: PixelImage, variant: ImageVariant, tier: ServingTier) {
        self.image = image
        self.variant = variant
        self.tier = tier
    }
}
