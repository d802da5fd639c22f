import Strata
import Synchronization

/// `color.output` in force for new requests: read once per request (an atomic load) when its
/// key is made (``CacheKey/init(_:colour:)``), set by ``StrataServer/apply(_:)`` when a reload
/// changes it. A request already in flight keeps the choice it started with.
final class ColourChoice: Sendable {
    private let original: Atomic<Bool>

    init(_ output: ColourOutput) { original = Atomic(output == .original) }

    var current: ColourOutput { original.load(ordering: .relaxed) ? .original : .srgb }

    func set(_ output: ColourOutput) { original.store(output == .original, ordering: .relaxed) }
}

/// The profiles `original` answers embed, memoized per source key and version: the engine's
/// variants (in memory, on disk, in tables) keep pixels only, so the profile of their original
/// is read from its header (``ImageCache/originalHeader(for:)``: one source fetch, no decode)
/// the first time a variant of that version is encoded, and kept. Bounded: past `limit`
/// entries the memo starts over. Cost of a hit: one lock and one dictionary lookup.
final class OriginalProfiles: Sendable {
    private struct Key: Hashable {
        let key: String
        let version: UInt64
    }

    private let entries = Lock<[Key: ColourProfile?]>([:])
    let limit: Int

    init(limit: Int = 16_384) { self.limit = limit }

    /// The profile an `original` answer of `key`'s variant of `version` embeds (``ColourConversion/profileToEmbed(for:grayscale:output:)``),
    /// `nil` when it has none or its original cannot be read now (not memoized then).
    func profile(for key: String, version: SourceVersion, cache: ImageCache) async -> ColourProfile? {
        let memoKey = Key(key: key, version: version.stamp)
        if let known = entries.withLock({ $0[memoKey] }) { return known }
        guard let read = try? await cache.originalHeader(for: CacheKey(key)) else { return nil }
        let profile = ColourConversion.profileToEmbed(for: read.header.colour, grayscale: read.header.isGrayscale, output: .original)
        // Memoized under the version read: a variant of an older version asks again.
        entries.withLock { map in
            if map.count >= limit { map.removeAll(keepingCapacity: true) }
            map[Key(key: key, version: read.version.stamp)] = .some(profile)
        }
        return profile
    }
}
