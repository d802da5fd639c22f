import Strata

/// The originals' sizes, memoized per key and source version: an IIIF request needs the
/// original's width and height before it can resolve its region and size, and `info.json`
/// publishes them; an `/images` request of a key known to be over `source.maxPixels` goes
/// straight to its tile pyramid.
///
/// A miss reads the original's header through the engine (``ImageCache/originalHeader(for:)``:
/// one source fetch, no decode). An entry is dropped when a variant of another source version
/// is served for its key (``forget(_:unless:)``), or, with `revalidateAfter`, when a check in
/// the background finds another version. Bounded: past `limit` entries the memo starts over.
/// Cost of a hit: one lock and one dictionary lookup.
package final class IIIFOriginals: Sendable {
    package struct Original: Sendable, Hashable {
        package var size: PixelSize
        package var version: SourceVersion
        package var hasAlpha = false
        /// The original's encoding (thumbor's answers keep it unless a filter names another).
        package var format: ImageFormat = .jpeg
    }

    /// A memoized original and when its version was last read or checked.
    private struct Entry {
        var original: Original
        var checked: ContinuousClock.Instant
    }

    private let entries = Lock<[String: Entry]>([:])
    package let limit: Int

    package init(limit: Int = 65_536) { self.limit = limit }

    /// The original of `key`, from the memo or its header (read under `maxPixels` when given:
    /// the tile pyramids' limit, above the source's). With the engine's `revalidateAfter`, an
    /// entry older than that is served and its version checked in the background (once per
    /// interval): a changed or vanished original leaves the memo, so the next request reads
    /// the new header (and a tile pyramid of the new version is built).
    package func original(for key: String, cache: ImageCache, maxPixels: Int? = nil) async throws(ServiceError) -> Original {
        if let known = entries.withLock({ $0[key] }) {
            if let after = cache.options.revalidateAfter, known.checked.duration(to: .now) > after, claimCheck(key, known) {
                Task.detached(priority: .background) { [self] in await revalidate(key, known.original, cache: cache) }
            }
            return known.original
        }
        let read: (header: ImageHeader, version: SourceVersion)
        do {
            read = try await cache.originalHeader(for: CacheKey(key), maxPixels: maxPixels)
        } catch {
            if let maxPixels, case .decoding(_, let decoding) = error, case .tooLarge(let pixels, _) = decoding.reason {
                // Over the pyramids' own limit, not the source's.
                throw ServiceError(
                    .contentTooLarge, "too_large",
                    "\(key.debugDescription) has \(pixels) pixels, over the limit of \(maxPixels) of the originals a tile pyramid is built from (iiif.maxSourcePixels)"
                )
            }
            throw ServiceError(error)
        }
        let original = Original(
            size: read.header.size, version: read.version, hasAlpha: read.header.hasAlpha, format: read.header.format)
        entries.withLock { map in
            if map.count >= limit { map.removeAll(keepingCapacity: true) }
            map[key] = Entry(original: original, checked: .now)
        }
        return original
    }

    /// Marks `known` as checked now unless another request did first: whether this one checks.
    private func claimCheck(_ key: String, _ known: Entry) -> Bool {
        entries.withLock { map in
            guard let current = map[key], current.checked == known.checked, current.original == known.original else { return false }
            map[key]?.checked = .now
            return true
        }
    }

    /// Drops `key`'s entry if the source's version is no longer `known`'s (or the original is
    /// gone); a failed check keeps it.
    private func revalidate(_ key: String, _ known: Original, cache: ImageCache) async {
        let current: SourceVersion?
        do {
            current = try await cache.originalVersion(for: CacheKey(key))
        } catch {
            guard case .notFound = error else { return }
            current = nil
        }
        guard current != known.version else { return }
        entries.withLock { map in
            if map[key]?.original == known { map[key] = nil }
        }
    }

    /// Whether the memo holds `key`'s original (no header read needed).
    package func knows(_ key: String) -> Bool { entries.withLock { $0[key] != nil } }

    /// `key`'s original if the memo holds it.
    package func known(_ key: String) -> Original? { entries.withLock { $0[key]?.original } }

    /// Forgets `key`'s original whatever its version (a purge).
    package func forget(_ key: String) {
        entries.withLock { $0[key] = nil }
    }

    /// Drops `key`'s entry unless it was read from `version`; whether it was dropped.
    @discardableResult
    package func forget(_ key: String, unless version: SourceVersion) -> Bool {
        entries.withLock { map in
            guard let known = map[key], known.original.version != version else { return false }
            map[key] = nil
            return true
        }
    }
}
