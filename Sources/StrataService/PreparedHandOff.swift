import Strata

/// What the warm path parsed of the requests it passed on, handed to the ordinary path, so
/// that a cold request's target is parsed (and its signature checked) once: one per
/// connection, filled on the connection's event loop by ``WarmPathHandler`` as it passes a
/// request on, and taken by the route (``ServiceResponder``), which finds its connection's
/// through the task-local ``current`` that ``WarmHTTP1Channel`` sets around the connection's
/// Hummingbird task.
///
/// Each entry names its target, and the route takes only an entry of its own target (older
/// entries before it, which no request took, are dropped): a mix-up costs a parse, never
/// another request's answer. At most ``capacity`` entries wait (pipelined requests); past that
/// the oldest goes. Cost: a lock and an append per request passed on, a lock and a removal
/// per request the route answers; nothing on the warm path's own answers.
final class PreparedHandOff: Sendable {
    typealias Parse = Result<ImageEndpoint.Prepared, ServiceError>

    /// The hand-off of the connection whose Hummingbird task this is.
    @TaskLocal static var current: PreparedHandOff?

    /// The most entries that wait.
    static let capacity = 16

    private let entries = Lock<[(target: String, parse: Parse)]>([])

    /// Keeps the parse of `target`, a request passed on, for the route.
    func put(_ parse: Parse, for target: String) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeFirst() }
            entries.append((target, parse))
        }
    }

    /// The parse of `target` handed over, if there is one (taken: asked again, `nil`).
    func take(for target: String) -> Parse? {
        entries.withLock { entries in
            guard let index = entries.firstIndex(where: { $0.target == target }) else { return nil }
            let parse = entries[index].parse
            entries.removeSubrange(...index)
            return parse
        }
    }

    /// Entries waiting.
    var count: Int { entries.withLock { $0.count } }
}
