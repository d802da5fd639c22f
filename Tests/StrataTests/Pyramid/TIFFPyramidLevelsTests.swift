import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// Pyramidal TIFFs (pages from `tiffcp`, SubIFDs and pages from `vips tiffsave --pyramid`) give
/// each tile from their own image of its level, or the nearest finer one reduced.
@Suite struct TIFFPyramidLevelsTests {
    /// A 1000 × 700 photo with its own images at levels 1 and 3 of 64-px tiles: level 1 a
    /// *gray* photo (not the reduction of level 0, so a tile shows which image it came from),
    /// level 3 a pixel short of the level's 125 × 88 (its writer rounded down); 2 and 4 are
    /// missing. Deflate-compressed tiles of `tiffTile` pixels.
    static func pages(_ tools: FormatTools, tiffTile: Int = 64) throws -> (bytes: [UInt8], pages: [Int: PixelImage]) {
        let pages = [
            0: ColourFixtures.photo(PixelSize(width: 1000, height: 700)),
            1: ColourFixtures.photo(PixelSize(width: 500, height: 350), gray: true),
            3: ColourFixtures.photo(PixelSize(width: 125, height: 87)),
        ]
        let output = tools.path("tif")
        try ExternalTools.run(
            "tiffcp",
            ["-c", "zip", "-t", "-w", "\(tiffTile)", "-l", "\(tiffTile)"]
                + [0, 1, 3].map { tools.write(TIFFWriter.tiff(pages[$0]!, .rgb), suffix: "tif") }
                + [output])
        return (try tools.read(output), pages)
    }

    /// ``pages(_:)`` on a thread of its own (`tiffcp` runs as a child process).
    static func pages(tiffTile: Int = 64) async throws -> (bytes: [UInt8], pages: [Int: PixelImage]) {
        try await offThePool("tiffcp") { try pages(FormatTools(), tiffTile: tiffTile) }
    }

    /// `image` padded to `size` by repeating its last column and row.
    static func padded(_ image: PixelImage, to size: PixelSize) -> PixelImage {
        var out = PixelImage(width: size.width, height: size.height)
        let stride = out.bytesPerRow
        out.withUnsafeMutableBytes { raw in
            for y in 0..<size.height {
                for x in 0..<size.width {
                    let p = image.pixelBytes(x: min(x, image.width - 1), y: min(y, image.height - 1))
                    for c in 0..<4 { raw[y * stride + 4 * x + c] = p[c] }
                }
            }
        }
        return out
    }

    /// The file's tiles the size of the pyramid's, and 48 px ones: regions across tile edges.
    @Test(arguments: [64, 48])
    func eachLevelComesFromItsOwnImageOrTheNearestFinerOne(tiffTile: Int) async throws {
        let (bytes, pages) = try await Self.pages(tiffTile: tiffTile)
        let geometry = PyramidGeometry(size: PixelSize(width: 1000, height: 700), tileSize: 64)
        #expect(geometry.levels.count == 5)
        let feed = try bytes.withUnsafeBytes { raw in
            try PyramidPass.feed(
                for: try ImageDecoder().readHeader(raw), bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1)
        }
        guard case .tiffLevels(let levels) = feed else {
            Issue.record("a pyramidal TIFF is fed as \(feed)")
            return
        }
        #expect(levels.sources.map(\.level) == [0, 1, 1, 3, 3])

        let setup = try TilePyramidsTests.Setup(bytes, name: "photo.tif", tileSize: 64, maximumTiles: 1024)
        let (_, version) = try await setup.pyramids.original(for: "photo.tif")
        for level in geometry.levels.indices {
            let from = levels.sources[level].level, scale = 1 << (level - from)
            let source = Self.padded(pages[from]!, to: geometry.levels[from])
            let (columns, rows) = geometry.grid(level)
            for row in 0..<rows {
                for column in 0..<columns {
                    let address = TileAddress(level: level, column: column, row: row)
                    let tile = try await setup.pyramids.tile(address, of: "photo.tif", geometry: geometry, version: version)
                    let rect = geometry.rect(of: address)
                    let expected = Resampler(filter: .box).resample(
                        source,
                        region: SourceRect(
                            x: Double(rect.x * scale), y: Double(rect.y * scale), width: Double(rect.size.width * scale),
                            height: Double(rect.size.height * scale)),
                        to: rect.size)
                    #expect(tile.size == rect.size && PixelDiff.compare(tile, expected).max <= 1, "tile \(address)")
                }
            }
        }
        // Nothing was decoded from level 0 for the coarser levels: one pass, every tile written.
        let stats = setup.pyramids.statistics
        #expect(stats.passes == 1 && stats.tilesWritten == geometry.tileCount && stats.buildsFailed == 0)
    }

