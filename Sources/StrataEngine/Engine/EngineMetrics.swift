import CoreMetrics
import Metrics
import StrataBase

/// The engine's swift-metrics instruments, made once (no backend is chosen here: whatever the
/// process bootstrapped — Prometheus in `strata serve` — receives them; without one they cost
/// a no-op call).
///
/// Names (with the configured prefix, default `strata`): counters `_requests_total{tier}`,
/// `_misses_total{tier}`, `_tier_errors_total{tier}`, `_coalesced_total`, `_source_fetches_total`, `_decode_errors_total`,
/// `_source_errors_total`, `_errors_total{kind}`, `_revalidations_total`, `_render_aheads_total`; timers
/// `_lookup_seconds{tier}`, `_render_seconds`, `_source_fetch_seconds`; gauges
/// `_tier_bytes{tier}`, `_tier_entries{tier}`, `_tier_evictions{tier}`, `_queue_depth{lane}`.
package struct EngineMetrics: Sendable {
    package let served: [ServingTier: Counter]
    package let lookups: [ServingTier: Timer]
    package let misses: [ServingTier: Counter]
    package let tierErrors: [ServingTier: Counter]
    package let coalesced: Counter
    package let sourceFetches: Counter
    package let decodeErrors: Counter
    package let sourceErrors: Counter
    package let revalidations: Counter
    package let renderAheads: Counter
    package let render: Timer
    package let sourceFetch: Timer
    package let bytes: [ServingTier: Gauge]
    package let entries: [ServingTier: Gauge]
    package let evictions: [ServingTier: Gauge]
    package let queueUrgent: Gauge
    package let queuePrefetch: Gauge
    package let prefix: String
    package let factory: any MetricsFactory

    package init(prefix: String, factory: (any MetricsFactory)?) {
        self.prefix = prefix
        let factory = factory ?? MetricsSystem.factory
        self.factory = factory
        func byTier<T>(_ make: (ServingTier) -> T) -> [ServingTier: T] {
            Dictionary(uniqueKeysWithValues: ServingTier.allCases.map { ($0, make($0)) })
        }
        served = byTier { Counter(label: "\(prefix)_requests_total", dimensions: [("tier", $0.rawValue)], factory: factory) }
        lookups = byTier {
            Timer(label: "\(prefix)_lookup_seconds", dimensions: [("tier", $0.rawValue)], preferredDisplayUnit: .seconds, factory: factory)
        }
        misses = byTier { Counter(label: "\(prefix)_misses_total", dimensions: [("tier", $0.rawValue)], factory: factory) }
        tierErrors = byTier { Counter(label: "\(prefix)_tier_errors_total", dimensions: [("tier", $0.rawValue)], factory: factory) }
        coalesced = Counter(label: "\(prefix)_coalesced_total", factory: factory)
        sourceFetches = Counter(label: "\(prefix)_source_fetches_total", factory: factory)
        decodeErrors = Counter(label: "\(prefix)_decode_errors_total", factory: factory)
        sourceErrors = Counter(label: "\(prefix)_source_errors_total", factory: factory)
        revalidations = Counter(label: "\(prefix)_revalidations_total", factory: factory)
        renderAheads = Counter(label: "\(prefix)_render_aheads_total", factory: factory)
        render = Timer(label: "\(prefix)_render_seconds", preferredDisplayUnit: .seconds, factory: factory)
        sourceFetch = Timer(label: "\(prefix)_source_fetch_seconds", preferredDisplayUnit: .seconds, factory: factory)
        bytes = byTier { Gauge(label: "\(prefix)_tier_bytes", dimensions: [("tier", $0.rawValue)], factory: factory) }
        entries = byTier { Gauge(label: "\(prefix)_tier_entries", dimensions: [("tier", $0.rawValue)], factory: factory) }
        evictions = byTier { Gauge(label: "\(prefix)_tier_evictions", dimensions: [("tier", $0.rawValue)], factory: factory) }
        queueUrgent = Gauge(label: "\(prefix)_queue_depth", dimensions: [("lane", "urgent")], factory: factory)
        queuePrefetch = Gauge(label: "\(prefix)_queue_depth", dimensions: [("lane", "prefetch")], factory: factory)
    }

    package func error(_ error: ImageCacheError) {
        Counter(label: "\(prefix)_errors_total", dimensions: [("kind", error.kind)], factory: factory).increment()
        switch error {
        case .decoding: decodeErrors.increment()
        case .source, .notFound: sourceErrors.increment()
        default: break
        }
    }
}
