import HTTPTypes
import Hummingbird
import Logging
import NIOHTTP1
import ServiceLifecycle
import Strata
import StrataConfiguration
import Tracing

// The service's spans (ServiceResponder's server span, the warm path's, propagation from request
// headers): swift-distributed-tracing only. The backend that exports them (swift-otel, in
// `strata serve`: Sources/strata/ServiceTracing.swift) is bootstrapped by the executable, so an
// embedder of StrataService picks its own or none.

// MARK: Server spans

extension ServiceResponder {
    /// `respond(to:context:)` under a server span (OpenTelemetry's HTTP server conventions):
    /// named by the method and route template, the caller's `traceparent` as its parent, the
    /// status, the answering tier and the body's size as attributes; the engine's and the
    /// encoder's spans are its children. The path, which holds the key, only with
    /// `tracing.includeKeys`.
    package func tracedResponse(to request: Request, context: Context) async throws -> Response {
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
    package static func describe(_ span: any Span, status: Int, tier: String?) {
        span.attributes["http.response.status_code"] = status
        if let tier { span.attributes["strata.tier"] = tier }
        if status >= 500 { span.setStatus(SpanStatus(code: .error)) }
    }

    /// The route of `path` as a template (`/images/{key}`): the span's name, low cardinality.
    package static func routeTemplate(of path: String) -> String {
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
    package static func traceWarmAnswer(_ head: HTTPRequestHead, start: DefaultTracerClock.Instant, includeKeys: Bool) {
        var parent = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(head.headers, into: &parent, using: NIOHeadersExtractor())
        let path = String(head.uri.prefix { $0 != "?" })
        let route = ServiceResponder.routeTemplate(of: path)
        let span = InstrumentationSystem.tracer.startSpan("GET \(route)", context: parent, ofKind: .server, at: start)
        span.attributes["http.request.method"] = "GET"
        span.attributes["http.route"] = route
        span.attributes["url.scheme"] = "http"
        span.attributes["network.protocol.version"] = "1.1"
        if includeKeys { span.attributes["url.path"] = path }
        span.attributes["strata.warm"] = true
        ServiceResponder.describe(span, status: 200, tier: "encoded")
        span.end()
    }
}

/// Reads propagated context (`traceparent`, `tracestate`) from a request's HTTP fields.
package struct HTTPFieldsExtractor: Extractor {
    package func extract(key: String, from carrier: HTTPFields) -> String? {
        guard let name = HTTPField.Name(key) else { return nil }
        return carrier[name]
    }
}

/// Reads propagated context from NIO's request headers (the warm path's).
package struct NIOHeadersExtractor: Extractor {
    package func extract(key: String, from carrier: HTTPHeaders) -> String? {
        carrier.first(name: key)
    }
}