    /// The tiles a viewer waits for are made first, then the rest coarse to fine.
    @Test func waitedForTilesComeFirst() async throws {
        let (bytes, _) = try await Self.pages()
        let geometry = PyramidGeometry(size: PixelSize(width: 1000, height: 700), tileSize: 64)
        let images = try bytes.withUnsafeBytes { try TIFFCodec.levels($0) }
        let levels = try #require(TIFFPyramidLevels(images: images, geometry: geometry))
        let deep = TileAddress(level: 0, column: 15, row: 10)
        var emitted: [TileAddress] = []
        try bytes.withUnsafeBytes { raw in
            try levels.run(raw, geometry: geometry, waiting: { emitted.contains(deep) ? [] : [deep] }) { tile, image in
                #expect(image.size == geometry.rect(of: tile).size)
                emitted.append(tile)
            }
        }
        #expect(emitted.count == geometry.tileCount && Set(emitted).count == emitted.count)
        #expect(emitted.prefix(3) == [deep, TileAddress(level: 4, column: 0, row: 0), TileAddress(level: 3, column: 0, row: 0)])
    }

    /// Files that are not pyramids of their first image: a document's pages of one size, a
    /// pyramid with a level missing for more than the gap, a striped first image, one stored as
    /// a single tile.
    @Test func otherMultiImageFilesAreNotPyramids() {
        let size = PixelSize(width: 4000, height: 3000), geometry = PyramidGeometry(size: size, tileSize: 256)
        func level(_ width: Int, _ height: Int, tiled: Bool = true) -> TIFFCodec.Level {
            let block = tiled ? PixelSize(width: 256, height: 256) : PixelSize(width: width, height: 64)
            return TIFFCodec.Level(size: PixelSize(width: width, height: height), block: block, directory: 8)
        }
        #expect(TIFFPyramidLevels(images: [level(4000, 3000), level(4000, 3000)], geometry: geometry) == nil)
        #expect(TIFFPyramidLevels(images: [level(4000, 3000), level(2000, 1500)], geometry: geometry) == nil)
        #expect(
            TIFFPyramidLevels(images: [level(4000, 3000, tiled: false), level(2000, 1500), level(500, 375)], geometry: geometry) == nil)
        // One block as large as the image: every tile's read would decode all of it.
        let oneBlock = TIFFCodec.Level(size: size, block: size, directory: 8)
        #expect(TIFFPyramidLevels(images: [oneBlock, level(2000, 1500), level(500, 375)], geometry: geometry) == nil)
        // Rounded either way, and down to 1 px tall.
        #expect(TIFFPyramidLevels(images: [level(4000, 3000), level(1000, 749), level(250, 187)], geometry: geometry) != nil)
        #expect(TIFFPyramidLevels.matches(PixelSize(width: 1, height: 1), level: 3, of: PixelSize(width: 9, height: 8)))
        #expect(!TIFFPyramidLevels.matches(PixelSize(width: 3, height: 1), level: 3, of: PixelSize(width: 9, height: 8)))
        #expect(!TIFFPyramidLevels.matches(PixelSize(width: 748, height: 562), level: 2, of: PixelSize(width: 3000, height: 2250)))
    }

    /// What `vips tiffsave --pyramid` writes for IIPImage and Cantaloupe (JPEG tiles, one page a
    /// level) and with `--subifd` (deflate, SubIFDs): every tile within 40 dB (JPEG 35) of the
    /// original's full decode resized, and the levels read from the file's own images.
    @Test(arguments: [
        ["--compression", "jpeg", "--Q", "95", "--tile-width", "256", "--tile-height", "256"],
        ["--subifd", "--compression", "deflate"],
    ])
    func vipsPyramids(_ options: [String]) async throws {
        let photo = TilePyramidsTests.oddPhoto()
        let bytes = try await offThePool("vips") { () throws -> [UInt8] in
            let tools = FormatTools(), output = tools.path("tif")
            try ExternalTools.run("vips", ["tiffsave", try tools.png(photo), output, "--tile", "--pyramid"] + options)
            return try tools.read(output)
        }
        let geometry = PyramidGeometry(size: photo.size, tileSize: 256)
        let levels = try #require(TIFFPyramidLevels(images: try bytes.withUnsafeBytes { try TIFFCodec.levels($0) }, geometry: geometry))
        #expect(levels.sources.enumerated().allSatisfy { $0.offset == $0.element.level }, "\(levels.sources.map(\.level))")
        let setup = try TilePyramidsTests.Setup(bytes, name: "photo.tif")
        let lowest = try await TilePyramidsTests.lowestPSNR(setup, key: "photo.tif", reference: photo)
        #expect(lowest.box >= (options.contains("jpeg") ? 35 : 40), "lowest tile PSNR \(lowest) dB")
    }

    /// A pyramidal TIFF cut short, or with tiles of level 0 overwritten: a decoding error (of
    /// the header, or of the build, which fails), and the engine goes on.
    @Test func brokenPyramidsAreDecodingErrors() async throws {
        let (bytes, _) = try await Self.pages()
        var damaged = bytes
        for i in (bytes.count / 10)..<(bytes.count * 3 / 10) { damaged[i] = 0xFF }
        for (broken, failsTheBuild) in [(Array(bytes.prefix(bytes.count * 2 / 3)), false), (damaged, true)] {
            let setup = try TilePyramidsTests.Setup(broken, name: "photo.tif", tileSize: 64, maximumTiles: 1024)
            do {
                try await setup.pyramids.build("photo.tif")
                Issue.record("a broken pyramid was built")
            } catch {
                guard case .decoding = error else {
                    Issue.record("not a decoding error: \(error)")
                    continue
                }
            }
            #expect(setup.pyramids.statistics.buildsFailed == (failsTheBuild ? 1 : 0))
        }
    }
}
