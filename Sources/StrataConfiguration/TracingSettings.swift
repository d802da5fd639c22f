import Strata

/// The settings of `strata serve`'s tracing (the `tracing.*` keys): whether spans are made and
/// exported, where (an OTLP/HTTP endpoint), which share of traces, under which service name, and
/// whether spans may name keys.
///
/// A value type read with the rest of ``StrataConfiguration``; `strata serve` turns it into
/// swift-otel's OTLP/HTTP exporter, and ``ConfiguredImageCache`` into the engine's
/// `EngineTracing`. Off by default; cost when off: nothing at run time.
public struct TracingSettings: Sendable, Equatable {
    /// The encoding of exported spans (`tracing.protocol`).
    public enum WireProtocol: String, Sendable, Equatable, CaseIterable {
        /// OTLP/HTTP with protobuf bodies (`http/protobuf`, the collectors' default).
        case protobuf = "http/protobuf"
        /// OTLP/HTTP with JSON bodies (`http/json`).
        case json = "http/json"
    }

    /// Makes and exports spans (`tracing.enabled`).
    public var enabled = false
    /// Where spans are sent: the whole URL of an OTLP/HTTP traces endpoint, path included.
    public var endpoint = "http://127.0.0.1:4318/v1/traces"
    /// The body encoding.
    public var wireProtocol: WireProtocol = .protobuf
    /// Share of traces sampled (0…1), by trace id; a request that arrives with a `traceparent`
    /// follows its caller's decision.
    public var samplingRatio = 1.0
    /// `service.name` of the exported spans.
    public var serviceName = "strata"
    /// Spans carry the raw key (`strata.key`) beside its digest.
    public var includeKeys = false

    public init() {}
}

extension TracingSettings {
    /// Reads every `tracing.*` key.
    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> TracingSettings {
        var settings = TracingSettings()
        settings.enabled = try reader.bool("tracing.enabled")
        let endpoint = try reader.string("tracing.endpoint") ?? settings.endpoint
        let lower = endpoint.lowercased()
        guard lower.hasPrefix("http://") || lower.hasPrefix("https://"), endpoint.utf8.count > "https://".utf8.count else {
            throw reader.error("tracing.endpoint", reason: "must be an http:// or https:// URL (an OTLP/HTTP traces endpoint)")
        }
        settings.endpoint = endpoint
        settings.wireProtocol = try reader.choice("tracing.protocol", WireProtocol.allCases.map { ($0.rawValue, $0) })
        settings.samplingRatio = try reader.number("tracing.samplingRatio", in: 0...1)
        guard let name = try reader.string("tracing.serviceName") else {
            throw reader.error("tracing.serviceName", reason: "must not be empty")
        }
        settings.serviceName = name
        settings.includeKeys = try reader.bool("tracing.includeKeys")
        return settings
    }
}
