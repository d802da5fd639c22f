import Strata

/// The settings of `strata serve`'s thumbor route (the `thumbor.*` keys): whether thumbor's URLs
/// are answered, where, with which key, and how (docs/Thumbor.md).
///
/// A value type read with the rest of ``StrataConfiguration``; the service target consumes it.
/// Cost: nothing at run time.
public struct ThumborSettings: Sendable, Equatable {
    /// Whether the route answers.
    public var enabled = false
    /// The path the route answers under (`""`: at the root, as thumbor does; else `/thumbor` and
    /// the like, without a trailing `/`).
    public var prefix = ""
    /// thumbor's `SECURITY_KEY`: signatures are HMAC-SHA1 of the path with it.
    public var securityKey: String?
    /// thumbor's `ALLOW_UNSAFE_URL`: whether `/unsafe/…` URLs are served.
    public var allowUnsafe = false
    /// thumbor's `AUTO_WEBP`: an answer whose format the URL does not name is WebP where
    /// `Accept` takes it (and varies with `Accept`).
    public var autoWebp = false
    /// thumbor's `QUALITY`: the JPEG and WebP quality when no `quality()` filter names one.
    public var quality = 80
    /// Full image URLs accepted in place of a key (thumbor's HTTP loader): a URL that starts
    /// with one of these has it removed, and the rest is a key of the configured source.
    public var urlPrefixes: [String] = []

    public init() {}
}

extension ThumborSettings {
    /// Reads every `thumbor.*` key.
    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> ThumborSettings {
        var settings = ThumborSettings()
        settings.enabled = try reader.bool("thumbor.enabled")
        if let prefix = try reader.string("thumbor.prefix"), !prefix.isEmpty {
            guard prefix.hasPrefix("/"), !prefix.hasSuffix("/"), !prefix.contains("?"), !prefix.contains("%") else {
                throw reader.error(
                    "thumbor.prefix", reason: "must start with / and not end with one (\"/thumbor\"), or be empty (the root)")
            }
            settings.prefix = prefix
        }
        settings.securityKey = try reader.string("thumbor.securityKey").flatMap { $0.isEmpty ? nil : $0 }
        settings.allowUnsafe = try reader.bool("thumbor.allowUnsafe")
        settings.autoWebp = try reader.bool("thumbor.autoWebp")
        settings.quality = try reader.integer("thumbor.quality", min: 1)
        guard settings.quality <= 100 else { throw reader.error("thumbor.quality", reason: "must be 1…100") }
        settings.urlPrefixes = try reader.list("thumbor.urlPrefixes")
        for prefix in settings.urlPrefixes where !(prefix.hasPrefix("http://") || prefix.hasPrefix("https://")) || !prefix.hasSuffix("/") {
            throw reader.error(
                "thumbor.urlPrefixes", reason: "\(prefix.debugDescription): each must be an http:// or https:// URL ending in /")
        }
        if settings.enabled, settings.securityKey == nil, !settings.allowUnsafe {
            throw reader.error(
                "thumbor.securityKey",
                reason: "thumbor.enabled needs a security key (the one thumbor signs with), or thumbor.allowUnsafe: true")
        }
        return settings
    }
}
