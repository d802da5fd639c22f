import Foundation
import Testing

@testable import Strata
@testable import StrataConfiguration
import StrataTestSupport

/// An engine built as `strata serve` builds it runs every tier's work on its one pool: the disk
/// tier's write-behind, the tables' drawing and the memory-pressure samples included. (The
/// thread count of a real `strata serve` process is checked in `ServeThreadsTests`.)
@Suite("ConfiguredImageCache: one pool", .timeLimit(.minutes(3)))
struct ConfiguredExecutorsTests {
    @Test("Memory, disk, tables, a directory and memory pressure share the one pool; no tier starts a writer or monitor thread")
    func everyTierOnThePool() async throws {
        let dir = TempDirectory()
        let layers = try await ConfigurationLayers(
            arguments: [
                "--source-directory", Fixtures.directory.path, "--disk-path", dir.path + "/disk", "--disk-durable", "false",
                "--tables-path", dir.path + "/tables", "--tables-formats", "small grid 64x64",
                "--memory-pressure-enabled", "true", "--memory-pressure-interval", "50ms",
            ], environment: [:])
        let configured = try ConfiguredImageCache(try StrataConfiguration(from: layers))
        let pool = configured.pool.pool
        let engine = configured.cache
        let disk = try #require(engine.disk)
        #expect(engine.pool === pool)
        #expect(try #require(engine.tables).drawingPool === pool)
        #expect(disk.core.writer === pool)
        #expect(!disk.ownsWriterThread)
        #expect(configured.monitor?.ownsThread == false)

        let prefetchJobs = Lock(0)
        pool.observeJobStarts { lane, _ in if lane == .prefetch { prefetchJobs.withLock { $0 += 1 } } }
        // Cold renders; each is stored on disk write-behind, published without a flush.
        for side in [120, 200, 280] {
            let served = try await engine.image(
                for: ImageRequest(key: CacheKey("jpeg/kite-800x500-gray.jpg"), box: PixelSize(width: side, height: side), tolerance: 0))
            #expect(served.tier == .source)
        }
        #expect(await eventually { disk.statistics.stores == 3 })
        #expect(prefetchJobs.withLock { $0 } >= 1, "the drain ran as a prefetch job on the pool")
        pool.observeJobStarts(nil)
        await configured.shutdown()
        #expect(disk.statistics.failedStores == 0)
    }
}
