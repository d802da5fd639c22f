import NIOCore
import Strata

#if canImport(Glibc)
import Glibc
#endif

/// The warm path's memo of checked image targets, one per event loop: a target's text → its
/// ``ImageEndpoint/Prepared`` (parameters and engine request, the key's digest included), so a
/// URL asked again skips the parse, the signature check and the key's SHA-256 — about 2 µs of
/// a warm answer on the project's VM, a tenth of its CPU. Only targets that pass are kept
/// (a refused one is parsed again, and refused again, each time); the answer's own work — the
/// memory and encoded lookups, the metrics — is never skipped.
///
/// At most `capacity` entries, all dropped when it is full (the hot set refills at once; a
/// stream of distinct URLs costs what it did without the memo). Not thread-safe: it is
/// touched only on its event loop (``PreparedTargetsByLoop`` hands it out loop-bound).
/// Memory: a target's bytes and a `Prepared` (~200 bytes) an entry.
package final class PreparedTargets {
    private var entries: [String: ImageEndpoint.Prepared] = [:]
    private let capacity: Int

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// `target` checked by `endpoint` (from the memo when it was seen before), or why
    /// `endpoint` refuses it.
    /// `now`: Unix seconds, for signatures that expire (read only when one does; default: the
    /// clock).
    package func prepared(_ target: String, by endpoint: ImageEndpoint, now: Int? = nil) -> PreparedHandOff.Parse {
        // A target memoized before a reload changed `color.output` or the presets is prepared
        // again.
        if let known = entries[target], known.request.key.colourOutput == endpoint.responder.colour.current,
            known.presetGeneration == endpoint.presets.generation
        {
            // A memoized signature may have expired since.
            if let expires = known.expires, (now ?? Int(time(nil))) > expires {
                entries[target] = nil
                return .failure(ImageEndpoint.refusal(.expired))
            }
            return .success(known)
        }
        let prepared: ImageEndpoint.Prepared
        do {
            prepared = try endpoint.prepare(target: Substring(target), now: now ?? Int(time(nil)))
        } catch {
            return .failure(error)
        }
        if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
        entries[target] = prepared
        return .success(prepared)
    }

    package var count: Int { entries.count }
}

/// One ``PreparedTargets`` per event loop, shared by the connections of that loop.
package final class PreparedTargetsByLoop: Sendable {
    /// Entries per loop.
    package static let defaultCapacity = 4096

    private let capacity: Int
    private let loops = Lock<[ObjectIdentifier: NIOLoopBound<PreparedTargets>]>([:])

    package init(capacity: Int = defaultCapacity) {
        self.capacity = capacity
    }

    /// The memo of `loop` (made on first use), usable only on that loop.
    package func memo(for loop: any EventLoop) -> NIOLoopBound<PreparedTargets> {
        loops.withLock { loops in
            let id = ObjectIdentifier(loop)
            if let known = loops[id] { return known }
            let made = NIOLoopBound(PreparedTargets(capacity: capacity), eventLoop: loop)
            loops[id] = made
            return made
        }
    }
}
