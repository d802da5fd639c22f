import Foundation
import Strata

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
    /// More signing keys by id (`http.signingKeys`, each `id:secret`): a URL naming one with
    /// `kid=` is checked with it, so keys can rotate.
    public var signingKeys: [String: String] = [:]
    /// Bearer token of the administrative routes (`DELETE /images/{key}`, `DELETE /iiif/…`);
    /// `nil`: those routes answer 404.
    public var adminToken: String?
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
    /// Named parameter sets of `/images` (`http.presets`, each `name: parameters`), by name:
    /// the text after the colon, as written (checked against the image parameters by the
    /// service, which parses it with the query's own parser).
    public var presets: [String: String] = [:]
    /// Whether `/images` answers presets only (`?preset=NAME`, plus the signature's parameters).
    public var presetsOnly = false
    /// `http.watermarks`: watermark images by name, each `file:PATH` or a key of the source
    /// (`source:KEY`, or the key alone), for `/images?watermark=NAME`.
    public var watermarks: [String: String] = [:]
    /// `source.maxFrames` and `source.maxAnimationPixels`: what an animated answer may decode.
    public var animationLimits = AnimationLimits(maxFrames: 500, maxTotalPixels: 1 << 28)
    /// Encoder quality of AVIF answers when the request names none (libavif's scale:
    /// ``AVIFCodec/quantizer(forQuality:)``).
    public var avifQuality = AVIFCodec.defaultQuality
    /// AVIF encoder speed, 0 (smallest files, slowest) … 10 (fastest).
    public var avifSpeed = AVIFCodec.defaultSpeed
    /// The formats an answer without `format=` may take, most preferred first (`http.formats`):
    /// AVIF, JPEG XL and WebP when `Accept` names them, JPEG for opaque pixels (or always, when
    /// PNG is not listed), PNG (``negotiableFormats``).
    public var formats: [ImageFormat] = [.avif, .jxl, .webp, .jpeg, .png]
    /// This node's name (`X-Strata-Node`, the `node` label of `/stats` and `/metrics`): tells
    /// the nodes of a cluster apart. Letters, digits and `-._:`, at most 64 bytes.
    public var nodeName = HTTPServiceSettings.hostName()
    /// Longest time from a connection's accept, or from the first byte of a request after an
    /// idle pause, to the end of that request's head: a client trickling its head (slowloris)
    /// is closed after it.
    public var headerTimeout: Duration = .seconds(20)
    /// A keep-alive connection without a request for this long is closed; so is one whose
    /// responses stop draining (a client that never reads) or whose request body stalls.
    public var idleTimeout: Duration = .seconds(75)
    /// Most connections open at once; a connection accepted beyond it is closed at once.
    public var maxConnections = 10_000

    public init() {}

    /// Whether the URL signing is on (a key without id, or keys by id).
    public var signsURLs: Bool { signingKey != nil || !signingKeys.isEmpty }

    /// A key id: 1…32 letters, digits, `-` or `_` (it is written into URLs as it is).
    package static func isValidKeyID(_ id: Substring) -> Bool {
        isName(id, maxBytes: 32, punctuation: "-_")
    }

    /// Whether `text` is 1…`maxBytes` bytes, each an ASCII letter, a digit or one of
    /// `punctuation`.
    package static func isName(_ text: Substring, maxBytes: Int, punctuation: String) -> Bool {
        (1...maxBytes).contains(text.utf8.count)
            && text.utf8.allSatisfy { byte in
                (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
                    || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || punctuation.utf8.contains(byte)
            }
    }
}

