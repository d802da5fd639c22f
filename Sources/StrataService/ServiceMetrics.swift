import CoreMetrics
import Metrics
import Prometheus
import Strata

package typealias Counter = CoreMetrics.Counter
package typealias Gauge = CoreMetrics.Gauge
package typealias Timer = CoreMetrics.Timer

/// The service's Prometheus registry and its HTTP instruments. The engine's swift-metrics
/// (`ImageCache`'s counters, timers and gauges) are made through the same factory, so one
/// `GET /metrics` scrape shows both.
///
/// HTTP names: `strata_http_requests_total{route,status}`,
/// `strata_http_request_duration_seconds{route}` (a histogram),
/// `strata_http_images_total{tier}` (which tier answered an image: memory, disk, table, source,
/// encoded), `strata_http_warm_total` (image answers the warm path wrote on the event loop,
/// `WarmPathHandler`), `strata_http_shed_total`, `strata_http_encodes_total{format}` (encodes
/// run: one per encoding however many requests asked for it at once) and
/// `strata_http_encodes_joined_total` (requests that waited for another's encode,
/// `EncodedResponder`), and gauges `strata_encoded_cache_bytes`,
/// `strata_encoded_cache_entries`, `strata_encoded_cache_hits`, `strata_colour_profiles_ignored`
/// (embedded ICC profiles ignored as bad: the images were taken as sRGB) and
/// `strata_colour_conversions` (renders converted through a profile), both since the start. Every series, the engine's
/// included, carries a `node` label (`http.nodeName`; `NodeLabelledMetricsFactory`).
/// Cost: per request, two dictionary reads and three atomic adds; instruments are made once.
public final class ServiceMetrics: Sendable {
    /// What `/metrics` writes.
    public let registry: PrometheusCollectorRegistry
    /// The factory the engine is built with (Prometheus, every instrument labelled `node`).
    public let factory: any MetricsFactory

    /// Every route ``ServiceResponder`` and the warm path name (a route or status not listed
    /// here is counted through a lookup in the factory each time, without a duration).
    package static let routes = ["images", "iiif", "iiif-auth", "thumbor", "purge", "viewer", "metrics", "stats", "healthz", "other"]
    package static let statuses = [200, 204, 206, 302, 304, 400, 401, 403, 404, 405, 413, 416, 422, 429, 500, 502, 503, 504]

    private let requests: [String: [Int: Counter]]
    private let durations: [String: Timer]
    private let tiers: [String: Counter]
    package let shed: Counter
    package let warm: Counter
    private let encodes: [ResponseFormat: Counter]
    package let encodesJoined: Counter
    package let encodedBytes: Gauge
    package let encodedEntries: Gauge
    package let encodedHits: Gauge
    /// ``ColourStatistics`` (process-wide counts), published with the other gauges.
    package let colourProfilesIgnored: Gauge
    package let colourConversions: Gauge
    /// ``MemoryUse``'s parts, `strata_memory_bytes{part}`.
    private let memoryParts: [String: Gauge]

    public init(registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), node: String) {
        self.registry = registry
        var prometheus = PrometheusMetricsFactory(registry: registry)
        prometheus.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5),
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
            .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        ]
        let factory = NodeLabelledMetricsFactory(base: prometheus, node: node)
        self.factory = factory
        var requests: [String: [Int: Counter]] = [:]
        var durations: [String: Timer] = [:]
        for route in Self.routes {
            durations[route] = Timer(
                label: "strata_http_request_duration_seconds", dimensions: [("route", route)], preferredDisplayUnit: .seconds,
                factory: factory)
            var byStatus: [Int: Counter] = [:]
            for status in Self.statuses {
                byStatus[status] = Counter(
                    label: "strata_http_requests_total", dimensions: [("route", route), ("status", String(status))], factory: factory)
            }
            requests[route] = byStatus
        }
        self.requests = requests
        self.durations = durations
        var tiers: [String: Counter] = [:]
        for tier in ServingTier.allCases.map(\.rawValue) + ["encoded"] {
            tiers[tier] = Counter(label: "strata_http_images_total", dimensions: [("tier", tier)], factory: factory)
        }
        self.tiers = tiers
        shed = Counter(label: "strata_http_shed_total", factory: factory)
        var encodes: [ResponseFormat: Counter] = [:]
        for format in ResponseFormat.allCases where format != .raw {
            encodes[format] = Counter(label: "strata_http_encodes_total", dimensions: [("format", format.rawValue)], factory: factory)
        }
        self.encodes = encodes
        encodesJoined = Counter(label: "strata_http_encodes_joined_total", factory: factory)
        warm = Counter(label: "strata_http_warm_total", factory: factory)
        encodedBytes = Gauge(label: "strata_encoded_cache_bytes", factory: factory)
        encodedEntries = Gauge(label: "strata_encoded_cache_entries", factory: factory)
        encodedHits = Gauge(label: "strata_encoded_cache_hits", factory: factory)
        colourProfilesIgnored = Gauge(label: "strata_colour_profiles_ignored", factory: factory)
        colourConversions = Gauge(label: "strata_colour_conversions", factory: factory)
        var memoryParts: [String: Gauge] = [:]
        for part in MemoryUse.partNames {
            memoryParts[part] = Gauge(label: "strata_memory_bytes", dimensions: [("part", part)], factory: factory)
        }
        self.memoryParts = memoryParts
    }

    /// Publishes the process's memory by part (before a scrape).
    package func record(_ memory: MemoryUse) {
        for (part, bytes) in memory.parts { memoryParts[part]?.record(bytes) }
    }

    /// Counts one response of `route` and its duration.
    package func record(route: String, status: Int, nanoseconds: Int64) {
        if let counter = requests[route]?[status] {
            counter.increment()
        } else {
            Counter(label: "strata_http_requests_total", dimensions: [("route", route), ("status", String(status))], factory: factory)
                .increment()
        }
        durations[route]?.recordNanoseconds(nanoseconds)
    }

    /// Counts an image answered by `tier`.
    package func served(by tier: String) { tiers[tier]?.increment() }

    /// What a warm answer of one route counts (its 200, its duration, an image served by the
    /// encoded cache, a warm answer), looked up once by the warm path instead of by name on every
    /// answer.
    package struct WarmRoute: Sendable {
        let ok: Counter
        let duration: Timer
        let encoded: Counter
        let warm: Counter

        /// Counts one warm answer that took `nanoseconds`.
        package func record(nanoseconds: Int64) {
            ok.increment()
            duration.recordNanoseconds(nanoseconds)
            encoded.increment()
            warm.increment()
        }
    }

    /// The instruments of `route`'s warm answers (`route` is one of ``routes``).
    package func warmRoute(_ route: String) -> WarmRoute {
        guard let ok = requests[route]?[200], let duration = durations[route], let encoded = tiers["encoded"] else {
            preconditionFailure("\(route) is not one of ServiceMetrics.routes")
        }
        return WarmRoute(ok: ok, duration: duration, encoded: encoded, warm: warm)
    }

    /// Counts one encode run in `format`.
    package func encoded(_ format: ResponseFormat) { encodes[format]?.increment() }

    /// The Prometheus text exposition of everything registered.
    package func exposition() -> [UInt8] { registry.emitToBuffer() }
}
