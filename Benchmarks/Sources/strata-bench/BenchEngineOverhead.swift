import ArgumentParser
import Foundation
import Strata

/// The burst and the per-hit overhead of `strata-bench engine`, and its `--profile` loop.
extension EngineBench {
    // MARK: Burst

    static func runBurst(root: String, key: String) async throws -> BurstResult {
        let engine = try makeEngine(root: root, memory: ImageMemoryTier())
        let request = ImageRequest(key: CacheKey(key), box: PixelSize(width: 640, height: 640))
        let count = 100
        let sizes = try await withThrowingTaskGroup(of: PixelSize.self) { group in
            for _ in 0..<count { group.addTask { try await engine.image(for: request).image.size } }
            return try await group.reduce(into: Set<PixelSize>()) { $0.insert($1) }
        }
        precondition(sizes.count == 1, "the burst's answers differ: \(sizes)")
        let stats = engine.statistics.engine
        return BurstResult(
            requests: count, decodes: stats.sourceDecodes, coalesced: stats.coalesced, memoryHits: stats.served[.memory] ?? 0)
    }

    // MARK: Overhead

    static func runOverhead(root: String, scratch: String, rounds: Int) async throws -> OverheadResult {
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        // Memory: one variant of the large photo, looked up three ways.
        let memory = ImageMemoryTier()
        let engine = try makeEngine(root: root, memory: memory)
        let request = ImageRequest(key: CacheKey(largePhoto), box: PixelSize(width: 512, height: 512))
        let primed = try await engine.image(for: request)
        precondition(primed.tier == .source)
        let query = request.query(defaultTolerance: engine.defaultTolerance)
        let key = request.key
        let n = 200_000
        var best = (facade: Double.infinity, cached: Double.infinity, bare: Double.infinity)
        var sink = 0
        for round in 0..<rounds {
            for which in round.isMultiple(of: 2) ? [0, 1, 2] : [2, 1, 0] {
                let start = now()
                switch which {
                case 0:
                    for _ in 0..<n { sink &+= try await engine.image(for: request).image.width }
                    best.facade = min(best.facade, Double(now() - start) / Double(n))
                case 1:
                    for _ in 0..<n { sink &+= engine.cachedImage(for: request)!.image.width }
                    best.cached = min(best.cached, Double(now() - start) / Double(n))
                default:
                    for _ in 0..<n { sink &+= memory.entry(forKey: key, matching: query)!.image.width }
                    best.bare = min(best.bare, Double(now() - start) / Double(n))
                }
            }
        }

        // Disk: an engine with a disk tier and no memory tier, so every request is a disk hit.
        var configuration = DiskTier.Configuration()
        configuration.useInotify = false
        configuration.byteLimit = 256 << 20
        let disk = try DiskTier(directory: scratch, configuration: configuration)
        defer { disk.close() }
        let diskEngine = try makeEngine(root: root, memory: nil, disk: disk)
        let large = ImageRequest(key: CacheKey(largePhoto), box: PixelSize(width: 2048, height: 2048))
        let rendered = try await diskEngine.image(for: large)
        precondition(rendered.tier == .source)
        disk.flush()
        let largeQuery = large.query(defaultTolerance: diskEngine.defaultTolerance)
        let probe = try await diskEngine.image(for: large)
        precondition(probe.tier == .disk, "expected a disk hit, got \(probe.tier)")
        let storage = "\(probe.image.storageKind)"
        for _ in 0..<10 {
            sink &+= touch(try await diskEngine.image(for: large).image)
            sink &+= touch(try disk.hit(forKey: largePhoto, matching: largeQuery)!.image)
        }
        // The floor of any hit served from other threads: an empty job there, awaited.
        let pool = try BlockingPool<Void>(width: 2, name: "bench-hop", makeContext: {})
        defer { pool.shutdown() }
        let m = 40
        var bestDisk = (facade: Double.infinity, bare: Double.infinity, hop: Double.infinity)
        for round in 0..<rounds * 2 {
            for which in round.isMultiple(of: 2) ? [0, 1, 2] : [2, 1, 0] {
                let start = now()
                switch which {
                case 0:
                    for _ in 0..<m { sink &+= touch(try await diskEngine.image(for: large).image) }
                    bestDisk.facade = min(bestDisk.facade, Double(now() - start) / Double(m))
                case 1:
                    for _ in 0..<m { sink &+= touch(try disk.hit(forKey: largePhoto, matching: largeQuery)!.image) }
                    bestDisk.bare = min(bestDisk.bare, Double(now() - start) / Double(m))
                default:
                    for _ in 0..<m {
                        sink &+= try await pool.run { _ in 1 }
                        sink &+= touch(try disk.hit(forKey: largePhoto, matching: largeQuery)!.image)
                    }
                    bestDisk.hop = min(bestDisk.hop, Double(now() - start) / Double(m))
                }
            }
        }
        precondition(diskEngine.statistics.engine.sourceDecodes == 1 && sink != 42)
        return OverheadResult(
            memoryHitNs: best.facade, cachedImageNs: best.cached, bareMemoryHitNs: best.bare, diskHitUs: bestDisk.facade / 1e3,
            bareDiskHitUs: bestDisk.bare / 1e3, hopFloorUs: bestDisk.hop / 1e3, diskBytes: probe.image.byteCount, diskStorage: storage)
    }