extension HTTPServiceSettings {
    /// Reads every `http.*` key.
    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> HTTPServiceSettings {
        var settings = HTTPServiceSettings()
        settings.host = try reader.string("http.host") ?? settings.host
        let port = try reader.integer("http.port", min: 0)
        guard port <= 65_535 else { throw reader.error("http.port", reason: "expected a TCP port, 0…65535") }
        settings.port = port
        settings.signingKey = try reader.string("http.signingKey")
        if let key = settings.signingKey, key.utf8.count < 16 {
            throw reader.error("http.signingKey", reason: "expected at least 16 bytes (a random secret, e.g. `openssl rand -hex 32`)")
        }
        settings.adminToken = try reader.string("http.adminToken")
        if let token = settings.adminToken, token.utf8.count < 16 {
            throw reader.error("http.adminToken", reason: "expected at least 16 bytes (a random secret, e.g. `openssl rand -hex 32`)")
        }
        for entry in try reader.list("http.signingKeys") {
            let parts = entry.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let id = parts.first, Self.isValidKeyID(id) else {
                throw reader.error(
                    "http.signingKeys",
                    reason: "expected entries `id:secret`, the id 1…32 letters, digits, `-` or `_` (got \(entry.debugDescription))")
            }
            guard parts[1].utf8.count >= 16 else {
                throw reader.error("http.signingKeys", reason: "the secret of key \(String(id).debugDescription) must be at least 16 bytes")
            }
            guard settings.signingKeys.updateValue(String(parts[1]), forKey: String(id)) == nil else {
                throw reader.error("http.signingKeys", reason: "key id \(String(id).debugDescription) is listed twice")
            }
        }
        settings.presets = try readPresets(from: &reader)
        settings.presetsOnly = try reader.bool("http.presetsOnly")
        settings.watermarks = try readNamed(from: &reader, "http.watermarks", what: "watermark", example: "logo: file:/etc/strata/logo.png")
        if settings.presetsOnly, settings.presets.isEmpty {
            throw reader.error(
                "http.presetsOnly", reason: "is true but http.presets lists no preset: every /images request would be refused")
        }
        settings.animationLimits = AnimationLimits(
            maxFrames: try reader.integer("source.maxFrames", min: 1),
            maxTotalPixels: try reader.integer("source.maxAnimationPixels", min: 1))
        settings.cacheControl = try reader.string("http.cacheControl") ?? ""
        settings.maxDimension = try reader.integer("http.maxDimension", min: 1)
        settings.maxQueue = try reader.integer("http.maxQueue", min: 0)
        settings.retryAfter = try reader.duration("http.retryAfter")
        settings.encodedCacheCostLimit = try reader.bytes("http.encodedCacheSize")
        let quality = try reader.integer("http.quality", min: 1)
        guard quality <= 100 else { throw reader.error("http.quality", reason: "expected 1…100") }
        settings.quality = quality
        let avifQuality = try reader.integer("http.avifQuality", min: 1)
        guard avifQuality <= 100 else { throw reader.error("http.avifQuality", reason: "expected 1…100") }
        settings.avifQuality = avifQuality
        let avifSpeed = try reader.integer("http.avifSpeed", min: 0)
        guard avifSpeed <= 10 else {
            throw reader.error("http.avifSpeed", reason: "expected 0 (smallest files, slowest) … 10 (fastest)")
        }
        settings.avifSpeed = avifSpeed
        settings.formats = try readFormats(from: &reader)
        settings.headerTimeout = try reader.duration("http.headerTimeout")
        guard settings.headerTimeout > .zero else { throw reader.error("http.headerTimeout", reason: "must be longer than 0s") }
        settings.idleTimeout = try reader.duration("http.idleTimeout")
        guard settings.idleTimeout > .zero else { throw reader.error("http.idleTimeout", reason: "must be longer than 0s") }
        settings.maxConnections = try reader.integer("http.maxConnections", min: 1)
        if let name = try reader.string("http.nodeName") {
            guard Self.isValidNodeName(name) else {
                throw reader.error(
                    "http.nodeName", reason: "expected 1…64 characters, each a letter, a digit or one of `-._:` (e.g. `node-1`)")
            }
            settings.nodeName = name
        }
        return settings
    }

