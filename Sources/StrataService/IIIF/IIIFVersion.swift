/// The IIIF Image API versions the service speaks: 3.0 under `/iiif/3/`, 2.1 under `/iiif/2/`.
/// Each names its JSON-LD context, its level-2 profile and the rules that differ (size
/// syntax, upscaling).
public enum IIIFVersion: Int, Sendable, Hashable, CaseIterable {
    case v2 = 2
    case v3 = 3

    /// The route prefix, `/iiif/3/`.
    /// (Literals, here and below: read for every warm tile, where an interpolation allocated.)
    package var prefix: String {
        switch self {
        case .v2: "/iiif/2/"
        case .v3: "/iiif/3/"
        }
    }

    /// The `@context` of `info.json`, also the `profile` parameter of its JSON-LD media type.
    package var context: String {
        switch self {
        case .v2: "http://iiif.io/api/image/2/context.json"
        case .v3: "http://iiif.io/api/image/3/context.json"
        }
    }

    /// The compliance level's URI, for the `Link: <…>;rel="profile"` header.
    package var levelProfile: String {
        switch self {
        case .v2: "http://iiif.io/api/image/2/level2.json"
        case .v3: "http://iiif.io/api/image/3/level2.json"
        }
    }

    /// `info.json`'s media type: JSON-LD with the context as profile when `Accept` asks for
    /// `application/ld+json`, plain JSON otherwise (both versions say so).
    package func infoContentType(accept: [String]) -> String {
        FormatNegotiation.accepts("application/ld+json", in: accept)
            ? "application/ld+json;profile=\"\(context)\"" : "application/json"
    }
}
