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
    /// Directory of the tile pyramids (`nil`: no pyramids). Unset, it defaults beside
    /// `disk.path` when there is a disk tier (``defaultPyramidPath(besideDisk:)``); `off`: none.
    public var pyramidPath: String?
    /// Whether ``pyramidPath`` is the default beside the disk tier (not configured).
    public var pyramidPathIsDefault = false
    /// `iiif.pyramidPath: off`: no pyramids, not even beside the disk tier.
    public var pyramidsOff = false
    /// Originals with more pixels than this are served from a pyramid (with ``pyramidPath``).
    /// From 8 MP up a viewer's session is faster and lighter from a pyramid; at 4 MP the two
    /// paths are even, and a photo's whole-image variants also serve `/images`.
    public var tiledAbove = 6_000_000
    /// Most bytes of the pyramids' table.
    public var pyramidBytes = 8 << 30
    /// The largest original a pyramid is built from.
    public var maxSourcePixels = 4_000_000_000
    /// The largest original file a pyramid is built from, in bytes (copied to disk while its
    /// pyramid builds; `source.maxFileSize` bounds only what is read into memory).
    public var maxSourceBytes = 16 << 30
    /// IIIF Authorization Flow 2.0: restricted keys and their access services (`iiif.auth.*`).
    public var auth = IIIFAuthSettings()

    public init() {}

    /// The pyramids' directory when `iiif.pyramidPath` is unset and `disk.path` is `disk`:
    /// `disk-pyramids`, beside it (never inside: the disk tier owns its directory).
    public static func defaultPyramidPath(besideDisk disk: String) -> String {
        var base = Substring(disk)
        while base.count > 1, base.hasSuffix("/") { base = base.dropLast() }
        return base + "-pyramids"
    }

    /// The pyramids' settings: ``tileSize`` tiles, as many as ``pyramidBytes`` holds (each
    /// takes its pixels and a page).
    public var pyramidSettings: TilePyramids.Settings {
        let entry = tileSize * tileSize * 4 + 4096
        return TilePyramids.Settings(
            tileSize: tileSize, maximumTiles: max(16, pyramidBytes / entry), maxSourcePixels: maxSourcePixels,
            maxSourceBytes: maxSourceBytes)
    }
}

extension IIIFSettings {
    /// Reads every `iiif.*` key.
    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> IIIFSettings {
        var settings = IIIFSettings()
        settings.maxWidth = try reader.integer("iiif.maxWidth", min: 1)
        settings.maxHeight = try reader.integer("iiif.maxHeight", min: 1)
        settings.maxArea = try reader.integer("iiif.maxArea", min: 1)
        settings.tileSize = try reader.integer("iiif.tileSize", min: 16)
        settings.upscaleTolerance = try reader.number("iiif.upscaleTolerance", in: 0...1)
        settings.pyramidPath = try reader.path("iiif.pyramidPath")
        if settings.pyramidPath == "off" {
            settings.pyramidPath = nil
            settings.pyramidsOff = true
        }
        settings.tiledAbove = try reader.integer("iiif.tiledAbove", min: 1)
        settings.pyramidBytes = try reader.bytes("iiif.pyramidBytes", min: 64 << 20)
        settings.maxSourcePixels = try reader.integer("iiif.maxSourcePixels", min: 1)
        settings.maxSourceBytes = try reader.bytes("iiif.maxSourceSize", min: 1)
        settings.auth = try IIIFAuthSettings.read(from: &reader)
        if settings.pyramidPath != nil, settings.tileSize % 2 != 0 || settings.tileSize > 4096 {
            throw reader.error(
                "iiif.tileSize",
                reason: "must be even and at most 4096 when iiif.pyramidPath is set (tiles of one level halve into the next)")
        }
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
