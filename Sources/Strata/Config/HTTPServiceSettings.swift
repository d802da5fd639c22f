/// The settings of `strata serve` (the `http.*` keys): where it listens, how large an image
/// may be asked for, how it sheds load, how it signs URLs and caches encoded bytes.
///
/// A value type read with the rest of ``StrataConfiguration``; the service target
/// (`StrataService`) consumes it. Cost: nothing at run time.
public struct HTTPServiceSettings: Sendable, Equatable {
    /// Address to listen on (`127.0.0.1`: this machine only).
    public var host = "127.0.0.1"
    /// TCP port; 0 picks a free one (tests).
    public var port = 8080
    /// HMAC-SHA256 key that image URLs must be signed with; `nil`: unsigned URLs are served.
    public var signingKey: String?
    /// `Cache-Control` of image responses.
    public var cacheControl = "public, max-age=86400"
    /// Largest `w` or `h` a request may name.
    public var maxDimension = 4096
    /// Most urgent jobs that may wait; beyond it, a request that needs work gets 503.
    public var maxQueue = 64
    /// `Retry-After` of a shed request.
    public var retryAfter: Duration = .seconds(1)
    /// Bytes of encoded images (JPEG/WebP/PNG) kept for warm requests.
    public var encodedCacheCostLimit = 64 << 20
    /// Encoder quality when the request names none (JPEG, lossy WebP).
    public var quality = 80

    public init() {}
}

extension HTTPServiceSettings {
    /// Reads every `http.*` key.
    static func read(from reader: inout KeyReader) throws(ConfigurationError) -> HTTPServiceSettings {
        var settings = HTTPServiceSettings()
        settings.host = try reader.string("http.host") ?? settings.host
        let port = try reader.integer("http.port", min: 0)
        guard port <= 65_535 else { throw reader.error("http.port", reason: "expected a TCP port, 0…65535") }
        settings.port = port
        settings.signingKey = try reader.string("http.signingKey")
        if let key = settings.signingKey, key.utf8.count < 16 {
            throw reader.error("http.signingKey", reason: "expected at least 16 bytes (a random secret, e.g. `openssl rand -hex 32`)")
        }
        settings.cacheControl = try reader.string("http.cacheControl") ?? ""
        settings.maxDimension = try reader.integer("http.maxDimension", min: 1)
        settings.maxQueue = try reader.integer("http.maxQueue", min: 0)
        settings.retryAfter = try reader.duration("http.retryAfter")
        settings.encodedCacheCostLimit = try reader.bytes("http.encodedCacheSize")
        let quality = try reader.integer("http.quality", min: 1)
        guard quality <= 100 else { throw reader.error("http.quality", reason: "expected 1…100") }
        settings.quality = quality
        return settings
    }
}
