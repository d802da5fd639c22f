import Strata

/// What the warm path parsed of the requests it passed on, handed to the ordinary path, so
/// that a cold request's target is parsed (and its signature checked) once, and memory is asked
/// once for its variant (a IIIF request's: ``IIIFLookup``): one per
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
package final class PreparedHandOff: Sendable {
    package init() {}

    package typealias Parse = Result<ImageEndpoint.Prepared, ServiceError>

    /// The warm path's memory lookup for a IIIF image request it passed on: the engine request
    /// it asked memory for (the route uses the answer only for the same request) and the hit.
    package struct IIIFLookup: Sendable {
        package var request: ImageRequest
        package var hit: CachedImage?
    }

    /// What is handed over for one target.
    package enum Entry: Sendable {
        /// An `/images` request's parse (or refusal), with its memory lookup.
        case images(Parse)
        /// A IIIF image request's memory lookup.
        case iiif(IIIFLookup)
    }

    /// The hand-off of the connection whose Hummingbird task this is.
    @TaskLocal package static var current: PreparedHandOff?

    /// The most entries that wait.
    package static let capacity = 16

    private let entries = Lock<[(target: String, entry: Entry)]>([])

    /// Keeps what the warm path made of `target`, a request passed on, for the route.
    package func put(_ entry: Entry, for target: String) {
        entries.withLock { entries in
            if entries.count >= Self.capacity { entries.removeFirst() }
            entries.append((target, entry))
        }
    }

    /// What was handed over for `target`, if anything (taken: asked again, `nil`).
    package func take(for target: String) -> Entry? {
        entries.withLock { entries in
            guard let index = entries.firstIndex(where: { $0.target == target }) else { return nil }
            let entry = entries[index].entry
            entries.removeSubrange(...index)
            return entry
        }
    }

    /// Entries waiting.
    package var count: Int { entries.withLock { $0.count } }
}
