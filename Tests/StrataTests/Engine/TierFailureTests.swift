import MetricsTestKit
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// A tier's I/O failure is never a miss in disguise: the engine names the tier and the key,
/// counts it (`strata_tier_errors_total{tier}`), and serves on from the tiers below and the
/// source. Errors come from the real syscall layer (``SyscallFaults``), on the tier's own files.
@Suite(.serialized)
struct TierFailureTests {
    static let key = "jpeg/path-2560x1600.jpg"
    static let box = PixelSize(width: 256, height: 256)

    @Test func aDiskReadThatFailsIsCountedNamedAndServedFromTheSource() async throws {
        let scratch = ScratchDirectory()
        let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        defer { disk.close() }
        let source = try DirectorySource(root: Fixtures.directory.path)
        // A first engine renders the variant and writes it back to the disk tier.
        let first = try ImageCache(memory: nil, disk: disk, source: source)
        #expect(try await first.image(for: ImageRequest(key: CacheKey(Self.key), box: Self.box)).tier == .source)
        disk.flush()
        #expect(disk.statistics.entries == 1)

        let metrics = TestMetrics()
        var options = ImageCache.Options()
        options.metricsFactory = metrics
        let cache = try ImageCache(memory: nil, disk: disk, source: source, options: options)
        // The non-blocking read would wait (RWF_NOWAIT refused), and the blocking read fails.
        let wouldWait = SyscallFaults.install(.init(call: "preadv2", pathContains: scratch.parent, errno: EAGAIN, times: nil))
        let failing = SyscallFaults.install(.init(call: "pread", pathContains: scratch.parent, errno: EIO, times: nil))
        let served = try await cache.image(for: ImageRequest(key: CacheKey(Self.key), box: Self.box))
        let failures = SyscallFaults.remove(failing)
        _ = SyscallFaults.remove(wouldWait)
        #expect(failures >= 1)
        #expect(served.tier == .source, "a failed disk read is served from the source")
        #expect(served.image.size == PixelSize(width: 256, height: 160))
        #expect(try metrics.expectCounter("strata_tier_errors_total", [("tier", "disk")]).totalValue == 1)
        #expect(try metrics.expectCounter("strata_misses_total", [("tier", "disk")]).totalValue == 1)

        // The fault gone, the same file serves: the failure was the read's, not the entry's.
        let again = try await cache.image(for: ImageRequest(key: CacheKey(Self.key), box: Self.box))
        #expect(again.tier == .disk)
    }

    @Test func theTierProtocolThrowsTheFailureWithTheTierAndKey() throws {
        let scratch = ScratchDirectory()
        let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        defer { disk.close() }
        try disk.storeSynchronously(PixelImage(width: 32, height: 32), forKey: "k")
        let tier: any CacheTier = disk
        let rule = SyscallFaults.Rule(call: "pread", pathContains: scratch.parent, errno: EIO, times: nil)
        let (result, failures) = SyscallFaults.injecting(rule) {
            Result { () throws(TierFailure) in try tier.load(CacheKey("k"), SizeQuery(box: PixelSize(width: 32, height: 32))) }
        }
        #expect(failures == 1)
        guard case .failure(let failure) = result else {
            Issue.record("expected a TierFailure, got \(result)")
            return
        }
        #expect(failure.tier == .disk && failure.key == "k")
        #expect(failure.reason.contains("pread") && failure.reason.contains("EIO") || failure.reason.contains("Input/output"), "\(failure)")
        #expect(ImageCacheError.tier(failure).kind == "tier")
    }

    @Test func theTablesAreNotWrittenBackTo() async throws {
        // Write-back reaches memory and disk only: the image tables are filled by their family's
        // draw (tableFill), so a plain render never stores a single variant into a table.
        let scratch = ScratchDirectory()
        let format = ImageTableFormat(name: "thumb", family: "thumbs", size: PixelSize(width: 256, height: 160), maximumCount: 8)
        let tables = try ImageTableCache(directory: scratch.path + "/tables", formats: [format])
        var options = ImageCache.Options()
        options.useTablesForMatchingRequests = false
        let cache = try ImageCache(
            memory: nil, tables: tables, source: try DirectorySource(root: Fixtures.directory.path), options: options)
        #expect(try await cache.image(for: ImageRequest(key: CacheKey(Self.key), box: Self.box)).tier == .source)
        #expect(try tables.table(named: "thumb").count == 0)
        #expect(!(cache.tiers.contains { $0 is any WritableCacheTier && $0.servingTier == .table }))
    }
}
