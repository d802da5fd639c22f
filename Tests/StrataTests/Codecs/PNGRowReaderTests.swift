import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// libpng's row API (`PNGRowReader`) gives the bytes of the whole decode (`PNGCodec`, libpng's
/// simplified API) for every kind of PNG, row band by row band; and a tile pyramid reads a PNG
/// in rows, however large.
@Suite struct PNGRowReaderTests {
    static let size = PixelSize(width: 203, height: 131)

    /// PNGs of a photo-like image with transparency, written by `vips pngsave` in each storage.
    static let storages: [(String, [String])] = [
        ("8-bit RGBA", []),
        ("8-bit RGB", ["--flatten"]),
        ("8-bit gray", ["--gray", "--flatten"]),
        ("8-bit gray + alpha", ["--gray"]),
        ("16-bit RGBA", ["--sixteen"]),
        ("16-bit gray", ["--gray", "--sixteen", "--flatten"]),
        ("palette with tRNS", ["--palette"]),
        ("1-bit gray", ["--gray", "--flatten", "--bitdepth", "1"]),
    ]

    /// A PNG of `storage` made with vips from ``ColourFixtures``' photo with an alpha ramp.
    static func png(_ storage: String, tools: FormatTools) throws -> [UInt8] {
        let options = try #require(storages.first { $0.0 == storage }?.1)
        let input = try tools.png(withAlphaRamp(ColourFixtures.photo(size)))
        var image = input
        if options.contains("--flatten") {
            image = tools.path("v")
            try ExternalTools.run("vips", ["flatten", input, image, "--background", "255"])
        }
        if options.contains("--gray") {
            let gray = tools.path("v")
            try ExternalTools.run("vips", ["colourspace", image, gray, "b-w"])
            image = gray
        }
        if options.contains("--sixteen") {
            let wide = tools.path("v")
            try ExternalTools.run("vips", ["colourspace", image, wide, options.contains("--gray") ? "grey16" : "rgb16"])
            image = wide
        }
        let output = tools.path("png")
        var save = ["pngsave", image, output]
        if options.contains("--palette") { save += ["--palette"] }
        if let at = options.firstIndex(of: "--bitdepth") { save += ["--bitdepth", options[at + 1]] }
        try ExternalTools.run("vips", save)
        return try tools.read(output)
    }

    /// `image` with alpha falling from 255 at the left edge to 128 at the right, premultiplied
    /// (the colour scaled with it).
    static func withAlphaRamp(_ image: PixelImage) -> PixelImage {
        var image = image
        let stride = image.bytesPerRow, size = image.size
        image.withUnsafeMutableBytes { raw in
            for y in 0..<size.height {
                for x in 0..<size.width {
                    let a = 255 - (x * 255 / size.width) / 2
                    for c in 0..<3 { raw[y * stride + 4 * x + c] = UInt8(Int(raw[y * stride + 4 * x + c]) * a / 255) }
                    raw[y * stride + 4 * x + 3] = UInt8(a)
                }
            }
        }
        return image
    }

    /// ``png(_:tools:)`` on a thread of its own (vips runs as child processes).
    static func png(_ storage: String) async throws -> [UInt8] {
        try await offThePool("png") { try png(storage, tools: FormatTools()) }
    }

    @Test(arguments: storages.map(\.0))
    func rowsAreTheWholeDecodesBytes(_ storage: String) async throws {
        let bytes = try await Self.png(storage)
        let whole = try ImageDecoder().decode(bytes)
        var rows = PixelImage(width: whole.width, height: whole.height)
        let stride = rows.bytesPerRow
        try bytes.withUnsafeBytes { raw in
            let reader = try PNGRowReader(raw)
            #expect(reader.size == whole.size && !reader.isInterlaced)
            try rows.withUnsafeMutableBytes { out in
                var done = 0
                while done < whole.height {
                    done += try reader.read(into: out.baseAddress! + done * stride, stride: stride, count: 7)
                }
            }
        }
        let difference = PixelDiff.compare(rows, whole)
        #expect(difference.max == 0, "\(storage): \(difference)")
    }

