import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import Strata
import StrataConfiguration

/// `strata serve`: the engine behind HTTP (Hummingbird 2), as a swift-service-lifecycle
/// `Service`.
///
/// Routes: `GET /images/{key}?w=&h=&mode=&tolerance=&format=&quality=&exact=` or
/// `?preset=NAME` (the image; see ``ImageParameters`` and ``ImagePresets``), `GET /metrics`
/// (Prometheus text: the engine's and the HTTP metrics), `GET /iiif/3/…` and `GET /iiif/2/…` (the IIIF Image API, ``IIIFRoute``), `GET /healthz`, `GET /stats` (per-tier JSON). Run it in a `ServiceGroup`: on
/// graceful shutdown (SIGTERM, SIGINT) it stops accepting connections, lets in-flight requests
/// finish, then flushes the disk tier's write-behind queue and closes the engine's tiers and
/// its HTTP origin client (`ConfiguredImageCache.shutdown()`).
///
/// Cost: one engine, one encoded cache (`http.encodedCacheSize`), Hummingbird's event loops.
public final class StrataServer: Service, Sendable {
    public let configured: ConfiguredImageCache
    public let metrics: ServiceMetrics
    public let settings: HTTPServiceSettings
    public let iiifSettings: IIIFSettings
    /// `thumbor.*`: thumbor's URLs (docs/Thumbor.md).
    public let thumborSettings: ThumborSettings
    package let encoded: EncodedCache
    /// The encodes in flight (``EncodedResponder/encodes``).
    package let encodes = EncodeCoalescer()
    package let logger: Logger
    package let onListening: @Sendable (_ host: String, _ port: Int) async -> Void
    package let started = ContinuousClock.now
    /// `source.maxPixels`: `/images` requests of larger originals come from their tile pyramids.
    package let sourceMaxPixels: Int
    package let probes: ServiceProbes
    /// `color.output` in force: new requests read it; ``apply(_:)`` changes it.
    package let colour: ColourChoice
    /// `http.presets` and `http.presetsOnly` in force: new requests read them; ``apply(_:)``
    /// changes them.
    package let presets: PresetChoice
    /// `http.watermarks` in force: ``apply(_:)`` replaces them.
    package let watermarks: Watermarks

    /// Builds the engine from `configuration` (its metrics go to this server's registry).
    /// `onListening` is called once the socket is bound, with the port (useful with
    /// `http.port` 0).
    public convenience init(
        configuration: StrataConfiguration, logger: Logger = Logger(label: "strata.serve"),
        onListening: @escaping @Sendable (_ host: String, _ port: Int) async -> Void = { _, _ in }
    ) throws(ConfigurationError) {
        try self.init(configuration: configuration, logger: logger, probes: ServiceProbes(), onListening: onListening)
    }

    /// The same with test seams.
    package init(
        configuration: StrataConfiguration, logger: Logger, probes: ServiceProbes,
        onListening: @escaping @Sendable (_ host: String, _ port: Int) async -> Void
    ) throws(ConfigurationError) {
        self.probes = probes
        let metrics = ServiceMetrics(node: configuration.http.nodeName)
        self.metrics = metrics
        self.settings = configuration.http
        self.iiifSettings = configuration.iiif
        self.thumborSettings = configuration.thumbor
        self.sourceMaxPixels = configuration.render.maxPixels
        self.logger = logger
        self.onListening = onListening
        self.colour = ColourChoice(configuration.colourOutput)
        self.presets = PresetChoice(try ImagePresets(configuration))
        self.watermarks = try Watermarks(configuration)
        configured = try ConfiguredImageCache(configuration, logger: logger, metricsFactory: metrics.factory)
        encoded = EncodedCache(costLimit: configuration.http.encodedCacheCostLimit)
    }

    public var cache: ImageCache { configured.cache }

    /// Checks what the service itself reads of a configuration beyond its keys' syntax: each
    /// preset of `http.presets` parsed as `/images` parameters, with the `http.maxDimension` in
    /// force (it changes only with a restart). Pass it as the reloader's `check`, so a bad
    /// preset refuses the reload (naming `http.presets` and the preset) before anything applies.
    public func check(_ configuration: StrataConfiguration) throws(ConfigurationError) {
        _ = try presets(of: configuration)
        _ = try Watermarks(configuration)
    }

    /// The presets of `configuration`, checked against the `http.maxDimension` in force.
    private func presets(of configuration: StrataConfiguration) throws(ConfigurationError) -> ImagePresets {
        var running = configuration
        running.http.maxDimension = settings.maxDimension
        return try ImagePresets(running)
    }

