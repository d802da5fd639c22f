import Strata

/// The quality of an IIIF image request: `default` and `color` (the pixels as they are),
/// `gray`, `bitonal` (black and white at mid-gray). Pure.
public enum IIIFQuality: String, Sendable, Hashable, CaseIterable {
    case `default`, color, gray, bitonal

    /// Parses the quality (the last segment's name before the `.`); others are a 400.
    public init(parsing text: Substring) throws(ServiceError) {
        guard let value = IIIFQuality(rawValue: String(text)) else {
            throw ServiceError(
                .badRequest, "bad_quality", "quality \(String(text).debugDescription): expected default, color, gray or bitonal")
        }
        self = value
    }
}

/// The format of an IIIF image request, the extension of its last segment: `jpg`, `png`,
/// `webp`, `avif`. Other IIIF formats (`tif`, `gif`, `jp2`, `pdf`) are a 400. Pure.
public enum IIIFFormat: String, Sendable, Hashable, CaseIterable {
    case jpg, png, webp, avif

    public init(parsing text: Substring) throws(ServiceError) {
        guard let value = IIIFFormat(rawValue: String(text)) else {
            throw ServiceError(.badRequest, "bad_format", "format \(String(text).debugDescription): expected jpg, png, webp or avif")
        }
        self = value
    }

    /// The encoder's format.
    package var imageFormat: ImageFormat {
        switch self {
        case .jpg: return .jpeg
        case .png: return .png
        case .webp: return .webp
        case .avif: return .avif
        }
    }

    /// The same encoding as the service's `format=` names it (the encoded cache's key).
    package var responseFormat: ResponseFormat {
        switch self {
        case .jpg: return .jpeg
        case .png: return .png
        case .webp: return .webp
        case .avif: return .avif
        }
    }

    package var contentType: String {
        switch self {
        case .jpg: return "image/jpeg"
        case .png: return "image/png"
        case .webp: return "image/webp"
        case .avif: return "image/avif"
        }
    }
}
