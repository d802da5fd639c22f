import Strata

/// The settings of `strata serve`'s IIIF Image API routes (the `iiif.*` keys): the largest
/// image a request may produce and the tile size `info.json` advertises.
///
/// A value type read with the rest of ``StrataConfiguration``; the service target consumes it.
/// Cost: nothing at run time.
public struct IIIFSettings: Sendable, Equatable {
    /// Widest output image (`maxWidth` in `info.json`).
    public var maxWidth = 4096
    /// Tallest output image (`maxHeight`).
    public var maxHeight = 4096
    /// Most output pixels (`maxArea`).
    public var maxArea = 16_777_216
    /// Side of the square tiles advertised in `info.json`.
    public var tileSize = 512
    /// Where the `square` region sits in a non-square image (`center`, a compass point,
    /// `fp:X,Y` or `smart`).
    public var squareGravity: Gravity = .center
    /// How much smaller than a tile's scale the whole-image variant it is cut from may be (0…1):
    /// 0, a tile is only ever reduced from a variant at least its scale's size, never enlarged
    /// from a smaller one (the engine's `tolerance` still applies above).
    public var upscaleTolerance = 0.0

    public init() {}
}

extension IIIFSettings {
    /// Reads every `iiif.*` key.
    static func read(from reader: inout KeyReader) throws(ConfigurationError) -> IIIFSettings {
        var settings = IIIFSettings()
        settings.maxWidth = try reader.integer("iiif.maxWidth", min: 1)
        settings.maxHeight = try reader.integer("iiif.maxHeight", min: 1)
        settings.maxArea = try reader.integer("iiif.maxArea", min: 1)
        settings.tileSize = try reader.integer("iiif.tileSize", min: 16)
        settings.upscaleTolerance = try reader.number("iiif.upscaleTolerance", in: 0...1)
        if let text = try reader.string("iiif.squareGravity") {
            guard let gravity = Gravity(parsing: text) else {
                throw reader.error(
                    "iiif.squareGravity",
                    reason:
                        "must be center, north, south, east, west, northeast, northwest, southeast, southwest, smart or fp:X,Y (X and Y in 0…1)"
                )
            }
            settings.squareGravity = gravity
        }
        return settings
    }
}
