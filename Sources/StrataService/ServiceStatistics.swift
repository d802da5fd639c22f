import Foundation
import NIOPosix
import Strata

/// `GET /stats`: the engine's and each tier's counters as one JSON object, for operators and
/// dashboards that do not scrape Prometheus. Keys: `node` (`http.nodeName`), `engine` (requests, served per tier,
/// coalesced, source fetches and decodes, resamples, revalidations, negative hits, render-aheads, errors by
/// kind), `tiers` (hits, misses, entries, bytes, evictions per tier present), `memory`
/// (limits), `disk` (limit and file-level counters, when there is a disk tier), `encoded`
/// (the encoded cache), `queues` (jobs waiting per lane), `colour` (``ColourStatistics``:
/// profiles ignored, conversions, identities, transforms built), `pyramids` (with
/// `iiif.pyramidPath`: builds started, finished and failed, tiles written and found, tile
/// hits and waits, tiles held and their bytes on disk), `shared` (with `shared.s3.bucket`: the
/// shared tier's hits, misses, skips, errors, corrupt objects, bytes, uploads), `memoryUse` (the
/// process's memory by part, ``MemoryUse``), `uptimeSeconds`, `asyncExecutor`
/// (`eventLoops` when the service's async code runs on NIO's event loops, as `strata serve`
/// sets it up; `cooperativePool` when on Swift's).
/// Cost: one statistics read per tier (each a lock or a few atomics).
package struct ServiceStatistics: Encodable {
    package struct Engine: Encodable {
        package var requests, coalesced, sourceFetches, sourceDecodes, resamples, revalidations, negativeHits, renderAheads: Int
        package var served: [String: Int]
        package var errors: [String: Int]
    }
    package struct Tier: Encodable {
        package var hits, misses, entries, bytes, evictions: Int
    }
    package struct Memory: Encodable {
        package var costLimit, countLimit, keys, insertions, rejections: Int
    }
    package struct Disk: Encodable {
        package var byteLimit, hitsWithoutWaiting, invalidFiles, stores, droppedStores, failedStores, rescans: Int
        package var watching: Bool
    }
    package struct Encoded: Encodable {
        package var hits, misses, entries, bytes, costLimit: Int
    }
    package struct Queues: Encodable {
        package var urgent, prefetch: Int
    }
    package struct Pyramids: Encodable {
        package var buildsStarted, buildsFinished, buildsFailed, tilesWritten, tilesFound, tileHits, tileWaits, tiles, diskBytes: Int
    }

    package var node: String
    package var engine: Engine
    package var tiers: [String: Tier]
    package var memory: Memory?
    package var disk: Disk?
    package var encoded: Encoded?
    package var queues: Queues
    package var colour: ColourStatistics
    package var pyramids: Pyramids?
    /// The shared tier's own counters (``RemoteCacheTier/detailedStatistics``), when there is one.
    package var shared: [String: Int]?
    package var memoryUse: MemoryUse
    package var uptimeSeconds: Double
    package var asyncExecutor: String

    /// Call from the async code whose executor `asyncExecutor` names (the `/stats` route).
    package init(node: String, cache: ImageCache, encoded encodedCache: EncodedCache, pyramids tiles: TilePyramids? = nil, uptime: Duration)
    {
        self.node = node
        asyncExecutor = MultiThreadedEventLoopGroup.currentEventLoop != nil ? "eventLoops" : "cooperativePool"
        let stats = cache.statistics
        let e = stats.engine
        engine = Engine(
            requests: e.requests, coalesced: e.coalesced, sourceFetches: e.sourceFetches, sourceDecodes: e.sourceDecodes,
            resamples: e.resamples, revalidations: e.revalidations, negativeHits: e.negativeHits,
            renderAheads: e.renderAheads,
            served: Dictionary(uniqueKeysWithValues: e.served.map { ($0.key.rawValue, $0.value) }), errors: e.errors)
        tiers = Dictionary(
            uniqueKeysWithValues: stats.tiers.map {
                (
                    $0.key.rawValue,
                    Tier(
                        hits: $0.value.hits, misses: $0.value.misses, entries: $0.value.entries, bytes: $0.value.bytes,
                        evictions: $0.value.evictions)
                )
            })
        memory = stats.memory.map {
            Memory(
                costLimit: $0.costLimit, countLimit: $0.countLimit, keys: $0.keyCount, insertions: Int($0.insertions),
                rejections: Int($0.rejections))
        }
        if let d = stats.disk, let limit = cache.disk?.byteLimit {
            disk = Disk(
                byteLimit: limit, hitsWithoutWaiting: d.hitsWithoutWaiting, invalidFiles: d.invalidFiles, stores: d.stores,
                droppedStores: d.droppedStores, failedStores: d.failedStores, rescans: d.rescans, watching: d.watching)
        }
        encoded = encodedCache.statistics.map {
            Encoded(hits: Int($0.hits), misses: Int($0.misses), entries: $0.count, bytes: $0.totalCost, costLimit: $0.costLimit)
        }
        queues = Queues(urgent: stats.queues.urgent, prefetch: stats.queues.prefetch)
        colour = .current
        pyramids = tiles.map { t in
            let p = t.statistics
            return Pyramids(
                buildsStarted: p.buildsStarted, buildsFinished: p.buildsFinished, buildsFailed: p.buildsFailed,
                tilesWritten: p.tilesWritten, tilesFound: p.tilesFound, tileHits: p.tileHits, tileWaits: p.tileWaits,
                tiles: t.tileCount, diskBytes: t.diskUsage)
        }
        shared = cache.shared?.detailedStatistics
        memoryUse = MemoryUse(cache: cache, encoded: encodedCache)
        uptimeSeconds = Double(uptime.components.seconds) + Double(uptime.components.attoseconds) / 1e18
    }

    package func json() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        return (try? encoder.encode(self)) ?? Data("{}".utf8)
    }
}