    /// `http.presets`: entries `name: parameters`, the name 1…32 letters, digits, `-` or `_`
    /// (it is written into URLs as it is), each name once, the parameters not empty. The
    /// parameters themselves are checked by the service (``HTTPServiceSettings/presets``).
    package static func readPresets(from reader: inout KeyReader) throws(ConfigurationError) -> [String: String] {
        var presets: [String: String] = [:]
        for entry in try reader.list("http.presets") {
            let parts = entry.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts.first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard parts.count == 2, isValidPresetName(Substring(name)) else {
                throw reader.error(
                    "http.presets",
                    reason:
                        "expected entries `name: parameters` (e.g. `thumb: w=256 h=256 mode=fill`), the name 1…32 letters, digits, `-` or `_` (got \(entry.debugDescription))"
                )
            }
            let parameters = parts[1].trimmingCharacters(in: .whitespaces)
            guard !parameters.isEmpty else {
                throw reader.error(
                    "http.presets", reason: "preset \(name.debugDescription) names no parameters (e.g. `\(name): w=256 h=256`)")
            }
            guard presets.updateValue(parameters, forKey: name) == nil else {
                throw reader.error("http.presets", reason: "preset \(name.debugDescription) is listed twice")
            }
        }
        return presets
    }

    /// Entries `name: value` of the named key `key` (`http.watermarks`), the name as a preset's,
    /// each once, the value not empty.
    package static func readNamed(
        from reader: inout KeyReader, _ key: String, what: String, example: String
    ) throws(ConfigurationError) -> [String: String] {
        var entries: [String: String] = [:]
        for entry in try reader.list(key) {
            let parts = entry.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts.first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            let value = parts.count == 2 ? parts[1].trimmingCharacters(in: .whitespaces) : ""
            guard parts.count == 2, isValidPresetName(Substring(name)), !value.isEmpty else {
                throw reader.error(
                    key,
                    reason:
                        "expected entries `name: value` (e.g. `\(example)`), the name 1…32 letters, digits, `-` or `_` (got \(entry.debugDescription))"
                )
            }
            guard entries.updateValue(value, forKey: name) == nil else {
                throw reader.error(key, reason: "\(what) \(name.debugDescription) is listed twice")
            }
        }
        return entries
    }

    /// A preset's name: 1…32 letters, digits, `-` or `_` (a key id's characters).
    package static func isValidPresetName(_ name: Substring) -> Bool {
        isValidKeyID(name)
    }

    /// The formats negotiation may answer in.
    public static let negotiableFormats: [ImageFormat] = [.avif, .jxl, .webp, .jpeg, .png]

    /// `http.formats`: formats of ``negotiableFormats``, each once, JPEG or PNG among them (an
    /// answer every client decodes).
    package static func readFormats(from reader: inout KeyReader) throws(ConfigurationError) -> [ImageFormat] {
        let names = Self.negotiableFormats.map(\.rawValue).joined(separator: ", ")
        var formats: [ImageFormat] = []
        for entry in try reader.list("http.formats") {
            guard let format = ImageFormat(rawValue: entry.lowercased()), Self.negotiableFormats.contains(format) else {
                throw reader.error(
                    "http.formats", reason: "\(entry.debugDescription) is not a format answers are negotiated in: use \(names)")
            }
            guard !formats.contains(format) else {
                throw reader.error("http.formats", reason: "\(entry.debugDescription) is listed twice")
            }
            formats.append(format)
        }
        guard formats.contains(.jpeg) || formats.contains(.png) else {
            throw reader.error(
                "http.formats", reason: "list jpeg or png (or both): the answer for a client that accepts none of AVIF, JPEG XL and WebP")
        }
        return formats
    }

    /// Whether `name` can be an HTTP header value and a Prometheus label value as it is.
    package static func isValidNodeName(_ name: String) -> Bool {
        isName(Substring(name), maxBytes: 64, punctuation: "-._:")
    }

    /// The machine's host name, or `strata` when it has none usable as a node name.
    package static func hostName() -> String {
        guard let name = HostName.current, isValidNodeName(name) else { return "strata" }
        return name
    }
}
