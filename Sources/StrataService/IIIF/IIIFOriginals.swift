import Strata

/// The originals' sizes, memoized per key and source version: an IIIF request needs the
/// original's width and height before it can resolve its region and size, and `info.json`
/// publishes them; an `/images` request of a key known to be over `source.maxPixels` goes
/// straight to its tile pyramid.
///
/// A miss reads the original's header through the engine (``ImageCache/originalHeader(for:)``:
/// one source fetch, no decode). An entry is dropped when a variant of another source version
/// is served for its key (``forget(_:unless:)``). Bounded: past `limit` entries the memo starts
/// over. Cost of a hit: one lock and one dictionary lookup.
final class IIIFOriginals: Sendable {
    struct Original: Sendable, Hashable {
        var size: PixelSize
        var version: SourceVersion
        var hasAlpha = false
    }

    private let entries = Lock<[String: Original]>([:])
    let limit: Int

    init(limit: Int = 65_536) { self.limit = limit }

    /// The original of `key`, from the memo or its header (read under `maxPixels` when given:
    /// the tile pyramids' limit, above the source's).
    func original(for key: String, cache: ImageCache, maxPixels: Int? = nil) async throws(ServiceError) -> Original {
        if let known = entries.withLock({ $0[key] }) { return known }
        let read: (header: ImageHeader, version: SourceVersion)
        do {
            read = try await cache.originalHeader(for: CacheKey(key), maxPixels: maxPixels)
        } catch {
            throw ServiceError(error)
        }
        let original = Original(size: read.header.size, version: read.version, hasAlpha: read.header.hasAlpha)
        entries.withLock { map in
            if map.count >= limit { map.removeAll(keepingCapacity: true) }
            map[key] = original
        }
        return original
    }

    /// Whether the memo holds `key`'s original (no header read needed).
    func knows(_ key: String) -> Bool { entries.withLock { $0[key] != nil } }

    /// `key`'s original if the memo holds it.
    func known(_ key: String) -> Original? { entries.withLock { $0[key] } }

    /// Forgets `key`'s original whatever its version (a purge).
    func forget(_ key: String) {
        entries.withLock { $0[key] = nil }
    }

    /// Drops `key`'s entry unless it was read from `version`; whether it was dropped.
    @discardableResult
    func forget(_ key: String, unless version: SourceVersion) -> Bool {
        entries.withLock { map in
            guard let known = map[key], known.version != version else { return false }
            map[key] = nil
            return true
        }
    }
}
