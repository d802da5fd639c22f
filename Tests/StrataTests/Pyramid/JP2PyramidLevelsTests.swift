import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// JPEG 2000 originals feed their tile pyramids from region decodes in bands: the first screen's
/// levels halved from the file's own level above them, the finer ones reduced from the full
/// size, the tiles a viewer waits for decoded out of turn.
@Suite struct JP2PyramidLevelsTests {
    /// A 1999 × 1301 photo (odd sides: tiles and levels end off the grid) as a JP2 of
    /// `arguments` (lossless unless they say otherwise), made by `opj_compress`.
    static func file(_ arguments: [String]) async throws -> (bytes: [UInt8], photo: PixelImage) {
        let photo = TilePyramidsTests.oddPhoto()
        let bytes = try await offThePool("opj_compress") {
            try JP2DecodingTests.compress(TIFFWriter.tiff(photo, .rgb), arguments, tools: FormatTools())
        }
        return (bytes, photo)
    }

    @Test func aRegionDecodeIsThatPartOfTheLevel() async throws {
        let (bytes, photo) = try await Self.file(["-t", "256,256", "-n", "4"])
        let full = try ImageDecoder().decode(bytes)
        #expect(full.hasSamePixels(as: photo))
        // Across the file's tile edges, at full size: exactly the photo's pixels (lossless).
        let size = PixelSize(width: 300, height: 200)
        var region = PixelImage(width: size.width, height: size.height)
        let stride = region.bytesPerRow
        try region.withUnsafeMutableBytes { raw in
            try bytes.withUnsafeBytes {
                try JP2Codec.decodeRegion($0, reduce: 0, x: 200, y: 150, size: size, into: raw.baseAddress!, stride: stride)
            }
        }
        #expect(PixelDiff.compare(region, Self.crop(photo, x: 200, y: 150, size: size)).max == 0)
        // Two levels down, at the level's edge: the same pixels as the whole level's decode.
        let level2 = JP2Codec.reducedSize(photo.size, origin: PixelSize(width: 0, height: 0), reduce: 2)
        var whole = PixelImage(width: level2.width, height: level2.height)
        let wholeStride = whole.bytesPerRow
        _ = try whole.withUnsafeMutableBytes { raw in
            try bytes.withUnsafeBytes { try JP2Codec.decode($0, size: level2, into: raw.baseAddress!, stride: wholeStride) }
        }
        let corner = PixelSize(width: 100, height: 70)
        var edge = PixelImage(width: corner.width, height: corner.height)
        let edgeStride = edge.bytesPerRow
        try edge.withUnsafeMutableBytes { raw in
            try bytes.withUnsafeBytes {
                try JP2Codec.decodeRegion(
                    $0, reduce: 2, x: level2.width - corner.width, y: level2.height - corner.height, size: corner, into: raw.baseAddress!,
                    stride: edgeStride)
            }
        }
        #expect(
            PixelDiff.compare(edge, Self.crop(whole, x: level2.width - corner.width, y: level2.height - corner.height, size: corner)).max
                == 0)
        // Outside the level: an error, nothing written past the buffer.
        #expect(throws: ImageDecodingError.self) {
            try edge.withUnsafeMutableBytes { raw in
                try bytes.withUnsafeBytes {
                    try JP2Codec.decodeRegion(
                        $0, reduce: 2, x: level2.width - 10, y: 0, size: corner, into: raw.baseAddress!, stride: edgeStride)
                }
            }
        }
    }

    /// One pass (level 1 shorter than a screen): every tile is the box pyramid of the full
    /// decode, as a JPEG's streaming pass makes it (the same bounds as its test's).
    @Test func onePassIsTheBoxPyramid() async throws {
        let (bytes, _) = try await Self.file(["-t", "256,256", "-n", "4", "-r", "20"])
        let geometry = PyramidGeometry(size: PixelSize(width: 1999, height: 1301), tileSize: 128)
        guard case .jp2Levels(let levels) = try Self.feed(bytes, geometry) else {
            Issue.record("a JPEG 2000 file is not fed from its bands")
            return
        }
        #expect(levels.coarse == nil)
        let setup = try TilePyramidsTests.Setup(bytes, name: "photo.jp2", tileSize: 128, maximumTiles: 1024)
        let reference = try ImageDecoder().decode(bytes)
        let lowest = try await TilePyramidsTests.lowestPSNR(setup, key: CacheKey("photo.jp2"), reference: reference)
        #expect(lowest.box >= 40 && lowest.lanczos >= 29, "\(lowest)")
        let stats = setup.pyramids.statistics
        #expect(stats.passes == 1 && stats.tilesWritten == geometry.tileCount && stats.buildsFailed == 0)
    }

    /// Two passes: the pyramid's levels 2 and coarser come from the file's own level 1, moved
    /// onto the box pyramid's sample positions and halved, the rest from the full size; a tile
    /// waited for is made out of turn, with the pixels the pass then makes. Every coarse tile is
    /// within 38 dB of the full decode reduced (40.4 dB; 32.6 without the move).
    @Test func twoPassesAndTilesOutOfTurn() async throws {
        // A detailed photo: a smooth one hides how far the file's low band is from a mean.
        let source = try ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        var photo = PixelImage(width: 2047, height: 1301)
        paste(TilePyramidsTests.cropped(source, width: 2047, height: 1301), into: &photo, x: 0, y: 0)
        let bytes = try await offThePool("opj_compress") { [photo] in
            try JP2DecodingTests.compress(TIFFWriter.tiff(photo, .rgb), ["-t", "512,512", "-n", "4", "-r", "10"], tools: FormatTools())
        }
        let geometry = PyramidGeometry(size: photo.size, tileSize: 128)
        // Its level 1 is a screen long: the coarse pass would read the full size, so one pass.
        guard case .jp2Levels(let feed) = try Self.feed(bytes, geometry) else {
            Issue.record("a JPEG 2000 file is not fed from its bands")
            return
        }
        #expect(feed.coarse == nil)
        let levels = JP2PyramidLevels(coarse: 2)
        let full = try ImageDecoder().decode(bytes)
        let late = TileAddress(level: 0, column: geometry.grid(0).columns - 1, row: geometry.grid(0).rows - 1)
        var emitted: [TileAddress: [PixelImage]] = [:]
        var order: [TileAddress] = []
        try bytes.withUnsafeBytes { raw in
            try levels.run(raw, geometry: geometry, waiting: { emitted[late] == nil ? [late] : [] }) { tile, view in
                var copy = PixelImage(width: view.width, height: view.height)
                let stride = copy.bytesPerRow
                copy.withUnsafeMutableBytes { out in
                    view.withUnsafeBytes { from in
                        for y in 0..<view.height {
                            (out.baseAddress! + y * stride).copyMemory(
                                from: from.baseAddress! + y * view.bytesPerRow, byteCount: view.width * 4)
                        }
                    }
                }
                emitted[tile, default: []].append(copy)
                order.append(tile)
            }
        }
        // Every tile once (the file's level 1 is not emitted by the coarse pass), the
        // waited-for one twice: out of turn, before the full pass's first level-0 tile, and by
        // the pass, with the same pixels.
        #expect(Set(order).count == geometry.tileCount)
        #expect(order.count == geometry.tileCount + 1)
        #expect(
            order.prefix { $0.level >= 2 }.count == geometry.tileCount
                - (0..<2).map { geometry.grid($0).columns * geometry.grid($0).rows }.reduce(0, +))
        let images = try #require(emitted[late])
        #expect(images.count == 2 && PixelDiff.compare(images[0], images[1]).max == 0)
        #expect(order.firstIndex(of: late)! < order.firstIndex { $0.level == 0 && $0 != late }!)
        var lowestCoarse = Double.infinity
        for (tile, images) in emitted {
            let rect = geometry.rect(of: tile), image = images[0]
            let scale = Double(1 << tile.level)
            let region = SourceRect(
                x: Double(rect.x) * scale, y: Double(rect.y) * scale, width: Double(rect.size.width) * scale,
                height: Double(rect.size.height) * scale)
            let reduced = Resampler(filter: .box).resample(full, region: region, to: rect.size)
            if tile.level == 0 {
                #expect(PixelDiff.compare(image, Self.crop(full, x: rect.x, y: rect.y, size: rect.size)).max == 0, "\(tile)")
            } else if tile.level == 1 {
                #expect(ColourFixtures.psnr(image, reduced) >= 50, "\(tile)")
            } else {
                lowestCoarse = min(lowestCoarse, ColourFixtures.psnr(image, reduced))
            }
        }
        #expect(lowestCoarse >= 38, "the coarse levels against the full decode reduced: \(lowestCoarse) dB")
    }

    /// The low band's samples sit at the even pixels of the level above: 1/4, 3/8 and 7/16 of
    /// a pixel off a box mean's centre at levels 1, 2 and 3.
    @Test func theLowBandIsMovedOntoTheBoxPyramidsSamples() {
        #expect(JP2PyramidLevels.lowBandShift(reduce: 0) == 0)
        #expect(JP2PyramidLevels.lowBandShift(reduce: 1) == 0.25)
        #expect(JP2PyramidLevels.lowBandShift(reduce: 2) == 0.375)
        #expect(JP2PyramidLevels.lowBandShift(reduce: 3) == 0.4375)
    }

    /// Where the coarse pass starts: the coarsest of levels 2–3 a screen long, read from the
    /// file's level above it; none when that is the full size or the file has too few levels.
    @Test func theCoarsePassReadsTheLevelAboveTheFirstScreen() throws {
        func coarse(_ width: Int, resolutions: Int) -> Int? {
            JP2PyramidLevels.coarseLevel(
                of: PyramidGeometry(size: PixelSize(width: width, height: width / 2), tileSize: 256),
                origin: PixelSize(width: 0, height: 0), resolutions: resolutions)
        }
        #expect(coarse(12800, resolutions: 7) == 3)
        #expect(coarse(12800, resolutions: 3) == 3)
        #expect(coarse(12800, resolutions: 2) == nil)
        #expect(coarse(5000, resolutions: 6) == 2)
        #expect(coarse(3000, resolutions: 6) == nil)
        #expect(coarse(1500, resolutions: 6) == nil)
    }

    static func feed(_ bytes: [UInt8], _ geometry: PyramidGeometry) throws -> PyramidPass.Feed {
        try bytes.withUnsafeBytes { raw in
            try PyramidPass.feed(
                for: try ImageDecoder().readHeader(raw), bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1)
        }
    }

    static func crop(_ image: PixelImage, x: Int, y: Int, size: PixelSize) -> PixelImage {
        var out = PixelImage(width: size.width, height: size.height)
        let stride = out.bytesPerRow
        out.withUnsafeMutableBytes { raw in
            for row in 0..<size.height {
                for column in 0..<size.width {
                    let p = image.pixelBytes(x: x + column, y: y + row)
                    for c in 0..<4 { raw[row * stride + column * 4 + c] = p[c] }
                }
            }
        }
        return out
    }
}
