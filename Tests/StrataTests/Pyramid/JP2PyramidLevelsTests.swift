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

    /// Every tile of a lossy, tiled JP2's pyramid against the full decode resized.
    @Test func thePyramidComesFromTheFilesLevels() async throws {
        let (bytes, _) = try await Self.file(["-t", "256,256", "-n", "4", "-r", "20"])
        let geometry = PyramidGeometry(size: PixelSize(width: 1999, height: 1301), tileSize: 128)
        #expect(geometry.levels.count == 5)
        let feed = try bytes.withUnsafeBytes { raw in
            try PyramidPass.feed(
                for: try ImageDecoder().readHeader(raw), bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1)
        }
        guard case .jp2Levels(let levels) = feed else {
            Issue.record("a JPEG 2000 file is fed as \(feed)")
            return
        }
        // Level 0 is the file's full size; each other level its next finer halved.
        #expect(levels.tiles.sources.map(\.level) == [0, 0, 1, 2, 3])
        let setup = try TilePyramidsTests.Setup(bytes, name: "photo.jp2", tileSize: 128, maximumTiles: 1024)
        let reference = try ImageDecoder().decode(bytes)
        let lowest = try await TilePyramidsTests.lowestPSNR(setup, key: CacheKey("photo.jp2"), reference: reference)
        // Level 1 is the box pyramid's own (level 0 halved); deeper levels, the file's next
        // finer level halved, agree with a Lanczos-3 reduction as the streaming pyramid of the
        // same photo does (its test's bound: 29 dB), and with a box reduction within 30 dB
        // (the file's levels are its wavelet's low bands, not 2 × 2 means).
        #expect(lowest.box >= 30 && lowest.lanczos >= 29, "\(lowest)")
        let stats = setup.pyramids.statistics
        #expect(stats.passes == 1 && stats.tilesWritten == geometry.tileCount && stats.buildsFailed == 0)
    }

    /// A file whose coarsest level is too large to halve from is decoded whole, up to the
    /// limit, and past it refused with what to do.
    @Test func withoutEnoughLevelsTheWholeDecodeLimitHolds() async throws {
        let wide = ColourFixtures.photo(PixelSize(width: 4200, height: 64))
        let bytes = try await offThePool("opj_compress") {
            try JP2DecodingTests.compress(TIFFWriter.tiff(wide, .rgb), ["-n", "1"], tools: FormatTools())
        }
        let geometry = PyramidGeometry(size: wide.size, tileSize: 256)
        let error = #expect(throws: ImageDecodingError.self) {
            try bytes.withUnsafeBytes { raw in
                try PyramidPass.feed(
                    for: try ImageDecoder().readHeader(raw), bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40,
                    wholeDecodePixels: 100_000)
            }
        }
        #expect("\(String(describing: error))".contains("opj_compress -n"))
        let allowed = try bytes.withUnsafeBytes { raw in
            try PyramidPass.feed(
                for: try ImageDecoder().readHeader(raw), bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40,
                wholeDecodePixels: 1 << 20)
        }
        #expect(allowed == .wholeDecode)
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
