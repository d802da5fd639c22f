import Foundation
import Synchronization
import Testing

@testable import Strata
import StrataTestSupport

/// What one request costs inside the engine, counted, not estimated: executor switches (each
/// job on the engine's threads is a switch there and one back; each flight is a task started
/// and a waiter resumed) and lookups per tier.
@Suite("ImageCache: switches and lookups per request", .timeLimit(.minutes(5)))
struct RequestPathCountsTests {
    struct Counts: Equatable, CustomStringConvertible {
        var jobs = 0
        var flights = 0
        var memory = 0
        var disk = 0
        var tables = 0
        var switches: Int { 2 * jobs + 2 * flights }
        var description: String {
            "\(switches) executor switches (\(jobs) pool jobs, \(flights) flights); lookups: memory \(memory), disk \(disk), tables \(tables)"
        }
    }

    static func counting(_ cache: ImageCache, _ body: () async throws -> Void) async rethrows -> Counts {
        let jobs = Atomic<Int>(0)
        cache.pool.observeJobStarts { _, awaited in if awaited { jobs.add(1, ordering: .relaxed) } }
        defer { cache.pool.observeJobStarts(nil) }
        let before = cache.statistics
        try await body()
        let after = cache.statistics
        func memoryLookups(_ s: ImageCacheStatistics) -> Int { Int((s.memory?.hits ?? 0) + (s.memory?.misses ?? 0)) }
        return Counts(
            jobs: jobs.load(ordering: .relaxed), flights: after.engine.flights - before.engine.flights,
            memory: memoryLookups(after) - memoryLookups(before),
            disk: (after.engine.lookups[.disk] ?? 0) - (before.engine.lookups[.disk] ?? 0),
            tables: (after.engine.lookups[.table] ?? 0) - (before.engine.lookups[.table] ?? 0))
    }

    @Test func aColdRequestSwitchesFourTimesAndAsksEachTierOnce() async throws {
        let scratch = ScratchDirectory()
        let disk = try DiskTier(directory: scratch.path + "/disk", configuration: unwatchedConfiguration())
        defer { disk.close() }
        let thumbs = ImageTableFormat(
            name: "thumb-64", family: "thumbs", size: PixelSize(width: 64, height: 64), mode: .fill, maximumCount: 8)
        let tables = try ImageTableCache(directory: scratch.path + "/tables", formats: [thumbs])
        let source = try DirectorySource(root: Fixtures.directory.path)
        let cache = try ImageCache(disk: disk, tables: tables, source: source)
        let request = ImageRequest(key: "jpeg/fallenleaf-2048x1280-420.jpg", box: PixelSize(width: 512, height: 512))

        var served: CachedImage?
        let cold = try await Self.counting(cache) { served = try await cache.image(for: request) }
        #expect(served?.tier == .source)
        print("cold request: \(cold)")
        // The directory read, the decode and the resample in one job; one flight; each tier once.
        #expect(cold == Counts(jobs: 1, flights: 1, memory: 1, disk: 1, tables: 1), "\(cold)")
        #expect(cold.switches <= 4)

        let warm = try await Self.counting(cache) { served = try await cache.image(for: request) }
        #expect(served?.tier == .memory)
        print("memory hit: \(warm)")
        #expect(warm == Counts(jobs: 0, flights: 0, memory: 1, disk: 0, tables: 0), "\(warm)")

        // Without memory: a disk hit from the page cache, served on the caller's thread.
        disk.flush()
        let diskOnly = try ImageCache(memory: nil, disk: disk, tables: tables, source: source)
        let fromDisk = try await Self.counting(diskOnly) { served = try await diskOnly.image(for: request) }
        #expect(served?.tier == .disk)
        print("disk hit: \(fromDisk)")
        #expect(fromDisk.flights == 0 && fromDisk.disk == 1 && fromDisk.tables == 0 && fromDisk.jobs <= 1, "\(fromDisk)")
    }

    @Test(arguments: [Lane.urgent, .prefetch])
    func aRendersParallelPartsAreThePoolsJobsInTheRequestsLane(lane: Lane) async throws {
        // One executor for blocking work: a render's helper (the resample beside the decode, a
        // split resample's bands) is a job of the engine's pool in the request's lane, not a
        // Dispatch thread; it is not awaited, so it is no switch of the request's path.
        let source = try DirectorySource(root: Fixtures.directory.path)
        let cache = try ImageCache(memory: nil, source: source, render: RenderSettings(resampleThreads: 2))
        let parts = Lock<[Lane]>([])
        let awaited = Atomic<Int>(0)
        cache.pool.observeJobStarts { jobLane, isAwaited in
            if isAwaited { awaited.add(1, ordering: .relaxed) } else { parts.withLock { $0.append(jobLane) } }
        }
        defer { cache.pool.observeJobStarts(nil) }
        let request = ImageRequest(
            key: "jpeg/fallenleaf-2048x1280-420.jpg", box: PixelSize(width: 512, height: 512), priority: lane)
        #expect(try await cache.image(for: request).tier == .source)
        // A helper that starts after the render took every part itself still starts as a job.
        let helpers = await eventually { !parts.withLock { $0.isEmpty } }
        #expect(helpers, "the render forked nothing onto the pool")
        #expect(parts.withLock { $0.allSatisfy { $0 == lane } }, "\(parts.withLock { $0 })")
        #expect(awaited.load(ordering: .relaxed) == 1)
    }
}