    static func profile(_ path: String, count: Int, root: String, scratch: String) async throws {
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var sink = 0
        switch path {
        case "memory", "cached", "bare-memory":
            let memory = ImageMemoryTier()
            let engine = try makeEngine(root: root, memory: memory)
            let request = ImageRequest(key: CacheKey(largePhoto), box: PixelSize(width: 512, height: 512))
            _ = try await engine.image(for: request)
            let query = request.query(defaultTolerance: engine.defaultTolerance)
            let start = now()
            switch path {
            case "memory": for _ in 0..<count { sink &+= try await engine.image(for: request).image.width }
            case "cached": for _ in 0..<count { sink &+= engine.cachedImage(for: request)!.image.width }
            default: for _ in 0..<count { sink &+= memory.entry(forKey: request.key, matching: query)!.image.width }
            }
            print(String(format: "%@: %.1f ns per hit", path, Double(now() - start) / Double(count)))
        case "disk", "bare-disk", "pool-noop", "pool-disk":
            var configuration = DiskTier.Configuration()
            configuration.useInotify = false
            let disk = try DiskTier(directory: scratch, configuration: configuration)
            defer { disk.close() }
            let engine = try makeEngine(root: root, memory: nil, disk: disk)
            let request = ImageRequest(key: CacheKey(largePhoto), box: PixelSize(width: 2048, height: 2048))
            _ = try await engine.image(for: request)
            disk.flush()
            let query = request.query(defaultTolerance: engine.defaultTolerance)
            let start = now()
            let pool = try BlockingPool<Void>(width: 2, name: "bench-pool", makeContext: {})
            defer { pool.shutdown() }
            if path == "disk" {
                for _ in 0..<count { sink &+= touch(try await engine.image(for: request).image) }
            } else if path == "pool-noop" {
                for _ in 0..<count {
                    sink &+= try await pool.run { _ in 1 }
                    sink &+= touch(try disk.hit(forKey: largePhoto, matching: query)!.image)
                }
            } else if path == "pool-disk" {
                for _ in 0..<count {
                    let hit = try await pool.run { _ in try? disk.hit(forKey: largePhoto, matching: query) }
                    sink &+= touch(hit!.image)
                }
            } else {
                for _ in 0..<count { sink &+= touch(try disk.hit(forKey: largePhoto, matching: query)!.image) }
            }
            print(String(format: "%@: %.1f µs per hit", path, Double(now() - start) / Double(count) / 1e3))
        default:
            throw ValidationError("--profile takes memory, cached, bare-memory, disk or bare-disk")
        }
        if sink == 42 { print("") }
    }

    /// Reads one byte of every page of the pixels (and the last byte).
    @inline(never)
    static func touch(_ image: PixelImage) -> Int {
        image.withUnsafeBytes { raw in
            var sum = 0
            var i = 0
            while i < raw.count {
                sum &+= Int(raw[i])
                i += 4096
            }
            return sum &+ Int(raw[raw.count - 1])
        }
    }
}
