import Foundation

/// An IIIF Image API URL, parsed: the base URI (redirected to its `info.json`), the
/// `info.json`, or an image request, for one version.
///
/// `/iiif/{2|3}/{identifier}`, `/iiif/{2|3}/{identifier}/info.json`,
/// `/iiif/{2|3}/{identifier}/{region}/{size}/{rotation}/{quality}.{format}`. The identifier is
/// one path segment, percent-decoded once (so `%2F` carries a `/`), then held to the key rules
/// of `/images` (no empty, `.` or `..` segment, no NUL). Pure; cost: one pass over the path.
public enum IIIFRoute: Sendable, Hashable {
    case base(IIIFVersion, identifier: IIIFIdentifier)
    case info(IIIFVersion, identifier: IIIFIdentifier)
    case image(IIIFImageRequest)

    /// The routes' common prefix.
    package static let prefix = "/iiif/"

    /// Parses `path` (no query). A path outside the IIIF routes, or with another number of
    /// segments, is a 404; a malformed part a 400 naming it.
    public init(path: Substring) throws(ServiceError) {
        guard let version = IIIFVersion.allCases.first(where: { path.hasPrefix($0.prefix) }) else {
            throw ServiceError(.notFound, "not_found", "IIIF routes are /iiif/3/{identifier}/… (Image API 3.0) and /iiif/2/… (2.1)")
        }
        let parts = path.dropFirst(version.prefix.count).split(separator: "/", omittingEmptySubsequences: false)
        switch parts.count {
        case 1:
            self = .base(version, identifier: try IIIFIdentifier(raw: parts[0]))
        case 2 where parts[1] == "info.json":
            self = .info(version, identifier: try IIIFIdentifier(raw: parts[0]))
        case 5:
            self = .image(try IIIFImageRequest(version: version, parts: parts))
        default:
            // Another number of segments names no image (an unescaped / in an identifier): 404.
            throw ServiceError(
                .notFound, "not_found",
                "expected \(version.prefix){identifier}/{region}/{size}/{rotation}/{quality}.{format} or \(version.prefix){identifier}/info.json"
                    + " (a / inside the identifier is written %2F)")
        }
    }
}

/// An IIIF identifier: as written in the URL (for building URIs back) and as the source key it
/// names.
public struct IIIFIdentifier: Sendable, Hashable {
    /// The segment as it appeared in the URL (still percent-encoded).
    public var raw: String
    /// The source key: `raw` percent-decoded once, checked like an `/images` key.
    public var key: String

    public init(raw: Substring) throws(ServiceError) {
        guard let decoded = PercentDecoding.decode(raw) else {
            throw ServiceError(
                .badRequest, "bad_identifier", "the identifier \(String(raw).debugDescription) is not valid percent-encoding")
        }
        do {
            try ImageParameters.checkKey(decoded)
        } catch {
            throw ServiceError(.badRequest, "bad_identifier", "the identifier \(decoded.debugDescription): \(error.message)")
        }
        // Without an escape the two are the same text: one string shared.
        self.raw = raw.utf8.contains(UInt8(ascii: "%")) ? String(raw) : decoded
        self.key = decoded
    }
}

/// An IIIF image request: identifier, region, size, rotation, quality and format, parsed and
/// syntax-checked (the size and region are checked against the image later, when its size is
/// known).
public struct IIIFImageRequest: Sendable, Hashable {
    public var version: IIIFVersion
    public var identifier: IIIFIdentifier
    public var region: IIIFRegion
    public var size: IIIFSize
    public var rotation: IIIFRotation
    public var quality: IIIFQuality
    public var format: IIIFFormat

    public init(
        version: IIIFVersion, identifier: IIIFIdentifier, region: IIIFRegion, size: IIIFSize, rotation: IIIFRotation,
        quality: IIIFQuality, format: IIIFFormat
    ) {
        self.version = version
        self.identifier = identifier
        self.region = region
        self.size = size
        self.rotation = rotation
        self.quality = quality
        self.format = format
    }

    /// From the five segments after the version prefix.
    package init(version: IIIFVersion, parts: [Substring]) throws(ServiceError) {
        self.version = version
        identifier = try IIIFIdentifier(raw: parts[0])
        region = try IIIFRegion(parsing: parts[1])
        size = try IIIFSize(parsing: parts[2], version: version)
        rotation = try IIIFRotation(parsing: parts[3])
        let last = parts[4]
        guard let dot = last.lastIndex(of: ".") else {
            throw ServiceError(.badRequest, "bad_format", "\(String(last).debugDescription): expected {quality}.{format}, e.g. default.jpg")
        }
        quality = try IIIFQuality(parsing: last[..<dot])
        format = try IIIFFormat(parsing: last[last.index(after: dot)...])
    }
}
