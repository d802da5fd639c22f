import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// A pyramid's original copied to a private file in parts and read from its mapping: the pass
/// releases what it has read, the parts must be of one version, and a source that cannot read
/// parts is fetched whole.
@Suite struct PyramidSpoolTests {
    /// `bytes` served in parts of `partBytes`, under a version that changes after
    /// `changeAfter` parts (never when `nil`); no whole fetch.
    final class PartSource: ImageSource {
        let bytes: [UInt8]
        let partBytes: Int
        let changeAfter: Int?
        let parts = Lock(0)

        init(_ bytes: [UInt8], partBytes: Int, changeAfter: Int? = nil) {
            self.bytes = bytes
            self.partBytes = partBytes
            self.changeAfter = changeAfter
        }

        func fetch(key: String) async throws(SourceError) -> SourceData {
            throw SourceError(key: key, reason: .failed("a spool reads parts only"))
        }

        func fetchRange(key: String, offset: Int, maxBytes: Int) async throws(SourceError) -> SourceRange? {
            let index = parts.withLock { count in
                defer { count += 1 }
                return count
            }
            let version = changeAfter.map { index >= $0 ? "v2" : "v1" } ?? "v1"
            let end = min(bytes.count, offset + min(maxBytes, partBytes))
            return SourceRange(bytes: Array(bytes[min(offset, end)..<end]), version: version, totalBytes: bytes.count)
        }
    }

    static let jpeg = Fixtures.bytes("jpeg/path-2560x1600.jpg")

