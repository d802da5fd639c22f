import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// TIFF files written by ``TIFFWriter`` (uncompressed) and rewritten by Debian's `tiffcp` and
/// `tiffset` (libtiff-tools) at test time: every storage decodes to the written pixels.
@Suite("TIFF decoding")
struct TIFFDecodingTests {
    static let size = PixelSize(width: 203, height: 131)

    /// An opaque photo-like image whose sides are not multiples of a tile or a strip.
    static func photo(gray: Bool = false) -> PixelImage { ColourFixtures.photo(size, gray: gray) }

    /// `tiffcp arguments` over `tiff`.
    static func tiffcp(_ tiff: [UInt8], _ arguments: [String], tools: FormatTools) throws -> [UInt8] {
        let output = tools.path("tif")
        try ExternalTools.run("tiffcp", arguments + [tools.write(tiff, suffix: "tif"), output])
        return try tools.read(output)
    }

    static let lossless: [(String, [String])] = [
        ("uncompressed", ["-c", "none"]),
        ("LZW strips of 7 rows", ["-c", "lzw", "-r", "7"]),
        ("deflate 64×64 tiles", ["-c", "zip", "-t", "-w", "64", "-l", "64"]),
        ("PackBits", ["-c", "packbits"]),
        ("BigTIFF, LZW", ["-8", "-c", "lzw"]),
        ("big-endian, deflate tiles", ["-B", "-c", "zip", "-t", "-w", "32", "-l", "48"]),
        ("planes stored separately", ["-p", "separate", "-c", "lzw"]),
    ]

    @Test("lossless storages decode to the written pixels exactly", arguments: lossless.map(\.0))
    func losslessStorages(_ name: String) throws {
        let arguments = try #require(Self.lossless.first { $0.0 == name }?.1)
        let tools = FormatTools()
        let photo = Self.photo()
        let bytes = try Self.tiffcp(TIFFWriter.tiff(photo, .rgb), arguments, tools: tools)
        let header = try ImageDecoder().readHeader(bytes)
        #expect(header.format == .tiff && header.size == Self.size && !header.hasAlpha && !header.isGrayscale)
        let decoded = try ImageDecoder().decode(bytes)
        #expect(PixelDiff.compare(decoded, photo).max == 0, "\(name)")
    }

    @Test("JPEG-compressed tiles: RGB within 40 dB of the written pixels; YCbCr 4:2:0 converted (not 10 dB off)")
    func jpegTiles() throws {
        let photo = Self.photo(), tools = FormatTools()
        let tiff = TIFFWriter.tiff(photo, .rgb)
        let rgb = try Self.tiffcp(tiff, ["-c", "jpeg:r:95", "-t", "-w", "64", "-l", "64"], tools: tools)
        let decoded = try ImageDecoder().decode(rgb)
        #expect(decoded.size == Self.size)
        #expect(psnr(decoded, photo) >= 40)
        // YCbCr with its chroma halved both ways: the synthetic photo's fine colour detail is
        // what 4:2:0 drops (about 37 dB measured); a wrong conversion would be far off.
        let ycbcr = try Self.tiffcp(tiff, ["-c", "jpeg:95", "-t", "-w", "64", "-l", "64"], tools: tools)
        #expect(psnr(try ImageDecoder().decode(ycbcr), photo) >= 33)
    }

    @Test("gray: flagged, and every channel the gray value")
    func gray() throws {
        let photo = Self.photo(gray: true)
        let bytes = try Self.tiffcp(TIFFWriter.tiff(photo, .gray), ["-c", "lzw"], tools: FormatTools())
        let header = try ImageDecoder().readHeader(bytes)
        #expect(header.isGrayscale && !header.hasAlpha)
        #expect(PixelDiff.compare(try ImageDecoder().decode(bytes), photo).max == 0)
    }

    @Test("unassociated alpha comes out premultiplied")
    func alpha() throws {
        // Alpha falls from 255 to 0 across the image.
        var image = Self.photo()
        let stride = image.bytesPerRow, width = image.width, height = image.height
        image.withUnsafeMutableBytes { raw in
            for y in 0..<height {
                for x in 0..<width {
                    let p = y * stride + 4 * x
                    let a = 255 - 255 * x / (width - 1)
                    for c in 0..<3 { raw[p + c] = UInt8((Int(raw[p + c]) * a + 127) / 255) }
                    raw[p + 3] = UInt8(a)
                }
            }
        }
        let bytes = try Self.tiffcp(TIFFWriter.tiff(image, .rgba), ["-c", "zip"], tools: FormatTools())
        #expect(try ImageDecoder().readHeader(bytes).hasAlpha)
        let decoded = try ImageDecoder().decode(bytes)
        // Straight values written from premultiplied ones and premultiplied again: within 1.
        let diff = PixelDiff.compare(decoded, image)
        #expect(diff.max <= 1, "\(diff)")
        #expect(decoded.pixelBytes(x: image.width - 1, y: 3)[3] == 0)
    }

    @Test("the Orientation tag is applied as EXIF's", arguments: [2, 3, 6, 8])
    func orientation(_ orientation: Int) throws {
        let upright = Self.photo()
        // The stored pixels: the upright image with the inverse of the orientation applied.
        let stored: PixelImage
        switch orientation {
        case 2: stored = upright.mirrored()
        case 3: stored = upright.rotated(clockwiseQuarterTurns: 2)
        case 6: stored = upright.rotated(clockwiseQuarterTurns: 3)
        default: stored = upright.rotated(clockwiseQuarterTurns: 1)
        }
        let bytes = try Self.tiffcp(TIFFWriter.tiff(stored, .rgb, orientation: orientation), ["-c", "lzw"], tools: FormatTools())
        let header = try ImageDecoder().readHeader(bytes)
        #expect(header.orientation == orientation && header.size == Self.size)
        #expect(PixelDiff.compare(try ImageDecoder().decode(bytes), upright).max == 0)
    }

