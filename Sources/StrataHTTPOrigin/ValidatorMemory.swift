import Strata

/// What an origin said identifies the current content of a key: its `ETag`, else its
/// `Last-Modified`. The version string ``HTTPSource`` reports is derived from it.
struct HTTPValidator: Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        case entityTag
        case lastModified
    }

    var kind: Kind
    /// The header's value, as sent.
    var value: String

    /// From a response's headers: `ETag` when present, else `Last-Modified`, else `nil`.
    init?(etag: String?, lastModified: String?) {
        if let etag, !etag.isEmpty {
            self.kind = .entityTag
            self.value = etag
        } else if let lastModified, !lastModified.isEmpty {
            self.kind = .lastModified
            self.value = lastModified
        } else {
            return nil
        }
    }

    /// The source version: the entity tag as sent (`"5f3a-1c"`, `W/"…"`), or
    /// `last-modified: <date>` (so that the two kinds can never be equal).
    var version: String {
        switch kind {
        case .entityTag: return value
        case .lastModified: return "last-modified: " + value
        }
    }

    /// The conditional header that asks "changed since this?": `If-None-Match` or
    /// `If-Modified-Since`.
    var conditionalHeader: (name: String, value: String) {
        switch kind {
        case .entityTag: return ("If-None-Match", value)
        case .lastModified: return ("If-Modified-Since", value)
        }
    }
}

/// The last validator seen per key, at most `capacity` keys: the key stored longest ago is
/// forgotten first (a forgotten key only costs one unconditional `HEAD`). Thread-safe.
final class ValidatorMemory: Sendable {
    private struct State {
        var validators: [String: HTTPValidator] = [:]
        /// Keys in the order they were first stored (each key once).
        var order = RingBuffer<String>()
    }

    private let state = Lock(State())
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    var count: Int { state.withLock { $0.validators.count } }

    func validator(forKey key: String) -> HTTPValidator? {
        state.withLock { $0.validators[key] }
    }

    /// Remembers `validator` for `key` (or forgets the key when `nil`).
    func remember(_ validator: HTTPValidator?, forKey key: String) {
        guard capacity > 0 else { return }
        state.withLock { s in
            guard let validator else {
                // The key stays in `order` until its turn; a stale entry there costs nothing.
                s.validators.removeValue(forKey: key)
                return
            }
            if s.validators.updateValue(validator, forKey: key) == nil {
                s.order.append(key)
            }
            while s.validators.count > capacity, let oldest = s.order.popFirst() {
                s.validators.removeValue(forKey: oldest)
            }
            // Stale keys (forgotten, then stored again) make `order` longer than the map:
            // compact when it is twice as long.
            if s.order.count > 2 * max(capacity, 16) {
                var kept = RingBuffer<String>()
                var seen = Set<String>()
                while let key = s.order.popFirst() {
                    if s.validators[key] != nil && seen.insert(key).inserted { kept.append(key) }
                }
                s.order = kept
            }
        }
    }
}
