import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// JPEG 2000 originals feed their tile pyramids from their own resolution levels: each tile a
/// region decode at the file's level of the tile's (OpenJPEG reads the code-blocks it needs),
/// the pyramid's coarser levels halved from the file's coarsest.
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

    /// Two passes (level 1 is a screen long): level 1 and coarser come from the file's own
    /// level 1, the rest from the full size; a tile waited for is made out of turn, with the
    /// pixels the pass then makes.
    @Test func twoPassesAndTilesOutOfTurn() async throws {
        let photo = ColourFixtures.photo(PixelSize(width: 2047, height: 1301))
        let bytes = try await offThePool("opj_compress") {
            try JP2DecodingTests.compress(TIFFWriter.tiff(photo, .rgb), ["-t", "512,512", "-n", "4", "-r", "20"], tools: FormatTools())
        }
        let geometry = PyramidGeometry(size: photo.size, tileSize: 128)
        guard case .jp2Levels(let levels) = try Self.feed(bytes, geometry) else {
            Issue.record("a JPEG 2000 file is not fed from its bands")
            return
        }
        #expect(levels.coarse == 1)
        let full = try ImageDecoder().decode(bytes)
        let level1Size = geometry.levels[1]
        var level1 = PixelImage(width: level1Size.width, height: level1Size.height)
        let stride1 = level1.bytesPerRow
        _ = try level1.withUnsafeMutableBytes { raw in
            try bytes.withUnsafeBytes { try JP2Codec.decode($0, size: level1Size, into: raw.baseAddress!, stride: stride1) }
        }
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
        // Every tile, the waited-for one twice: out of turn, before the full pass's first
        // level-0 tile, and by the pass, with the same pixels.
        #expect(Set(order).count == geometry.tileCount)
        let images = try #require(emitted[late])
        #expect(images.count == 2 && PixelDiff.compare(images[0], images[1]).max == 0)
        #expect(order.firstIndex(of: late)! < order.firstIndex { $0.level == 0 && $0 != late }!)
        for (tile, images) in emitted {
            let rect = geometry.rect(of: tile), image = images[0]
            if tile.level == 0 {
                #expect(PixelDiff.compare(image, Self.crop(full, x: rect.x, y: rect.y, size: rect.size)).max == 0, "\(tile)")
            } else {
                // The file's level 1 (its wavelet's low band), halved for the coarser levels.
                let scale = Double(1 << (tile.level - 1))
                let expected = Resampler(filter: .box).resample(
                    level1,
                    region: SourceRect(
                        x: Double(rect.x) * scale, y: Double(rect.y) * scale, width: Double(rect.size.width) * scale,
                        height: Double(rect.size.height) * scale),
                    to: rect.size)
                #expect(ColourFixtures.psnr(image, expected) >= 40, "\(tile)")
            }
        }
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
