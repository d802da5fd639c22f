/// The IIIF Image API versions the service speaks: 3.0 under `/iiif/3/`, 2.1 under `/iiif/2/`.
/// Each names its JSON-LD context, its level-2 profile and the rules that differ (size
/// syntax, upscaling).
public enum IIIFVersion: Int, Sendable, Hashable, CaseIterable {
    case v2 = 2
    case v3 = 3

    /// The route prefix, `/iiif/3/`.
    package var prefix: String { "/iiif/\(rawValue)/" }

    /// The `@context` of `info.json`, also the `profile` parameter of its JSON-LD media type.
    package var context: String { "http://iiif.io/api/image/\(rawValue)/context.json" }

    /// The compliance level's URI, for the `Link: <…>;rel="profile"` header.
    package var levelProfile: String { "http://iiif.io/api/image/\(rawValue)/level2.json" }

    /// `info.json`'s media type: JSON-LD with the context as profile when `Accept` asks for
    /// `application/ld+json`, plain JSON otherwise (both versions say so).
    package func infoContentType(accept: [String]) -> String {
        FormatNegotiation.accepts("application/ld+json", in: accept)
            ? "application/ld+json;profile=\"\(context)\"" : "application/json"
    }
}
