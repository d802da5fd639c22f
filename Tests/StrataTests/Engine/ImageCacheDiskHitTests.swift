import Foundation
import Synchronization
import Testing

@testable import Strata

@Suite("ImageCache: disk hits without a thread hop", .timeLimit(.minutes(5)))
struct ImageCacheDiskHitTests {
    static let photo = "jpeg/fallenleaf-2048x1280-420.jpg"

    @Test func aWarmDiskHitIsServedOnTheCallersThreadAndAColdOneOnTheEnginesThreads() async throws {
        let scratch = ScratchDirectory()
        let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        defer { disk.close() }
        // No memory tier: every request after the first is a disk hit.
        let cache = try ImageCache(memory: nil, disk: disk, source: CountingSource())
        let request = ImageRequest(key: CacheKey(Self.photo), box: PixelSize(width: 1024, height: 1024))
        let rendered = try await cache.image(for: request)
        #expect(rendered.tier == .source)
        disk.flush()
        let jobs = Atomic<Int>(0)
        cache.pool.observeJobStarts { _, awaited in if awaited { jobs.add(1, ordering: .relaxed) } }

        // Written by this process (verified, in the page cache): no job on the engine's threads.
        do {
            let warm = try await cache.image(for: request)
            #expect(warm.tier == .disk)
            #expect(warm.image.hasSamePixels(as: rendered.image))
        }  // its mapping goes: mapped pages stay in the page cache
        #expect(jobs.load(ordering: .relaxed) == 0, "a warm disk hit needs no thread hop")
        #expect(disk.statistics.hitsWithoutWaiting == 1)

        // Evicted from the page cache: the same hit goes to the engine's threads. (A readahead
        // on a loaded machine may bring the pages back first: evict again, a few times.)
        let name = try #require(scratch.names().first { $0.contains("1024x640") })
        var evictable = false
        var sawCold = false
        for _ in 0..<5 where !sawCold {
            guard try DiskTierWithoutWaitingTests.evictFromPageCache(scratch.path + "/" + name) else { break }
            evictable = true
            let before = jobs.load(ordering: .relaxed)
            let cold = try await cache.image(for: request)
            #expect(cold.tier == .disk)
            #expect(cold.image.hasSamePixels(as: rendered.image))
            sawCold = jobs.load(ordering: .relaxed) == before + 1
        }
        if evictable {
            #expect(sawCold, "a cold disk hit is read on a thread that may block")
        }
        cache.pool.observeJobStarts(nil)
    }
}
