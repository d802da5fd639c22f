import CoreMetrics
import NIOCore
import StrataConfiguration
import Synchronization

/// What one connection may hold of the server (``ConnectionGuard`` enforces it) and how many
/// connections may be open at once (``OpenConnections``): `http.headerTimeout`,
/// `http.idleTimeout`, `http.maxConnections`. A value type made once per server.
package struct ConnectionLimits: Sendable {
    /// From the accept, or the first byte of a request after an idle pause, to its head's end.
    package var headerTimeout: TimeAmount
    /// Between requests on a keep-alive connection; also the longest stall of a request's body
    /// or of the connection's writes.
    package var idleTimeout: TimeAmount
    /// Most connections open at once.
    package var maxConnections: Int
    /// Bytes of one request's body drained and discarded before the connection is closed (the
    /// service's routes read no body; nginx's `client_max_body_size` default).
    package var maxDiscardedBody = 1 << 20

    package init(_ settings: HTTPServiceSettings) {
        headerTimeout = Self.amount(settings.headerTimeout)
        idleTimeout = Self.amount(settings.idleTimeout)
        maxConnections = settings.maxConnections
    }

    /// The shorter timeout: how often a connection's timer may fire.
    package var tick: TimeAmount { min(headerTimeout, idleTimeout) }

    package static func amount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(max(1, seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
    }
}

/// The count of open connections against `http.maxConnections`: each accepted connection
/// takes a place when its pipeline is set up and gives it back when it closes; one accepted
/// beyond the limit is closed at once, before any handler is added (its client sees the
/// connection closed without an answer, and the connections already open keep flowing).
///
/// One per server, shared by its event loops. Cost: two atomic adds per connection.
package final class OpenConnections: Sendable {
    private let open = Atomic<Int>(0)
    package let limit: Int
    private let gauge: Gauge

    package init(limit: Int, metrics: ConnectionMetrics) {
        self.limit = limit
        self.gauge = metrics.open
    }

    /// The connections open now.
    package var count: Int { open.load(ordering: .relaxed) }

    /// Takes a place for `channel`, given back when it closes; `false` (nothing taken) when
    /// every place is taken.
    package func admit(_ channel: any Channel) -> Bool {
        let now = open.wrappingAdd(1, ordering: .relaxed).newValue
        guard now <= limit else {
            open.wrappingSubtract(1, ordering: .relaxed)
            return false
        }
        gauge.record(now)
        channel.closeFuture.whenComplete { _ in
            self.gauge.record(self.open.wrappingSubtract(1, ordering: .relaxed).newValue)
        }
        return true
    }
}

/// The connection metrics: `strata_http_connections_closed_total{reason}` (closed by the
/// server for a limit: ``ConnectionGuard/Reason``) and `strata_http_connections_open`.
package struct ConnectionMetrics: Sendable {
    private let closedBy: [ConnectionGuard.Reason: Counter]
    package let open: Gauge

    package init(factory: any MetricsFactory) {
        var closedBy: [ConnectionGuard.Reason: Counter] = [:]
        for reason in ConnectionGuard.Reason.allCases {
            closedBy[reason] = Counter(
                label: "strata_http_connections_closed_total", dimensions: [("reason", reason.rawValue)], factory: factory)
        }
        self.closedBy = closedBy
        open = Gauge(label: "strata_http_connections_open", factory: factory)
    }

    package func closed(_ reason: ConnectionGuard.Reason) { closedBy[reason]?.increment() }
}
