import Strata
import Synchronization

/// `color.output` in force for new requests: read once per request (an atomic load) when its
/// key is made (``CacheKey/init(_:colour:)``), set by ``StrataServer/apply(_:)`` when a reload
/// changes it. A request already in flight keeps the choice it started with.
package final class ColourChoice: Sendable {
    private let original: Atomic<Bool>

    package init(_ output: ColourOutput) { original = Atomic(output == .original) }

    package var current: ColourOutput { original.load(ordering: .relaxed) ? .original : .srgb }

    package func set(_ output: ColourOutput) { original.store(output == .original, ordering: .relaxed) }
}

/// The profiles `original` answers embed, memoized per source key and version: the engine's
/// variants (in memory, on disk, in tables) keep pixels only, so the profile of their original
/// is read from its header (``ImageCache/originalHeader(for:)``: one source fetch, no decode)
/// the first time a variant of that version is encoded, and kept. Bounded: past `limit`
/// entries the memo starts over. Cost of a hit: one lock and one dictionary lookup.
package final class OriginalProfiles: Sendable {
    /// By source key: the version read, and its profile (`nil`: it has none).
    private let entries = Lock<[String: (version: UInt64, profile: ColourProfile?)]>([:])
    package let limit: Int

    package init(limit: Int = 16_384) { self.limit = limit }

    /// The profile an `original` answer of `key`'s variant of `version` embeds (``ColourConversion/profileToEmbed(for:grayscale:output:)``),
    /// `nil` when it has none or its original cannot be read now (not memoized then).
    package func profile(for key: String, version: SourceVersion, cache: ImageCache) async -> ColourProfile? {
        if let known = entries.withLock({ $0[key] }), known.version == version.stamp { return known.profile }
        guard let read = try? await cache.originalHeader(for: CacheKey(key)) else { return nil }
        let profile = ColourConversion.profileToEmbed(for: read.header.colour, grayscale: read.header.isGrayscale, output: .original)
        // Memoized under the version read: a variant of an older version asks again.
        entries.withLock { map in
            if map.count >= limit { map.removeAll(keepingCapacity: true) }
            map[key] = (read.version.stamp, profile)
        }
        return profile
    }

    /// Forgets `key`'s profile (a purge).
    package func forget(_ key: String) {
        entries.withLock { $0[key] = nil }
    }
}
