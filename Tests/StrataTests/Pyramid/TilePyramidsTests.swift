import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// Pyramids built from originals through the engine's source: tiles against a full decode
/// resized, one build per original and version, resuming, rebuilding, cancelling, and the
/// originals a pyramid refuses.
@Suite struct TilePyramidsTests {
    /// A scratch directory with `photo.<ext>` made of `bytes`, an engine over it and pyramids
    /// of `tileSize` tiles in a table beside it.
    struct Setup {
        let scratch = TempDirectory()
        let cache: ImageCache
        let pyramids: TilePyramids

        init(
            _ bytes: [UInt8], name: String = "photo.jpg", tileSize: Int = 256, maximumTiles: Int = 512, maxPixels: Int? = nil
        )
            throws
        {
            try FileManager.default.createDirectory(atPath: scratch.path + "/originals", withIntermediateDirectories: true)
            try Data(bytes).write(to: URL(fileURLWithPath: scratch.path + "/originals/" + name))
            cache = try ImageCache(
                source: try DirectorySource(root: scratch.path + "/originals"),
                render: maxPixels.map { RenderSettings(maxPixels: $0) } ?? RenderSettings())
            pyramids = try TilePyramids(
                cache: cache, directory: scratch.path + "/pyramids",
                settings: .init(tileSize: tileSize, maximumTiles: maximumTiles))
        }
    }

    /// A photo whose sides are multiples of neither the tile size nor two (cut from a fixture).
    static func oddPhoto() -> PixelImage {
        let full = try! ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        var image = PixelImage(width: 1999, height: 1301)
        paste(cropped(full, width: 1999, height: 1301), into: &image, x: 0, y: 0)
        return image
    }

    static func cropped(_ image: PixelImage, width: Int, height: Int) -> PixelImage {
        PixelImage(
            width: width, height: height, bytesPerRow: image.bytesPerRow, style: image.style, storage: image.storage, offset: 0)
    }

    /// Every tile of `key` against the same region of `reference` (the original's full decode)
    /// resized by an area average (the pyramid's own filter) and by Lanczos-3; the lowest PSNR
    /// of each.
    static func lowestPSNR(
        _ setup: Setup, key: CacheKey, reference: PixelImage, from first: Int = 0
    ) async throws -> (box: Double, lanczos: Double) {
        let (header, version) = try await setup.pyramids.original(for: key)
        let geometry = setup.pyramids.geometry(for: header.size)
        var lowest = (box: Double.infinity, lanczos: Double.infinity)
        for level in geometry.levels.indices where level >= first {
            let scale = Double(1 << level)
            let (columns, rows) = geometry.grid(level)
            for row in 0..<rows {
                for column in 0..<columns {
                    let address = TileAddress(level: level, column: column, row: row)
                    let tile = try await setup.pyramids.tile(address, of: key, geometry: geometry, version: version)
                    let rect = geometry.rect(of: address)
                    #expect(tile.size == rect.size, "tile \(address)")
                    // The tile's pixels in the original: each level pixel covers 2ⁿ × 2ⁿ (those
                    // past the image's edge are dropped by the resampler).
                    let region = SourceRect(
                        x: Double(rect.x) * scale, y: Double(rect.y) * scale, width: Double(rect.size.width) * scale,
                        height: Double(rect.size.height) * scale)
                    let box = Resampler(filter: .box).resample(reference, region: region, to: rect.size)
                    let lanczos = Resampler().resample(reference, region: region, to: rect.size)
                    lowest.box = min(lowest.box, ColourFixtures.psnr(tile, box))
                    lowest.lanczos = min(lowest.lanczos, ColourFixtures.psnr(tile, lanczos))
                }
            }
        }
        return lowest
    }

