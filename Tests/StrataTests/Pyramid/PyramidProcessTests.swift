import Foundation
import Testing
@testable import Strata
import StrataTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// Pyramid builds in a child process (`strata warm --iiif`): memory that does not grow with the
/// image, and a build killed with SIGKILL half-way that resumes with exactly the tiles a clean
/// build makes.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct PyramidProcessTests {
    /// A directory with `originals/big.jpg` of `size` (made on a thread of its own: seconds of
    /// work that must not hold one of Swift's two cooperative threads).
    static func original(_ size: PixelSize) async throws -> (TempDirectory, bytes: Int) {
        let scratch = TempDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path + "/originals", withIntermediateDirectories: true)
        let jpeg = try await offThePool("mosaic") { try Mosaic.jpeg(size) }
        try Data(jpeg).write(to: URL(fileURLWithPath: scratch.path + "/originals/big.jpg"))
        return (scratch, jpeg.count)
    }

    /// The pyramids as `strata warm` opens them (iiif.pyramidBytes' default number of tiles: a
    /// table opened with another number is made anew).
    static let settings = TilePyramids.Settings(tileSize: 256, maximumTiles: (8 << 30) / (256 * 256 * 4 + 4096))

    static func warm(_ scratch: TempDirectory, into pyramids: String) throws -> pid_t {
        let strata = try #require(strataExecutable(), "the strata executable is built next to the tests")
        return try spawn(
            strata,
            [
                "warm", scratch.path + "/originals", "--iiif", "--iiif-pyramid-path", pyramids, "--iiif-tiled-above", "1",
                "--iiif-tile-size", "256", "--iiif-max-source-pixels", "4000000000", "--memory-pressure-enabled", "false",
            ])
    }

    @Test func aBuildsMemoryDoesNotGrowWithTheImage() async throws {
        let size = PixelSize(width: 20000, height: 10000)  // 200 megapixels: 800 MB decoded
        let (scratch, jpegBytes) = try await Self.original(size)
        let pid = try Self.warm(scratch, into: scratch.path + "/pyramids")
        let (status, peak) = try await offThePool("strata warm") { waitForPeakResident(pid) }
        #expect(status == 0)
        let settings = Self.settings
        let strips = PyramidGeometry(size: size, tileSize: 256).levels.reduce(0) { $0 + $1.width * 4 * 256 }
        // The strips (one more at level 0 for the pipelined decode), the process itself (and,
        // under the address sanitizer, its quarantine of up to 256 MiB of freed memory, its
        // shadow and its allocator: 649 MiB in all measured in CI, against 136 MiB without);
        // a whole decode alone would be 800 MB. Not the original's bytes: the build reads
        // them from a spool file's mapping and hands back the pages behind its decode.
        let sanitizer = EngineBombTests.underAddressSanitizer ? 512 << 20 : 0
        let bound = strips + size.width * 4 * 256 + (160 << 20) + sanitizer
        #expect(peak <= bound, "peak RSS \(peak >> 20) MiB, bound \(bound >> 20) MiB (JPEG \(jpegBytes >> 20) MiB)")
        #expect(peak < size.pixelCount * 4)
        let table = try ImageTable(directory: scratch.path + "/pyramids", format: TilePyramids.tableFormat(settings))
        #expect(table.count == PyramidGeometry(size: size, tileSize: 256).tileCount)
    }

    @Test func aBuildKilledHalfWayResumesWithTheSameTiles() async throws {
        let size = PixelSize(width: 4096, height: 8192)
        let (scratch, _) = try await Self.original(size)
        let geometry = PyramidGeometry(size: size, tileSize: 256)
        let pid = try Self.warm(scratch, into: scratch.path + "/pyramids")
        // Killed once a third of the tiles' slots are in the table file.
        let entry = 256 * 256 * 4 + Int(sysconf(Int32(_SC_PAGESIZE)))
        let table = scratch.path + "/pyramids/pyramid-256.table", third = geometry.tileCount / 3 * entry
        let (killed, status) = try await offThePool("kill") { () -> (Bool, Int32) in
            var killed = false
            for _ in 0..<60_000 {
                let bytes = (try? FileManager.default.attributesOfItem(atPath: table)[.size] as? Int) ?? 0
                if bytes >= third {
                    killed = kill(pid, SIGKILL) == 0
                    break
                }
                usleep(1000)
            }
            return (killed, waitFor(pid))
        }
        #expect(killed && status == 128 + SIGKILL, "the build ended before it was killed")

        let cache = try ImageCache(source: try DirectorySource(root: scratch.path + "/originals"))
        let resumed = try TilePyramids(cache: cache, directory: scratch.path + "/pyramids", settings: Self.settings)
        let (_, version) = try await resumed.build("big.jpg")
        let stats = resumed.statistics
        #expect(stats.tilesFound > 0 && stats.tilesWritten > 0, "\(stats)")
        #expect(stats.tilesFound + stats.tilesWritten == geometry.tileCount)
        // Every tile is a clean build's, none torn.
        let clean = try TilePyramids(cache: cache, directory: scratch.path + "/clean", settings: Self.settings)
        try await clean.build("big.jpg")
        for level in geometry.levels.indices {
            let (columns, rows) = geometry.grid(level)
            for row in 0..<rows {
                for column in 0..<columns {
                    let tile = TileAddress(level: level, column: column, row: row)
                    let a = try #require(resumed.cachedTile(tile, of: "big.jpg", version: version))
                    let b = try #require(clean.cachedTile(tile, of: "big.jpg", version: version))
                    #expect(a.hasSamePixels(as: b), "tile \(tile)")
                }
            }
        }
    }

    /// A pyramid another process is building is joined, not built again: this process builds
    /// it, and `strata warm --iiif` started meanwhile hands over what this process writes, then
    /// finds every tile there and decodes nothing (it says "0 written").
    @Test func aBuildInAnotherProcessIsJoinedNotRepeated() async throws {
        let size = PixelSize(width: 4096, height: 8192)
        let (scratch, _) = try await Self.original(size)
        let geometry = PyramidGeometry(size: size, tileSize: 256)
        let cache = try ImageCache(source: try DirectorySource(root: scratch.path + "/originals"))
        let here = try TilePyramids(cache: cache, directory: scratch.path + "/pyramids", settings: Self.settings)
        // This pass is slowed (5 ms a tile) so that the other process starts while it runs.
        here.afterWritingTile.withLock { $0 = { _ in usleep(5000) } }
        let ours = Task { try await here.build("big.jpg") }
        #expect(await eventually { here.statistics.passes == 1 })
        let root = scratch.path
        let other = try await offThePool("strata warm") {
            try runStrata([
                "warm", root + "/originals", "--iiif", "--iiif-pyramid-path", root + "/pyramids",
                "--iiif-tiled-above", "1", "--iiif-tile-size", "256", "--iiif-max-source-pixels", "4000000000",
                "--memory-pressure-enabled", "false",
            ])
        }
        _ = try await ours.value
        #expect(other.status == 0, "\(other.stderr)")
        #expect(other.stdout.contains("(\(geometry.tileCount) tiles: 0 written, \(geometry.tileCount) already there)"), "\(other.stdout)")
        #expect(here.statistics.passes == 1 && here.statistics.tilesWritten == geometry.tileCount, "\(here.statistics)")
    }
}
