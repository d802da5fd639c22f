#if RemoteSources
import Foundation
import Strata
import StrataHTTPOrigin

extension HTTPSource.Configuration {
    /// Reads every `source.http.*` key into an origin's settings and checks them
    /// (``validate()``); `nil` when `source.http.baseURL` is unset (the other keys are still
    /// read, so that `strata config` shows them).
    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> HTTPSource.Configuration? {
        let base = try reader.string("source.http.baseURL")
        var origin = HTTPSource.Configuration(baseURL: base ?? "http://unset.invalid/")
        origin.connectTimeout = try reader.duration("source.http.connectTimeout")
        origin.readTimeout = try reader.duration("source.http.readTimeout")
        origin.totalTimeout = try reader.duration("source.http.totalTimeout")
        origin.maxBodyBytes = try reader.bytes("source.http.maxBodySize", min: 1)
        origin.maxRedirects = try reader.integer("source.http.maxRedirects", min: 0)
        origin.allowCrossHostRedirects = try reader.bool("source.http.allowCrossHostRedirects")
        origin.maxConcurrentRequests = try reader.integer("source.http.maxConcurrentRequests", min: 1)
        origin.retryBackoff = try reader.duration("source.http.retryBackoff")
        origin.maxRetries = try reader.integer("source.http.maxRetries", min: 0)
        origin.rememberedVersions = try reader.integer("source.http.rememberedVersions", min: 0)
        for line in try reader.list("source.http.headers") {
            let parts = line.split(separator: ":", maxSplits: 1)
            let name = parts.first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard parts.count == 2, !name.isEmpty else {
                throw reader.error("source.http.headers", reason: "each header must be `Name: value` (the value is not shown)")
            }
            origin.headers[name] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        guard base != nil else { return nil }
        do {
            try origin.validate()
        } catch {
            throw reader.error(error.key, reason: "expected \(error.allowed)")
        }
        return origin
    }
}
#endif