    /// Applies the settings of a reloaded configuration that the service itself holds
    /// (`color.output`, `http.presets`, `http.presetsOnly`; the engine's are
    /// `ImageCache.reconfigure(_:)`'s): new requests use them. Pass it as the reloader's
    /// `onApply` (after ``check(_:)`` as its `check`).
    public func apply(_ configuration: StrataConfiguration) {
        if colour.current != configuration.colourOutput {
            logger.info("color.output changed", metadata: ["value": "\(configuration.colourOutput.rawValue)"])
        }
        colour.set(configuration.colourOutput)
        do {
            if presets.set(try presets(of: configuration)) {
                logger.info(
                    "http.presets changed",
                    metadata: [
                        "presets": "\(configuration.http.presets.keys.sorted().joined(separator: ", "))",
                        "presetsOnly": "\(configuration.http.presetsOnly)",
                    ])
            }
        } catch {
            // Only when `check` was not run first: the presets in force stay.
            logger.error("http.presets refused; the presets in force stay", metadata: ["error": "\(error)"])
        }
        do {
            if try watermarks.set(configuration) {
                logger.info("http.watermarks changed", metadata: ["watermarks": "\(watermarks.names.joined(separator: ", "))"])
            }
        } catch {
            logger.error("http.watermarks refused; the watermarks in force stay", metadata: ["error": "\(error)"])
        }
    }

    public func run() async throws {
        if !settings.signsURLs {
            logger.warning(
                "http.signingKey is not set: any key at any size up to http.maxDimension may be requested (set it, and sign URLs with `strata sign`)"
            )
        }
        if iiifSettings.pyramidPathIsDefault, let path = iiifSettings.pyramidPath {
            logger.info(
                "tile pyramids of big originals go beside the disk tier (iiif.pyramidPath unset; `off` turns them off)",
                metadata: ["path": "\(path)", "iiif.pyramidBytes": "\(iiifSettings.pyramidBytes)"])
        }
        let metrics = self.metrics
        let encodedResponder = EncodedResponder(
            cache: configured.cache, encoded: encoded, settings: settings, metrics: metrics, probes: probes, colour: colour,
            encodes: encodes)
        let signer = URLSigner(keys: settings.signingKeys, defaultKey: settings.signingKey)
        let originals = IIIFOriginals()
        let images = ImageEndpoint(
            cache: configured.cache, encoded: encoded, settings: settings, signer: signer, responder: encodedResponder,
            presets: presets, watermarks: watermarks, pyramids: configured.pyramids, originals: originals, sourceMaxPixels: sourceMaxPixels,
            access: AccessGate(iiifSettings.auth))
        let iiif = IIIFEndpoint(
            cache: configured.cache, settings: iiifSettings, http: settings, originals: originals, responder: encodedResponder,
            pyramids: configured.pyramids)
        var responder = ServiceResponder(
            images: images,
            iiif: iiif,
            purge: PurgeEndpoint(
                cache: configured.cache, encoded: encoded, originals: originals, profiles: encodedResponder.originalProfiles,
                pyramids: configured.pyramids, adminToken: settings.adminToken),
            health: DeepHealth(cache: configured.cache, probes: probes),
            cache: configured.cache, encoded: encoded, metrics: metrics, started: started, node: settings.nodeName)
        let thumbor = thumborSettings.enabled ? ThumborEndpoint(images: images, settings: thumborSettings) : nil
        responder.thumbor = thumbor
        if iiif.access.isEnabled {
            responder.auth = IIIFAuthEndpoint(gate: iiif.access, fallbackAuthority: "\(settings.host):\(settings.port)")
        }
        let host = settings.host
        let onListening = self.onListening
        let logger = self.logger
        let node = settings.nodeName
        let limits = ConnectionLimits(settings)
        let app = Application(
            responder: responder,
            // Warm image requests are answered on the event loop, before Hummingbird's tasks.
            server: HTTPServerBuilder { responder in
                WarmHTTP1Channel(
                    http1: HTTP1Channel(responder: responder), endpoint: images, iiif: iiif, thumbor: thumbor, metrics: metrics,
                    limits: limits)
            },
            configuration: .init(address: .hostname(host, port: settings.port), serverName: "strata"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? 0
                logger.info("listening", metadata: ["host": "\(host)", "port": "\(port)", "node": "\(node)"])
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

}
