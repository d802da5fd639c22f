import HTTPTypes
import Hummingbird
import NIOCore
import Strata

/// The service's routes, dispatched on the path: `/images/…`, `/iiif/{3|2}/…`, `/viewer`, `/healthz`, `/stats`,
/// `/metrics`, and `DELETE` of an image's or IIIF identifier's URL (``PurgeEndpoint``);
/// anything else is a JSON 404, another method than GET, HEAD (answered as GET, without the body) or DELETE a JSON 405. A switch on
/// the path instead of a router: one prefix test for the hot route.
package struct ServiceResponder: HTTPResponder {
    package typealias Context = BasicRequestContext

    package let images: ImageEndpoint
    package let iiif: IIIFEndpoint
    /// thumbor's URLs (`nil` unless `thumbor.enabled`).
    package var thumbor: ThumborEndpoint? = nil
    /// IIIF Authorization Flow 2.0's services (`nil` unless `iiif.auth.rules` restrict a key).
    package var auth: IIIFAuthEndpoint? = nil
    package let purge: PurgeEndpoint
    package let health: DeepHealth
    package let cache: ImageCache
    package let encoded: EncodedCache
    package let metrics: ServiceMetrics
    package let started: ContinuousClock.Instant
    package let node: String

    package func respond(to request: Request, context: Context) async throws -> Response {
        // One flag when tracing is off (`tracing.enabled`).
        if cache.options.tracing.isEnabled { return try await tracedResponse(to: request, context: context) }
        return try await respondUntraced(to: request, context: context)
    }

    /// The response, without a span of its own.
    package func respondUntraced(to request: Request, context: Context) async throws -> Response {
        let began = ContinuousClock.now
        let path = request.uri.path
        let route: String
        var response: Response
        if let auth, path.hasPrefix(IIIFAuthEndpoint.prefix) {
            // The probe's CORS preflight; the click-through's POST; the rest GET.
            route = "iiif-auth"
            if request.method == .options {
                response = IIIFAuthEndpoint.preflight()
            } else if request.method == .get || request.method == .head || request.method == .post {
                response = auth.respond(to: request)
            } else {
                response = ServiceError(.methodNotAllowed, "method_not_allowed", "the IIIF auth services answer GET (and POST, to accept)")
                    .response(headers: [.allow: "GET, HEAD, POST, OPTIONS"])
            }
        } else if request.method == .options, path.hasPrefix(IIIFRoute.prefix) {
            // The preflight of a tile or info.json request with `Authorization` (a viewer's token).
            route = "iiif"
            response = IIIFAuthEndpoint.preflight()
        } else if request.method == .delete, path.hasPrefix(ImageParameters.prefix) || path.hasPrefix(IIIFRoute.prefix) {
            route = "purge"
            response = await purge.respond(to: request)
        } else if request.method != .get, request.method != .head {
            // HEAD is answered as GET is; NIO's response encoder leaves the body out.
            route = "other"
            let allowed = path.hasPrefix(ImageParameters.prefix) || path.hasPrefix(IIIFRoute.prefix) ? "GET, HEAD, DELETE" : "GET, HEAD"
            response = ServiceError(.methodNotAllowed, "method_not_allowed", "only GET and HEAD are served (and DELETE, to purge an image)")
                .response(headers: [.allow: allowed])
        } else if path.hasPrefix(ImageParameters.prefix) {
            route = "images"
            // What the warm path parsed of this request, when it passed it on.
            var handedOver: PreparedHandOff.Parse?
            if case .images(let parse)? = PreparedHandOff.current?.take(for: request.uri.string) { handedOver = parse }
            let (answer, tier) = await images.respond(to: request, handedOver: handedOver)
            if let tier { metrics.served(by: tier) }
            response = answer
        } else if path.hasPrefix(IIIFRoute.prefix) {
            route = "iiif"
            // The warm path's memory lookup for this request, when it made one.
            var handedOver: PreparedHandOff.IIIFLookup?
            if case .iiif(let lookup)? = PreparedHandOff.current?.take(for: request.uri.string) { handedOver = lookup }
            let (answer, tier) = await iiif.respond(to: request, handedOver: handedOver)
            if let tier { metrics.served(by: tier) }
            response = answer
        } else if let thumbor, !thumbor.settings.prefix.isEmpty, thumbor.answers(path) {
            route = "thumbor"
            let (answer, tier) = await thumbor.respond(to: request)
            if let tier { metrics.served(by: tier) }
            response = answer
        } else {
            switch path {
            case "/healthz":
                route = "healthz"
                if let deep = request.uri.queryParameters["deep"], deep == "1" || deep == "true" {
                    let report = await health.report()
                    if let failure = report.failure {
                        response = ServiceError(.serviceUnavailable, "unhealthy", "\(failure.part): \(failure.message)").response()
                    } else {
                        response = Self.answer("text/plain", ByteBuffer(string: "ok: \(report.parts.joined(separator: ", "))\n"))
                    }
                } else {
                    response = Self.answer("text/plain", ByteBuffer(string: "ok\n"))
                }
            case "/stats":
                route = "stats"
                response = Self.answer(
                    "application/json",
                    ByteBuffer(
                        bytes: ServiceStatistics(
                            node: node, cache: cache, encoded: encoded, pyramids: iiif.pyramids, uptime: .now - started
                        ).json()))
            case "/viewer":
                route = "viewer"
                response = Self.viewer(request)
            case "/metrics":
                route = "metrics"
                cache.publishGauges()
                if let stats = encoded.statistics {
                    metrics.encodedBytes.record(stats.totalCost)
                    metrics.encodedEntries.record(stats.count)
                    metrics.encodedHits.record(Int(stats.hits))
                }
                metrics.record(MemoryUse(cache: cache, encoded: encoded))
                let colour = ColourStatistics.current
                metrics.colourProfilesIgnored.record(colour.profilesIgnored)
                metrics.colourConversions.record(colour.conversions)
                response = Self.answer("text/plain; version=0.0.4; charset=utf-8", ByteBuffer(bytes: metrics.exposition()))
            default:
                if let thumbor, thumbor.answers(path) {
                    // thumbor at the root: every path the other routes do not take.
                    route = "thumbor"
                    let (answer, tier) = await thumbor.respond(to: request)
                    if let tier { metrics.served(by: tier) }
                    response = answer
                } else {
                    route = "other"
                    response = ServiceError(
                        .notFound, "not_found",
                        "no such endpoint: GET /images/{key}?w=&h=, /iiif/3/{identifier}/…, /viewer?id={key}, /metrics, /stats or /healthz"
                    )
                    .response()
                }
            }
        }
        response.headers[Self.nodeField] = node
        metrics.record(route: route, status: response.status.code, nanoseconds: Self.nanoseconds(since: began))
        return response
    }

    /// `GET /viewer?id=KEY`: the deep-zoom page of ``ViewerPage`` for the key (an unknown key
    /// still gets the page, which shows info.json's error); a missing or empty `id` is a JSON 400.
    package static func viewer(_ request: Request) -> Response {
        guard let id = request.uri.queryParameters["id"], !id.isEmpty else {
            return ServiceError.badParameter("GET /viewer needs ?id={key}").response()
        }
        return answer("text/html; charset=utf-8", ByteBuffer(string: ViewerPage.html(id: String(id))))
    }

    /// `X-Strata-Node`: which node of a cluster answered.
    package static let nodeField = HTTPField.Name("X-Strata-Node")!

    package static func answer(_ contentType: String, _ body: ByteBuffer) -> Response {
        Response(status: .ok, headers: [.contentType: contentType, .cacheControl: "no-store"], body: .init(byteBuffer: body))
    }

    package static func nanoseconds(since start: ContinuousClock.Instant) -> Int64 {
        let d = ContinuousClock.now - start
        return d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000
    }
}