    /// One pass (level 1 shorter than a screen), and two: a 2047 × 1301 photo's level 1 (1024
    /// wide) made first from a 1/2-scale decode, then level 0.
    @Test(arguments: [1999, 2047])
    func everyTileMatchesItsRegionOfAFullDecodeResized(width: Int) async throws {
        let source = try ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        var photo = PixelImage(width: width, height: 1301)
        paste(Self.cropped(source, width: width, height: 1301), into: &photo, x: 0, y: 0)
        let jpeg = try ImageEncoder.encode(photo, as: .jpeg, quality: 95)
        #expect(PyramidPass.coarseLevel(of: PyramidGeometry(size: photo.size, tileSize: 256)) == (width == 1999 ? nil : 1))
        let setup = try Setup(jpeg)
        let reference = try ImageDecoder().decode(jpeg)
        let lowest = try await Self.lowestPSNR(setup, key: "photo.jpg", reference: reference)
        // The pyramid's 2×2 means are an area average; against Lanczos-3 (sharper) a detailed
        // photo's halved levels measure 30–38 dB, as any box-filtered pyramid's (libvips').
        #expect(lowest.box >= 40 && lowest.lanczos >= 29, "lowest tile PSNR \(lowest) dB")
        let stats = setup.pyramids.statistics
        let tiles = setup.pyramids.geometry(for: reference.size).tileCount
        #expect(stats.buildsStarted == 1 && stats.buildsFailed == 0 && stats.tilesWritten == tiles)
        #expect(setup.pyramids.tileCount == tiles)
    }

    /// A JPEG 8200 px wide: its coarse pass starts at level 3, read at 1/8 scale by
    /// `JPEGEighthReader` (block means, the 4:2:0 chroma's quadrant means), on two threads.
    @Test func aCoarsePassAtAnEighthMatchesAFullDecodeResized() async throws {
        let size = PixelSize(width: 8200, height: 1301)
        let jpeg = try await offThePool("mosaic") { try Mosaic.jpeg(size) }
        #expect(PyramidPass.coarseLevel(of: PyramidGeometry(size: size, tileSize: 256)) == 3)
        let setup = try Setup(jpeg)
        let reference = try await offThePool("decode") { try ImageDecoder().decode(jpeg) }
        let lowest = try await Self.lowestPSNR(setup, key: "photo.jpg", reference: reference, from: 3)
        #expect(lowest.box >= 40, "lowest tile PSNR \(lowest) dB")
        #expect(setup.pyramids.statistics.tilesWritten == setup.pyramids.geometry(for: size).tileCount)
    }

    /// The coarse pass starts at the coarsest of levels 1–3 still a screen long.
    @Test func theCoarsePassCoversAViewersFirstScreen() {
        func coarse(_ width: Int, _ height: Int, tile: Int = 256) -> Int? {
            PyramidPass.coarseLevel(of: PyramidGeometry(size: PixelSize(width: width, height: height), tileSize: tile))
        }
        #expect(coarse(40960, 25600) == 3 && coarse(20480, 8000) == 3 && coarse(10240, 6400) == 3)
        #expect(coarse(7680, 4800) == 2 && coarse(5120, 3200) == 2 && coarse(3200, 5120) == 2)
        #expect(coarse(3000, 2000) == 1 && coarse(2046, 100) == nil && coarse(1500, 1000) == nil)
        // Fewer levels than 3: the coarsest still a screen long.
        #expect(coarse(5000, 5000, tile: 4096) == 1)
    }

