import Foundation
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle
import Strata

/// `strata serve`: the engine behind HTTP (Hummingbird 2), as a swift-service-lifecycle
/// `Service`.
///
/// Routes: `GET /images/{key}?w=&h=&mode=&tolerance=&format=&quality=&exact=` (the image;
/// see ``ImageParameters``), `GET /metrics` (Prometheus text: the engine's and the HTTP
/// metrics), `GET /healthz`, `GET /stats` (per-tier JSON). Run it in a `ServiceGroup`: on
/// graceful shutdown (SIGTERM, SIGINT) it stops accepting connections, lets in-flight requests
/// finish, then flushes the disk tier's write-behind queue and closes the engine's tiers and
/// its HTTP origin client (``ConfiguredImageCache/shutdown()``).
///
/// Cost: one engine, one encoded cache (`http.encodedCacheSize`), Hummingbird's event loops.
public final class StrataServer: Service, Sendable {
    public let configured: ConfiguredImageCache
    public let metrics: ServiceMetrics
    public let settings: HTTPServiceSettings
    let encoded: EncodedCache
    let logger: Logger
    let onListening: @Sendable (_ host: String, _ port: Int) async -> Void
    let started = ContinuousClock.now

    /// Builds the engine from `configuration` (its metrics go to this server's registry).
    /// `onListening` is called once the socket is bound, with the port (useful with
    /// `http.port` 0).
    public init(
        configuration: StrataConfiguration, logger: Logger = Logger(label: "strata.serve"),
        onListening: @escaping @Sendable (_ host: String, _ port: Int) async -> Void = { _, _ in }
    ) throws(ConfigurationError) {
        let metrics = ServiceMetrics()
        self.metrics = metrics
        self.settings = configuration.http
        self.logger = logger
        self.onListening = onListening
        configured = try ConfiguredImageCache(configuration, logger: logger, metricsFactory: metrics.factory)
        encoded = EncodedCache(costLimit: configuration.http.encodedCacheCostLimit)
    }

    public var cache: ImageCache { configured.cache }

    public func run() async throws {
        if settings.signingKey == nil {
            logger.warning(
                "http.signingKey is not set: any key at any size up to http.maxDimension may be requested (set it, and sign URLs with `strata sign`)"
            )
        }
        let router = Router()
        let images = ImageEndpoint(
            cache: configured.cache, encoded: encoded, settings: settings, signer: settings.signingKey.map(URLSigner.init(key:)),
            metrics: metrics)
        let metrics = self.metrics
        router.get("/images/**") { request, _ -> Response in
            let started = ContinuousClock.now
            let (response, tier) = await images.respond(to: request)
            if let tier { metrics.served(by: tier) }
            metrics.record(route: "images", status: response.status.code, nanoseconds: Self.nanoseconds(since: started))
            return response
        }
        router.get("/healthz") { _, _ -> Response in
            metrics.record(route: "healthz", status: 200, nanoseconds: 0)
            return Response(
                status: .ok, headers: [.contentType: "text/plain", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(string: "ok\n")))
        }
        let cache = configured.cache
        let encoded = self.encoded
        let since = started
        router.get("/stats") { _, _ -> Response in
            let began = ContinuousClock.now
            let body = ServiceStatistics(cache: cache, encoded: encoded, uptime: .now - since).json()
            metrics.record(route: "stats", status: 200, nanoseconds: Self.nanoseconds(since: began))
            return Response(
                status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: body)))
        }
        router.get("/metrics") { _, _ -> Response in
            let began = ContinuousClock.now
            cache.publishGauges()
            if let stats = encoded.statistics {
                metrics.encodedBytes.record(stats.totalCost)
                metrics.encodedEntries.record(stats.count)
                metrics.encodedHits.record(Int(stats.hits))
            }
            metrics.record(route: "metrics", status: 200, nanoseconds: Self.nanoseconds(since: began))
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                body: .init(byteBuffer: ByteBuffer(bytes: metrics.exposition())))
        }
        let host = settings.host
        let onListening = self.onListening
        let logger = self.logger
        let app = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: settings.port), serverName: "strata"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info("listening", metadata: ["host": "\(host)", "port": "\(port)"])
                await onListening(host, port)
            },
            logger: logger)
        do {
            try await app.run()
        } catch {
            await configured.shutdown()
            throw error
        }
        // The server has stopped accepting and its requests have finished: publish the disk
        // tier's queued writes and close what the engine opened.
        await configured.shutdown()
        logger.info("stopped")
    }

    static func nanoseconds(since start: ContinuousClock.Instant) -> Int64 {
        let d = ContinuousClock.now - start
        return d.components.seconds * 1_000_000_000 + d.components.attoseconds / 1_000_000_000
    }
}