    @Test("a multi-page file decodes its first page")
    func firstPage() throws {
        let tools = FormatTools()
        let first = Self.photo(), second = Self.photo().rotated(clockwiseQuarterTurns: 2)
        let pages = tools.path("tif")
        let files = [first, second].map { tools.write(TIFFWriter.tiff($0, .rgb), suffix: "tif") }
        try ExternalTools.run("tiffcp", files + [pages])
        #expect(PixelDiff.compare(try ImageDecoder().decode(tools.read(pages)), first).max == 0)
    }

    @Test("a TIFF original renders through the engine's renderer, shrunk to the box")
    func renders() throws {
        let bytes = try Self.tiffcp(TIFFWriter.tiff(Self.photo(), .rgb), ["-c", "lzw"], tools: FormatTools())
        let image = try ImageRenderer().render(bytes, request: RenderRequest(box: PixelSize(width: 100, height: 100)))
        #expect(image.size == PixelSize(width: 100, height: 65))
    }

    @Test("broken files are typed errors, never a crash or partial pixels")
    func broken() throws {
        let tools = FormatTools()
        // The writer puts the IFD first (tiffcp puts it after the strips): cut in the strips,
        // the header reads and the decode fails.
        let whole = TIFFWriter.tiff(Self.photo(), .rgb)
        let cut = Array(whole.prefix(whole.count / 2))
        #expect(try ImageDecoder().readHeader(cut).size == Self.size)
        #expect(decodingError { _ = try ImageDecoder().decode(cut) }?.format == .tiff)
        // Cut in the header, and garbage after a valid signature.
        for bytes in [Array(whole.prefix(12)), [0x49, 0x49, 42, 0, 8, 0, 0, 0] + Array(repeating: 0xAB, count: 64)] {
            let error = decodingError { _ = try ImageDecoder().decode(bytes) }
            #expect(error?.format == .tiff, "\(String(describing: error))")
        }
        // 32-bit float samples: libtiff's RGBA reader does not convert them.
        let float = try Self.tiffcp(TIFFWriter.tiff(Self.photo(), .rgb), ["-c", "none"], tools: tools)
        var floats = float
        Self.setShort(in: &floats, tag: 258, to: 32, count: 3)  // BitsPerSample
        let unsupported = decodingError { _ = try ImageDecoder().readHeader(floats) }
        #expect(unsupported?.format == .tiff, "\(String(describing: unsupported))")
    }

    @Test("a header claiming more pixels than the limit is refused before any decode")
    func bomb() throws {
        var bytes = TIFFWriter.tiff(PixelImage(width: 16, height: 16), .rgb)
        Self.setLong(in: &bytes, tag: 256, to: 65_000)
        Self.setLong(in: &bytes, tag: 257, to: 65_000)
        let error = decodingError { _ = try ImageDecoder().readHeader(bytes) }
        #expect(error?.reason == .tooLarge(pixels: 65_000 * 65_000, limit: DecodingLimits().maxPixels), "\(String(describing: error))")
    }

    @Test("both byte orders and BigTIFF are recognised by their signature")
    func detection() {
        #expect(ImageFormatDetector.detect([0x49, 0x49, 42, 0]) == .tiff)
        #expect(ImageFormatDetector.detect([0x4D, 0x4D, 0, 42]) == .tiff)
        #expect(ImageFormatDetector.detect([0x49, 0x49, 43, 0]) == .tiff)
        #expect(ImageFormatDetector.detect([0x4D, 0x4D, 0, 43]) == .tiff)
        #expect(ImageFormatDetector.detect([0x49, 0x49, 44, 0]) == nil)
        #expect(ImageFormatDetector.detect([0x49, 0x4D, 42, 0]) == nil)
    }

    // MARK: Editing the writer's little-endian IFD

    /// The offset of the first IFD entry of `tag` in a little-endian classic TIFF.
    static func entry(_ tag: UInt16, in bytes: [UInt8]) -> Int? {
        let ifd = Int(bytes[4]) | Int(bytes[5]) << 8 | Int(bytes[6]) << 16 | Int(bytes[7]) << 24
        let count = Int(bytes[ifd]) | Int(bytes[ifd + 1]) << 8
        return (0..<count).map { ifd + 2 + 12 * $0 }.first { UInt16(bytes[$0]) | UInt16(bytes[$0 + 1]) << 8 == tag }
    }

    static func setLong(in bytes: inout [UInt8], tag: UInt16, to value: Int) {
        guard let at = entry(tag, in: bytes) else { return }
        for i in 0..<4 { bytes[at + 8 + i] = UInt8(value >> (8 * i) & 0xFF) }
    }

    /// Sets every value of a SHORT array entry stored out of line (`count` > 2).
    static func setShort(in bytes: inout [UInt8], tag: UInt16, to value: Int, count: Int) {
        guard let at = entry(tag, in: bytes) else { return }
        let offset = Int(bytes[at + 8]) | Int(bytes[at + 9]) << 8 | Int(bytes[at + 10]) << 16 | Int(bytes[at + 11]) << 24
        for i in 0..<count {
            bytes[offset + 2 * i] = UInt8(value & 0xFF)
            bytes[offset + 2 * i + 1] = UInt8(value >> 8)
        }
    }
}