    /// A TIFF is read in bands of strips (no whole decode) and gives the same pyramid.
    @Test func aTIFFIsReadInBands() async throws {
        let photo = Self.oddPhoto()
        let tiff = TIFFWriter.tiff(photo, .rgb)
        try tiff.withUnsafeBytes { raw in
            let header = try ImageDecoder().readHeader(raw)
            #expect(
                try PyramidPass.feed(
                    for: header, bytes: raw, geometry: PyramidGeometry(size: header.size, tileSize: 256), maxSourcePixels: 1 << 40,
                    wholeDecodePixels: 1000) == .tiffBands)
        }
        let setup = try Setup(tiff, name: "photo.tif")
        let lowest = try await Self.lowestPSNR(setup, key: "photo.tif", reference: photo)
        #expect(lowest.box >= 40 && lowest.lanczos >= 29, "lowest tile PSNR \(lowest) dB")
    }

    /// Requests for many tiles of a cold original, while its fetch is held, make one build.
    @Test func concurrentRequestsShareOneBuild() async throws {
        let source = CountingSource(gated: true)
        let cache = try ImageCache(source: source)
        let scratch = TempDirectory()
        let pyramids = try TilePyramids(cache: cache, directory: scratch.path, settings: .init(tileSize: 256))
        let key: CacheKey = "jpeg/path-2560x1600.jpg"
        let geometry = pyramids.geometry(for: PixelSize(width: 2560, height: 1600))
        let addresses = [0, 1, 2, 3].flatMap { level in
            (0..<geometry.grid(level).columns).map { TileAddress(level: level, column: $0, row: geometry.grid(level).rows - 1) }
        }
        let version = SourceVersion(token: "v1")
        try await withThrowingTaskGroup(of: PixelSize.self) { group in
            for address in addresses {
                group.addTask { try await pyramids.tile(address, of: key, geometry: geometry, version: version).size }
            }
            #expect(await eventually { pyramids.statistics.tileWaits == addresses.count && source.held.load(ordering: .relaxed) == 1 })
            source.gate!.open()
            var sizes: [PixelSize] = []
            for try await size in group { sizes.append(size) }
            #expect(sizes.count == addresses.count)
        }
        #expect(source.fetches.load(ordering: .relaxed) == 1)
        #expect(pyramids.statistics.buildsStarted == 1)
        // Now every tile is a table hit.
        let before = pyramids.statistics.tileHits
        _ = try await pyramids.tile(addresses[0], of: key, geometry: geometry, version: version)
        #expect(pyramids.statistics.tileHits == before + 1 && source.fetches.load(ordering: .relaxed) == 1)
    }

    /// A waiter cancelled during a build stops waiting; the build goes on and writes its tiles.
    @Test func aCancelledWaiterLeavesTheBuildRunning() async throws {
        let source = CountingSource(gated: true)
        let cache = try ImageCache(source: source)
        let scratch = TempDirectory()
        let pyramids = try TilePyramids(cache: cache, directory: scratch.path, settings: .init(tileSize: 256))
        let key: CacheKey = "jpeg/path-2560x1600.jpg"
        let geometry = pyramids.geometry(for: PixelSize(width: 2560, height: 1600))
        let version = SourceVersion(token: "v1")
        let tile = TileAddress(level: 0, column: 9, row: 6)
        let waiter = Task { try await pyramids.tile(tile, of: key, geometry: geometry, version: version) }
        #expect(await eventually { source.held.load(ordering: .relaxed) == 1 })
        waiter.cancel()
        await #expect(throws: ImageCacheError.self) { try await waiter.value }
        source.gate!.open()
        #expect(await eventually { pyramids.statistics.buildsFinished == 1 })
        #expect(pyramids.statistics.tilesWritten == geometry.tileCount)
        #expect(pyramids.cachedTile(tile, of: key, version: version)?.size == PixelSize(width: 256, height: 64))
    }

    /// A build after some tiles were lost writes only those; a changed original is built again,
    /// and its old tiles are misses.
    @Test func aBuildSkipsWrittenTilesAndAChangeRebuilds() async throws {
        let first = try ImageEncoder.encode(Self.oddPhoto(), as: .jpeg, quality: 90)
        let setup = try Setup(first)
        let key: CacheKey = "photo.jpg"
        let (size, version) = try await setup.pyramids.build(key)
        let geometry = setup.pyramids.geometry(for: size)
        let total = geometry.tileCount
        #expect(setup.pyramids.statistics.tilesWritten == total)
        let lost = [
            TileAddress(level: 0, column: 3, row: 2), TileAddress(level: 0, column: 7, row: 5), TileAddress(level: 2, column: 1, row: 1),
        ]
        for tile in lost { try setup.pyramids.table.delete(setup.pyramids.entityID(tile, of: key)) }
        try await setup.pyramids.build(key)
        var stats = setup.pyramids.statistics
        #expect(stats.buildsStarted == 2 && stats.tilesWritten == total + lost.count && stats.tilesFound == total - lost.count)

        // A new original (another size, so another version): a new pyramid.
        let photo = Self.oddPhoto()
        let second = try ImageEncoder.encode(
            Resampler().resize(photo, box: PixelSize(width: 1500, height: 1500), mode: .fit), as: .jpeg, quality: 90)
        try Data(second).write(to: URL(fileURLWithPath: setup.scratch.path + "/originals/photo.jpg"))
        let (newSize, newVersion) = try await setup.pyramids.build(key)
        #expect(newVersion != version && newSize == PixelSize(width: 1500, height: 976))
        stats = setup.pyramids.statistics
        #expect(stats.buildsStarted == 3 && stats.tilesWritten == total + lost.count + setup.pyramids.geometry(for: newSize).tileCount)
        #expect(setup.pyramids.cachedTile(TileAddress(level: 0, column: 0, row: 0), of: key, version: version) == nil)
        // Asked for with the old version, the build refuses: the original changed since.
        await #expect(throws: ImageCacheError.self) {
            try await setup.pyramids.tile(TileAddress(level: 0, column: 0, row: 0), of: key, geometry: geometry, version: version)
        }
    }

    /// The inventory (`strata stats`) reads the pyramids and their levels back from the table's
    /// files: one pyramid per key and colours.
    @Test func theInventoryCountsPyramidsAndLevels() async throws {
        let setup = try Setup(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        try await setup.pyramids.build("photo.jpg")
        try await setup.pyramids.build(CacheKey("photo.jpg", colour: .original))
        let inventory = try PyramidInventory(directory: setup.scratch.path + "/pyramids", settings: setup.pyramids.settings)
        let geometry = setup.pyramids.geometry(for: PixelSize(width: 2560, height: 1600))
        #expect(inventory.pyramids == 2 && inventory.tiles == 2 * geometry.tileCount)
        #expect(inventory.tilesPerLevel == geometry.levels.indices.map { 2 * geometry.grid($0).columns * geometry.grid($0).rows })
        #expect(inventory.table.state == .valid)
        // Removing one key's pyramid leaves the other colours'.
        #expect(try await setup.pyramids.remove("photo.jpg") == geometry.tileCount)
        #expect(setup.pyramids.tileCount == geometry.tileCount)
        #expect(try PyramidInventory(directory: setup.scratch.path + "/pyramids", settings: setup.pyramids.settings).pyramids == 1)
    }

    /// Originals a pyramid cannot take in bounded memory are typed errors, and nothing is written.
    @Test func refusesWhatItCannotStream() async throws {
        // A progressive JPEG above the whole-decode limit (libjpeg would hold its coefficients).
        let progressive = try Setup(Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg"), maxPixels: 500_000)
        await #expect {
            try await progressive.pyramids.build("photo.jpg")
        } throws: { error in
            guard case .decoding(_, let decoding) = error as? ImageCacheError, case .unsupported(let why) = decoding.reason else {
                return false
            }
            return why.contains("progressive JPEG")
        }
        #expect(progressive.pyramids.tileCount == 0)
        // A baseline JPEG above the whole-decode limit streams.
        let baseline = try Setup(Fixtures.bytes("jpeg/path-2560x1600.jpg"), maxPixels: 500_000)
        try await baseline.pyramids.build("photo.jpg")
        #expect(baseline.pyramids.tileCount == baseline.pyramids.geometry(for: PixelSize(width: 2560, height: 1600)).tileCount)
        // Over the pyramids' own limit: refused from the header.
        let small = try TilePyramids(
            cache: baseline.cache, directory: baseline.scratch.path + "/small", settings: .init(tileSize: 256, maxSourcePixels: 1_000_000))
        await #expect {
            try await small.build("photo.jpg")
        } throws: { error in
            guard case .decoding(_, let decoding) = error as? ImageCacheError, case .tooLarge = decoding.reason else { return false }
            return true
        }
        // More tiles than the table holds: refused before any work, naming the setting.
        let tiny = try TilePyramids(
            cache: baseline.cache, directory: baseline.scratch.path + "/tiny", settings: .init(tileSize: 256, maximumTiles: 16))
        await #expect {
            try await tiny.build("photo.jpg")
        } throws: { error in
            guard case .invalidRequest(_, let reason) = error as? ImageCacheError else { return false }
            return reason.contains("iiif.pyramidBytes")
        }
        #expect(tiny.statistics.buildsStarted == 0)
        // A tile outside the pyramid.
        await #expect(throws: ImageCacheError.self) {
            try await baseline.pyramids.tile(
                TileAddress(level: 0, column: 10, row: 0), of: "photo.jpg",
                geometry: baseline.pyramids.geometry(for: PixelSize(width: 2560, height: 1600)), version: SourceVersion(token: "x"))
        }
    }
}
