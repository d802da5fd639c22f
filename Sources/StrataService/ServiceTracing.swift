import HTTPTypes
import Hummingbird
import Logging
import NIOHTTP1
import OTel
import ServiceLifecycle
import Strata
import StrataConfiguration
import Tracing

/// `strata serve`'s tracing backend: swift-otel's tracer, exporting spans over OTLP/HTTP (no
/// gRPC) as the `tracing.*` keys say (`TracingSettings`), and its logging bridge (the current
/// trace and span ids in every log line's metadata).
///
/// Use ``bootstrap(_:logger:)`` once per process, before the server starts, and run the service
/// it returns in the same `ServiceGroup`, listed before the server: the group stops it after the
/// server, so the spans of the last requests are flushed. Cost when tracing is off: nothing is
/// bootstrapped (the tracer stays swift-distributed-tracing's no-op), and the service's and the
/// engine's span sites test one flag; when on, each span costs what swift-otel makes of it
/// (an unsampled span: no export).
public enum ServiceTracing {
    /// swift-otel's configuration for `settings`: traces only (metrics and logs stay with
    /// Prometheus and swift-log), OTLP/HTTP to the endpoint, a parent-based trace-id ratio
    /// sampler, W3C Trace Context propagation. swift-otel's `OTEL_*` environment variables,
    /// when set, override these values.
    public static func configuration(_ settings: TracingSettings, logger: Logger) throws(ConfigurationError) -> OTel.Configuration {
        var configuration = OTel.Configuration.default
        configuration.serviceName = settings.serviceName
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        configuration.propagators = [.traceContext]
        configuration.metrics.enabled = false
        configuration.logs.enabled = false
        configuration.traces.enabled = true
        guard
            let sampler = OTel.Configuration.TracesConfiguration.SamplerConfiguration.parentBasedTraceIDRatio(ratio: settings.samplingRatio)
        else {
            throw ConfigurationError(key: "tracing.samplingRatio", value: "\(settings.samplingRatio)", reason: "must be within 0...1")
        }
        configuration.traces.sampler = sampler
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.endpoint = settings.endpoint
        configuration.traces.otlpExporter.protocol = settings.wireProtocol == .json ? .httpJSON : .httpProtobuf
        return configuration
    }

    /// Bootstraps swift-otel's tracer as the process's (`InstrumentationSystem`) when
    /// `settings.enabled`, and returns the service that exports its spans; `nil` (nothing done)
    /// when tracing is off. Call it once per process.
    public static func bootstrap(_ settings: TracingSettings, logger: Logger) throws(ConfigurationError) -> (any Service)? {
        guard settings.enabled else { return nil }
        let configuration = try configuration(settings, logger: logger)
        do {
            let backend = try OTel.makeTracingBackend(configuration: configuration)
            InstrumentationSystem.bootstrap(backend.factory)
            logger.info(
                "tracing: spans exported over OTLP/HTTP",
                metadata: [
                    "endpoint": "\(settings.endpoint)", "protocol": "\(settings.wireProtocol.rawValue)",
                    "samplingRatio": "\(settings.samplingRatio)", "serviceName": "\(settings.serviceName)",
                ])
            return backend.service
        } catch {
            throw ConfigurationError(
                key: "tracing.endpoint", value: settings.endpoint, reason: "cannot start the OTLP/HTTP exporter: \(error)")
        }
    }

    /// swift-otel's logging bridge: adds `trace_id` and `span_id` of the task's current span to
    /// a log line's metadata (nothing without one). Give it to `LoggingSystem.bootstrap`.
    public static var loggingMetadataProvider: Logger.MetadataProvider { OTel.makeLoggingMetadataProvider() }
}

// MARK: Server spans

extension ServiceResponder {
    /// `respond(to:context:)` under a server span (OpenTelemetry's HTTP server conventions):
    /// named by the method and route template, the caller's `traceparent` as its parent, the
    /// status, the answering tier and the body's size as attributes; the engine's and the
    /// encoder's spans are its children. The path, which holds the key, only with
    /// `tracing.includeKeys`.
    func tracedResponse(to request: Request, context: Context) async throws -> Response {
        var parent = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(request.headers, into: &parent, using: HTTPFieldsExtractor())
        let route = Self.routeTemplate(of: request.uri.path)
        let method = request.method.rawValue
        let span = InstrumentationSystem.tracer.startAnySpan("\(method) \(route)", context: parent, ofKind: .server)
        defer { span.end() }
        span.attributes["http.request.method"] = method
        span.attributes["http.route"] = route
        span.attributes["url.scheme"] = "http"
        span.attributes["network.protocol.version"] = "1.1"
        if cache.options.tracing.includesKeys { span.attributes["url.path"] = request.uri.path }
        let response = try await ServiceContext.$current.withValue(span.context) {
            try await respondUntraced(to: request, context: context)
        }
        Self.describe(span, status: Int(response.status.code), tier: response.headers[EncodedResponder.tier])
        if let length = response.body.contentLength { span.attributes["http.response.body.size"] = length }
        return response
    }

    /// A response's attributes on its server span; a 5xx marks it as an error.
    static func describe(_ span: any Span, status: Int, tier: String?) {
        span.attributes["http.response.status_code"] = status
        if let tier { span.attributes["strata.tier"] = tier }
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }

    /// The route of `path` as a template (`/images/{key}`): the span's name, low cardinality.
    static func routeTemplate(of path: String) -> String {
        if path.hasPrefix(ImageParameters.prefix) { return "/images/{key}" }
        if path.hasPrefix(IIIFRoute.prefix) { return "/iiif/{version}/{identifier}" }
        switch path {
        case "/healthz", "/stats", "/viewer", "/metrics": return path
        default: return "other"
        }
    }
}

extension WarmPathHandler {
    /// The server span of a request answered on the warm path, from `start` (taken only when
    /// tracing is on) to now; its parent is the request's `traceparent`, if any.
    static func traceWarmAnswer(_ head: HTTPRequestHead, start: DefaultTracerClock.Instant, includeKeys: Bool) {
        var parent = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(head.headers, into: &parent, using: NIOHeadersExtractor())
        let span = InstrumentationSystem.tracer.startSpan("GET /images/{key}", context: parent, ofKind: .server, at: start)
        span.attributes["http.request.method"] = "GET"
        span.attributes["http.route"] = "/images/{key}"
        span.attributes["url.scheme"] = "http"
        span.attributes["network.protocol.version"] = "1.1"
        if includeKeys { span.attributes["url.path"] = String(head.uri.prefix { $0 != "?" }) }
        span.attributes["strata.warm"] = true
        ServiceResponder.describe(span, status: 200, tier: "encoded")
        span.end()
    }
}

/// Reads propagated context (`traceparent`, `tracestate`) from a request's HTTP fields.
struct HTTPFieldsExtractor: Extractor {
    func extract(key: String, from carrier: HTTPFields) -> String? {
        guard let name = HTTPField.Name(key) else { return nil }
        return carrier[name]
    }
}

/// Reads propagated context from NIO's request headers (the warm path's).
struct NIOHeadersExtractor: Extractor {
    func extract(key: String, from carrier: HTTPHeaders) -> String? {
        carrier.first(name: key)
    }
}
