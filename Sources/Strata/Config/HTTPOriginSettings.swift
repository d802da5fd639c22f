import Foundation

/// The `source.http.*` keys: an HTTP origin of originals and how to talk to it.
public struct HTTPOriginSettings: Sendable, Hashable {
    public var baseURL: String
    public var connectTimeout: Duration
    public var readTimeout: Duration
    public var totalTimeout: Duration
    public var maxBodySize: Int
    public var maxRedirects: Int
    public var allowCrossHostRedirects: Bool
    public var maxConcurrentRequests: Int
    /// Header name → value, sent with every request (secrets: never logged or printed).
    public var headers: [String: String]

    /// Reads every `source.http.*` key; `nil` when `source.http.baseURL` is unset.
    init?(reader: inout KeyReader) throws(ConfigurationError) {
        let base = try reader.string("source.http.baseURL")
        connectTimeout = try reader.duration("source.http.connectTimeout")
        readTimeout = try reader.duration("source.http.readTimeout")
        totalTimeout = try reader.duration("source.http.totalTimeout")
        maxBodySize = try reader.bytes("source.http.maxBodySize", min: 1)
        maxRedirects = try reader.integer("source.http.maxRedirects", min: 0)
        allowCrossHostRedirects = try reader.bool("source.http.allowCrossHostRedirects")
        maxConcurrentRequests = try reader.integer("source.http.maxConcurrentRequests", min: 1)
        headers = [:]
        for line in try reader.list("source.http.headers") {
            let parts = line.split(separator: ":", maxSplits: 1)
            let name = parts.first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard parts.count == 2, !name.isEmpty, name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
                throw reader.error("source.http.headers", reason: "each header must be `Name: value` (the value is not shown)")
            }
            headers[name] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        guard let base else { return nil }
        guard let url = URL(string: base), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
            url.host?.isEmpty == false, url.query == nil, url.fragment == nil
        else {
            throw reader.error("source.http.baseURL", reason: "must be an http:// or https:// URL with a host and no query or fragment")
        }
        baseURL = base
    }
}