    @Test func partsAreCopiedInOrderAndMapped() async throws {
        let source = PartSource(Self.jpeg, partBytes: 50_000)
        let cache = try ImageCache(source: source)
        let scratch = TempDirectory()
        let spooled = try await cache.spoolOriginal(
            "photo.jpg", lane: FlightLane(.prefetch), into: scratch.path + "/builds", maxBytes: .max)
        #expect(spooled.version == "v1")
        #expect(spooled.file.withUnsafeBytes { Array($0) } == Self.jpeg)
        #expect(source.parts.withLock { $0 } == (Self.jpeg.count + 49_999) / 50_000)
        #expect(cache.statistics.engine.sourceFetches == 1)
        // Nothing is left in the folder: the file has no name.
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path + "/builds").isEmpty)
    }

    @Test func aDirectorysOriginalIsCopiedInTheKernelWithItsVersion() async throws {
        let scratch = TempDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path + "/originals", withIntermediateDirectories: true)
        try Data(Self.jpeg).write(to: URL(fileURLWithPath: scratch.path + "/originals/photo.jpg"))
        let source = try DirectorySource(root: scratch.path + "/originals")
        let cache = try ImageCache(source: source)
        let spooled = try await cache.spoolOriginal(
            "photo.jpg", lane: FlightLane(.prefetch), into: scratch.path + "/builds", maxBytes: .max)
        #expect(spooled.version == (try source.versionBlocking(key: "photo.jpg")))
        #expect(spooled.file.withUnsafeBytes { Array($0) } == Self.jpeg)
        #expect(cache.statistics.engine.sourceFetches == 1)
        // A full disk under the spool: the table tier's failure, naming the spool.
        let rule = SyscallFaults.Rule(call: "copy_file_range", pathContains: scratch.path + "/originals", errno: ENOSPC)
        let (outcome, failures) = await SyscallFaults.injecting(rule) { () async -> Result<Void, ImageCacheError> in
            do throws(ImageCacheError) {
                _ = try await cache.spoolOriginal("photo.jpg", lane: FlightLane(.prefetch), into: scratch.path + "/builds", maxBytes: .max)
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        #expect(failures == 1)
        guard case .failure(.tier(let failure)) = outcome else {
            Issue.record("not a tier failure: \(outcome)")
            return
        }
        #expect(failure.tier == .table && failure.reason.contains("spool") && failure.reason.contains("copy_file_range"), "\(failure)")
        // Missing: not found.
        await #expect(throws: ImageCacheError.self) {
            try await cache.spoolOriginal("nothing.jpg", lane: FlightLane(.prefetch), into: scratch.path + "/builds", maxBytes: .max)
        }
    }

    /// An original over the pyramid's byte limit is refused by its length, before any part is
    /// written, from parts, from a directory (whose own `maxFileBytes` does not apply to a copy
    /// to disk) and from a source fetched whole.
    @Test func anOriginalOverTheLimitIsRefusedBeforeItIsCopied() async throws {
        let scratch = TempDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path + "/originals", withIntermediateDirectories: true)
        try Data(Self.jpeg).write(to: URL(fileURLWithPath: scratch.path + "/originals/photo.jpg"))
        let parts = PartSource(Self.jpeg, partBytes: 50_000)
        let sources: [any ImageSource] = [
            parts, try DirectorySource(root: scratch.path + "/originals", maxFileBytes: 1000),
            ClosureSource { _ in SourceData(bytes: Self.jpeg, version: "whole") },
        ]
        for source in sources {
            let cache = try ImageCache(source: source)
            do {
                _ = try await cache.spoolOriginal(
                    "photo.jpg", lane: FlightLane(.prefetch), into: scratch.path + "/builds", maxBytes: Self.jpeg.count - 1)
                Issue.record("\(source): an original over the limit was copied")
            } catch {
                guard case .source(let failure) = error, case .tooLarge(let bytes, let limit) = failure.reason else {
                    Issue.record("\(source): not a refusal by size: \(error)")
                    continue
                }
                #expect(bytes == Self.jpeg.count && limit == Self.jpeg.count - 1)
            }
            // At the limit it is copied (the directory's 1000-byte maxFileBytes notwithstanding).
            let spooled = try await cache.spoolOriginal(
                "photo.jpg", lane: FlightLane(.prefetch), into: scratch.path + "/builds", maxBytes: Self.jpeg.count)
            #expect(spooled.file.withUnsafeBytes { Array($0) } == Self.jpeg)
        }
        // The part source's refusal came from its first part.
        #expect(parts.parts.withLock { $0 } == 1 + (Self.jpeg.count + 49_999) / 50_000)
    }

    @Test func anOriginalReplacedMidwayIsAChangeNotAMixture() async throws {
        let cache = try ImageCache(source: PartSource(Self.jpeg, partBytes: 50_000, changeAfter: 3))
        let scratch = TempDirectory()
        do {
            _ = try await cache.spoolOriginal("photo.jpg", lane: FlightLane(.prefetch), into: scratch.path, maxBytes: .max)
            Issue.record("a spool of parts of two versions was taken")
        } catch {
            guard case .source(let failure) = error, case .changed(let why) = failure.reason else {
                Issue.record("not a change: \(error)")
                return
            }
            #expect(why.contains("v1") && why.contains("v2"), "\(why)")
        }
    }

    @Test func aSourceWithoutPartsIsFetchedWhole() async throws {
        let cache = try ImageCache(source: ClosureSource { _ in SourceData(bytes: Self.jpeg, version: "whole") })
        let scratch = TempDirectory()
        let spooled = try await cache.spoolOriginal("photo.jpg", lane: FlightLane(.prefetch), into: scratch.path, maxBytes: .max)
        #expect(spooled.version == "whole" && spooled.file.withUnsafeBytes { Array($0) } == Self.jpeg)
        #expect(cache.statistics.engine.sourceFetches == 1)
    }

    @Test func aFolderThatCannotBeMadeIsTheTablesFailure() async throws {
        let cache = try ImageCache(source: PartSource(Self.jpeg, partBytes: 50_000))
        let scratch = TempDirectory()
        try Data([1]).write(to: URL(fileURLWithPath: scratch.path + "/file"))
        do {
            _ = try await cache.spoolOriginal("photo.jpg", lane: FlightLane(.prefetch), into: scratch.path + "/file/builds", maxBytes: .max)
            Issue.record("a spool under a file was made")
        } catch {
            guard case .tier(let failure) = error else {
                Issue.record("not a tier failure: \(error)")
                return
            }
            #expect(failure.tier == .table && failure.reason.contains("spool"), "\(failure)")
        }
    }

    /// The ranges a pass over `bytes` hands to `release`, and the tiles it made.
    static func releases(of bytes: [UInt8], geometry: PyramidGeometry) async throws -> (ranges: [Range<Int>], tiles: Int) {
        let released = Lock<[Range<Int>]>([])
        let tiles = try await offThePool("pass") {
            var tiles = 0
            try bytes.withUnsafeBytes { raw in
                let header = try ImageDecoder().readHeader(raw)
                let feed = try PyramidPass.feed(
                    for: header, bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1 << 40)
                #expect(feed == .jpegRows || feed == .pngRows || feed == .tiffBands)
                try PyramidPass.run(
                    raw, header: header, feed: feed, wholeDecodePixels: 1 << 40, forkJoin: .dispatch, geometry: geometry,
                    release: { range in released.withLock { $0.append(range) } }
                ) { _, _ in tiles += 1 }
            }
            return tiles
        }
        return (released.withLock { $0 }, tiles)
    }

    /// Adjacent, in order, from the start to near the end of `count` bytes, in steps.
    static func expectBehind(_ pass: ArraySlice<Range<Int>>, count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(pass.count >= 2, "\(pass.count) releases", sourceLocation: sourceLocation)
        #expect(pass.first?.lowerBound == 0, sourceLocation: sourceLocation)
        #expect(zip(pass, pass.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound }, sourceLocation: sourceLocation)
        #expect(
            (pass.last?.upperBound ?? 0) > count * 9 / 10, "released up to \(pass.last?.upperBound ?? 0) of \(count)",
            sourceLocation: sourceLocation)
    }

    /// Both passes of a JPEG (1/8 on the split reader, then full size through libjpeg) hand
    /// back the data behind them as they go, and all of it between the passes.
    @Test func aJPEGPassReleasesTheOriginalBehindItsDecode() async throws {
        let size = PixelSize(width: 8200, height: 2600)
        let jpeg = try await offThePool("mosaic") { try Mosaic.jpeg(size) }
        let geometry = PyramidGeometry(size: size, tileSize: 256)
        #expect(PyramidPass.coarseLevel(of: geometry) == 3)
        let (ranges, tiles) = try await Self.releases(of: jpeg, geometry: geometry)
        #expect(tiles == geometry.tileCount)
        let whole = try #require(ranges.firstIndex(of: 0..<jpeg.count), "all of it released between the passes")
        // The coarse pass's rounds take 2 MiB each, the full pass's strips less.
        Self.expectBehind(ranges[..<whole], count: jpeg.count)
        Self.expectBehind(ranges[(whole + 1)...], count: jpeg.count)
    }

    /// A striped and a tiled TIFF (`tiffcp`, deflated): each band's strips or tiles are handed
    /// back once decoded, in order, nearly all of the file in the end.
    @Test(arguments: [["-r", "64"], ["-t", "-w", "256", "-l", "256"]])
    func aTIFFPassReleasesEachBandsStripsOrTiles(layout: [String]) async throws {
        let photo = try ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        let scratch = TempDirectory()
        let plain = scratch.path + "/plain.tif", laid = scratch.path + "/laid.tif"
        try Data(TIFFWriter.tiff(photo, .rgb)).write(to: URL(fileURLWithPath: plain))
        _ = try ExternalTools.run("tiffcp", layout + ["-c", "zip", plain, laid])
        let tiff = [UInt8](try Data(contentsOf: URL(fileURLWithPath: laid)))
        let geometry = PyramidGeometry(size: photo.size, tileSize: 256)
        let (ranges, tiles) = try await Self.releases(of: tiff, geometry: geometry)
        #expect(tiles == geometry.tileCount)
        #expect(ranges.count >= 4, "\(ranges.count) releases")
        #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound <= $1.lowerBound }, "\(ranges)")
        let released = ranges.reduce(0) { $0 + $1.count }
        #expect(released > tiff.count * 9 / 10, "released \(released) of \(tiff.count)")
    }

    /// A PNG's row pass hands back the data behind libpng's read position.
    @Test func aPNGPassReleasesTheOriginalBehindItsDecode() async throws {
        let photo = try ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        let png = try ImageEncoder.encode(photo, as: .png)
        let geometry = PyramidGeometry(size: photo.size, tileSize: 256)
        let (ranges, tiles) = try await Self.releases(of: png, geometry: geometry)
        #expect(tiles == geometry.tileCount)
        Self.expectBehind(ranges[...], count: png.count)
    }
}