    /// A file gamma other than sRGB's (`gAMA` 1.0, linear) is applied as the whole decode does.
    @Test func aFileGammaIsAppliedAsTheWholeDecodeDoes() async throws {
        // Re-saved by vips: no sRGB or gAMA chunk of its own.
        let plain = try await offThePool("png") { () throws -> [UInt8] in
            let tools = FormatTools(), output = tools.path("png")
            try ExternalTools.run("vips", ["pngsave", try tools.png(ColourFixtures.photo(Self.size)), output])
            return try tools.read(output)
        }
        let bytes = Self.inserting(chunk: "gAMA", data: [0, 0x01, 0x86, 0xA0], into: plain)  // 100000: 1.0
        let whole = try ImageDecoder().decode(bytes)
        #expect(PixelDiff.compare(whole, try ImageDecoder().decode(plain)).max > 20, "gAMA 1.0 changes the pixels")
        var rows = PixelImage(width: whole.width, height: whole.height)
        let stride = rows.bytesPerRow
        try bytes.withUnsafeBytes { raw in
            let reader = try PNGRowReader(raw)
            try rows.withUnsafeMutableBytes { out in
                _ = try reader.read(into: out.baseAddress!, stride: stride, count: whole.height)
            }
        }
        #expect(PixelDiff.compare(rows, whole).max <= 1)
    }

    @Test func truncatedAndInterlacedFiles() async throws {
        let bytes = try await Self.png("8-bit RGB")
        // Cut short: the rows past the data are a truncated error.
        let cut = Array(bytes.prefix(bytes.count / 2))
        try cut.withUnsafeBytes { raw in
            let reader = try PNGRowReader(raw)
            var image = PixelImage(width: reader.size.width, height: reader.size.height)
            let stride = image.bytesPerRow
            #expect(throws: ImageDecodingError(.truncated, format: .png)) {
                try image.withUnsafeMutableBytes { out in
                    _ = try reader.read(into: out.baseAddress!, stride: stride, count: reader.size.height)
                }
            }
        }
        // Adam7: said before any row, and a pyramid decodes it whole (under its limit).
        let interlaced = try await offThePool("png") { () throws -> [UInt8] in
            let tools = FormatTools(), output = tools.path("png")
            try ExternalTools.run("vips", ["pngsave", try tools.png(ColourFixtures.photo(Self.size)), output, "--interlace"])
            return try tools.read(output)
        }
        try interlaced.withUnsafeBytes { raw in
            #expect(try PNGRowReader(raw).isInterlaced && PyramidPass.isInterlacedPNG(raw))
            let header = try ImageDecoder().readHeader(raw)
            let geometry = PyramidGeometry(size: header.size, tileSize: 64)
            #expect(
                try PyramidPass.feed(for: header, bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1 << 20)
                    == .wholeDecode)
            #expect(throws: ImageDecodingError.self) {
                try PyramidPass.feed(for: header, bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 100)
            }
        }
    }

    /// A PNG over the whole decode's pixel limit is read in rows into its pyramid: every tile
    /// within 40 dB of the full decode resized.
    @Test func aPyramidReadsAPNGInRowsPastTheWholeDecodesLimit() async throws {
        let photo = TilePyramidsTests.oddPhoto()
        let bytes = try ImageEncoder.encode(photo, as: .png)
        try bytes.withUnsafeBytes { raw in
            let header = try ImageDecoder().readHeader(raw)
            let geometry = PyramidGeometry(size: header.size, tileSize: 256)
            #expect(
                try PyramidPass.feed(for: header, bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1000)
                    == .pngRows)
        }
        let setup = try TilePyramidsTests.Setup(bytes, name: "photo.png", maxPixels: 1_000_000)
        let lowest = try await TilePyramidsTests.lowestPSNR(setup, key: "photo.png", reference: photo)
        #expect(lowest.box >= 40, "lowest tile PSNR \(lowest) dB")
    }

    /// `chunk` with `data` inserted after the IHDR of `png`.
    static func inserting(chunk type: String, data: [UInt8], into png: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in typed {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        crc ^= 0xFFFF_FFFF
        func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        let afterIHDR = 8 + 8 + 13 + 4
        return Array(png[..<afterIHDR]) + be(UInt32(data.count)) + typed + be(crc) + Array(png[afterIHDR...])
    }
}
