import StrataBase
import StrataTiers
/// Stale-while-revalidate: a hit older than ``ImageCache/Options/revalidateAfter`` is served at
/// once, and the source is asked — in the background, once per key however many hits ask — for
/// its current version. A changed original drops that key's variants from every tier; an
/// unchanged one marks the held variants fresh again; a vanished one drops them and is
/// remembered as missing.
extension ImageCache {
    package func scheduleRevalidation(_ key: CacheKey, cached: SourceVersion) {
        guard source != nil else { return }
        Task.detached(priority: .background) { [self] in
            // Only a check of the same version is joined: a hit of an older version joining the
            // check of a newer one found it unchanged and kept the old variants (found by
            // Scripts/soak.sh: a replaced original's old version served for minutes).
            _ = try? await revalidations.run(
                group: key, descriptor: cached, priority: .prefetch, joining: { $0 == cached },
                work: { [self] _ async throws(ImageCacheError) in try await revalidate(key, cached: cached) })
        }
    }

    /// The version token of `key`'s original now: a ``BlockingImageSource``'s `versionBlocking`
    /// on the engine's threads, else the source's cheap check, else a fetch.
    ///
    /// The blocking check (a `stat`) runs in the urgent lane: in the prefetch lane it queued
    /// behind the disk tier's write-behind stores, one at a time, and under load a replaced
    /// original's old version went on being served for half a minute (found by the soak).
    package func currentVersion(of key: CacheKey, in source: any ImageSource) async throws(ImageCacheError) -> String {
        if let files = blockingSource {
            return try await onPool(key, lane: FlightLane(.urgent)) { () throws(ImageCacheError) -> String in
                do throws(SourceError) {
                    return try files.versionBlocking(key: key.sourceKey)
                } catch {
                    throw ImageCacheError(error)
                }
            }
        }
        do {
            if let token = try await source.version(key: key.sourceKey) { return token }
            return try await source.fetch(key: key.sourceKey).version
        } catch {
            throw ImageCacheError(error)
        }
    }

    /// Asks the source for `key`'s current version and reconciles the tiers with it.
    package func revalidate(_ key: CacheKey, cached: SourceVersion) async throws(ImageCacheError) {
        guard let source else { return }
        counters.revalidations.add(1, ordering: .relaxed)
        metrics.revalidations.increment()
        let current: SourceVersion
        do {
            current = SourceVersion(token: try await currentVersion(of: key, in: source))
        } catch {
            if case .notFound = error {
                options.logger.info("original gone; dropping its variants", metadata: ["key": "\(key)"])
                await remove(key: key)
                rememberMissing(key)
                counters.changedOriginals.add(1, ordering: .relaxed)  // counted once the tiers agree
                return
            }
            throw error
        }
        if current == cached {
            memory?.refresh(key: key, version: current, fetchedAt: .now)
            return
        }
        options.logger.info("original changed; dropping its variants", metadata: ["key": "\(key)", "version": "\(current)"])
        memory?.remove(key: key) { $0.sourceVersion != current }
        await removeBelowMemory(key)
        counters.changedOriginals.add(1, ordering: .relaxed)  // counted once the tiers agree
    }
}
