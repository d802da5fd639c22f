import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// An engine whose disk tier and image tables sit on a full file system keeps serving from the
/// source: the failed stores are counted and logged, never returned to the caller.
@Suite(.serialized, .enabled(if: SmallFilesystem.canMount, "\(SmallFilesystem.skipMessage)"))
struct EngineFullDiskTests {
    @Test func anEngineOverAFullFileSystemKeepsServingFromTheSource() async throws {
        let fs = try #require(SmallFilesystem(megabytes: 4))
        let disk = try DiskTier(directory: fs.path + "/disk", configuration: unwatchedConfiguration { $0.durable = true })
        let format = ImageTableFormat(name: "thumb", family: "thumbs", size: PixelSize(width: 160, height: 100), maximumCount: 64)
        let tables = try ImageTableCache(directory: fs.path + "/tables", formats: [format])
        // Fill every byte that is left.
        fs.ballast("ballast", bytes: 64 << 20)
        #expect(fs.freeBytes < 64 << 10)
        let cache = try ImageCache(
            memory: nil, disk: disk, tables: tables, source: try DirectorySource(root: Fixtures.directory.path))
        for round in 0..<3 {
            let plain = try await cache.image(for: ImageRequest(key: "jpeg/path-2560x1600.jpg", box: PixelSize(width: 256, height: 256)))
            #expect(plain.tier == .source, "round \(round)")
            #expect(plain.image.size == PixelSize(width: 256, height: 160))
            // A request that matches the table format goes through the tables, which cannot store.
            let thumb = try await cache.image(
                for: ImageRequest(key: "jpeg/kite-800x500-gray.jpg", box: PixelSize(width: 160, height: 100), mode: .fill))
            #expect(thumb.tier == .source, "round \(round)")
            #expect(thumb.image.size == PixelSize(width: 160, height: 100))
        }
        disk.flush()
        #expect(disk.statistics.failedStores >= 3)
        #expect(disk.statistics.entries == 0)
        // Space returns: the disk tier takes the next render, and a new engine is served by it.
        try FileDescriptor.unlink(path: fs.path + "/ballast")
        _ = try await cache.image(for: ImageRequest(key: "jpeg/path-2560x1600.jpg", box: PixelSize(width: 256, height: 256)))
        disk.flush()
        #expect(disk.statistics.entries >= 1)
        let second = try ImageCache(memory: nil, disk: disk, source: try DirectorySource(root: Fixtures.directory.path))
        let again = try await second.image(for: ImageRequest(key: "jpeg/path-2560x1600.jpg", box: PixelSize(width: 256, height: 256)))
        #expect(again.tier == .disk)
    }
}
