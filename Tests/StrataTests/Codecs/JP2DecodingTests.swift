import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// JPEG 2000: the fixtures (a tiled JP2 of six levels, a gray J2K codestream, sYCC 4:2:0) and
/// files made at test time by OpenJPEG's `opj_compress` from ``TIFFWriter`` images (lossless:
/// the written pixels come back exactly), against `opj_decompress`'s own decodes.
@Suite("JPEG 2000 decoding")
struct JP2DecodingTests {
    static let tiled = "jp2/eveningglow-1024x640-tiled.jp2"
    static let gray = "jp2/kite-800x500-gray.j2k"
    static let ycc = "jp2/cups-320x200-ycc420.jp2"
    static let size = PixelSize(width: 203, height: 131)

    /// `opj_compress arguments` of `image` (written as a TIFF of `channels`).
    static func compress(_ tiff: [UInt8], _ arguments: [String], suffix: String = "jp2", tools: FormatTools) throws -> [UInt8] {
        let output = tools.path(suffix)
        try ExternalTools.run("opj_compress", ["-i", tools.write(tiff, suffix: "tif"), "-o", output] + arguments)
        return try tools.read(output)
    }

    /// `opj_decompress`'s decode of `bytes` (`reduce` levels down), read back as PNG.
    static func reference(_ bytes: [UInt8], suffix: String = "jp2", reduce: Int = 0, tools: FormatTools) throws -> PixelImage {
        let output = tools.path("png")
        try ExternalTools.run("opj_decompress", ["-i", tools.write(bytes, suffix: suffix), "-o", output, "-r", "\(reduce)"])
        return try ImageDecoder().decode(tools.read(output))
    }

    @Test("both signatures are JPEG 2000; the header lists the resolution levels, smallest first")
    func header() throws {
        let tiled = try ImageDecoder().readHeader(Fixtures.bytes(Self.tiled))
        #expect(tiled.format == .jp2 && tiled.size == PixelSize(width: 1024, height: 640) && !tiled.hasAlpha && !tiled.isGrayscale)
        #expect(
            tiled.levels == [
                PixelSize(width: 32, height: 20), PixelSize(width: 64, height: 40), PixelSize(width: 128, height: 80),
                PixelSize(width: 256, height: 160), PixelSize(width: 512, height: 320),
            ])
        let gray = try ImageDecoder().readHeader(Fixtures.bytes(Self.gray))
        #expect(gray.format == .jp2 && gray.isGrayscale && gray.size == PixelSize(width: 800, height: 500) && gray.levels.count == 4)
        #expect(ImageFormatDetector.detect(Fixtures.bytes(Self.gray)) == .jp2)
        #expect(ImageFormatDetector.detect(Array(Fixtures.bytes(Self.tiled).prefix(12))) == .jp2)
    }

    @Test(
        "each fixture decodes as opj_decompress decodes it, at full size and at every level",
        arguments: [tiled, gray, ycc])
    func fixturesAgainstOpenJPEGsTool(_ fixture: String) throws {
        let bytes = Fixtures.bytes(fixture), tools = FormatTools(), decoder = ImageDecoder()
        let suffix = fixture.hasSuffix(".j2k") ? "j2k" : "jp2"
        let header = try decoder.readHeader(bytes)
        for (reduce, size) in ([header.size] + header.levels.reversed()).enumerated() {
            var image = PixelImage(uninitializedWidth: size.width, height: size.height, style: .bgra32Premultiplied)
            try decoder.decode(bytes, minimumSize: size, into: &image)
            let reference = try Self.reference(bytes, suffix: suffix, reduce: reduce, tools: tools)
            #expect(reference.size == size, "\(fixture) at reduce \(reduce)")
            // The sYCC conversion is ours (BT.601, as opj_decompress's): rounding apart.
            let bound = header.isGrayscale || fixture != Self.ycc ? 50.0 : 40.0
            #expect(psnr(image, reference) >= bound, "\(fixture) at reduce \(reduce): \(psnr(image, reference)) dB")
        }
    }

    @Test("shrink-on-load decodes the smallest level that covers the size asked")
    func shrinkOnLoad() throws {
        let bytes = Fixtures.bytes(Self.tiled), decoder = ImageDecoder()
        let header = try decoder.readHeader(bytes)
        #expect(decoder.decodedSize(for: header, minimumSize: PixelSize(width: 200, height: 125)) == PixelSize(width: 256, height: 160))
        #expect(decoder.decodedSize(for: header, minimumSize: PixelSize(width: 600, height: 10)) == header.size)
        let image = try decoder.decode(bytes, minimumSize: PixelSize(width: 100, height: 60))
        #expect(image.size == PixelSize(width: 128, height: 80))
        // Through the renderer: a 256-px answer from the 512 level, close to the JPEG original's.
        let renderer = ImageRenderer()
        let fromJP2 = try renderer.render(bytes, request: RenderRequest(box: PixelSize(width: 256, height: 256)))
        let fromJPEG = try renderer.render(
            Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg"), request: RenderRequest(box: PixelSize(width: 256, height: 256)))
        #expect(fromJP2.size == PixelSize(width: 256, height: 160) && fromJPEG.size == fromJP2.size)
        #expect(psnr(fromJP2, fromJPEG) >= 30, "\(psnr(fromJP2, fromJPEG)) dB")
    }

    @Test("a decode of 4 megapixels or more runs on two of OpenJPEG's threads, a smaller one on one")
    func threads() throws {
        let tools = FormatTools()
        let big = ColourFixtures.photo(PixelSize(width: 2400, height: 1700))
        let bytes = try Self.compress(TIFFWriter.tiff(big, .rgb), ["-r", "10", "-t", "512,512"], tools: tools)
        func decoded(_ size: PixelSize) throws -> (PixelImage, Int) {
            var image = PixelImage(uninitializedWidth: size.width, height: size.height, style: .bgra32Premultiplied)
            let stride = image.bytesPerRow
            let threads = try image.withUnsafeMutableBytes { raw in
                try bytes.withUnsafeBytes { encoded in
                    try JP2Codec.decode(encoded, size: size, into: raw.baseAddress!, stride: stride)
                }
            }
            return (image, threads)
        }
        let (whole, wholeThreads) = try decoded(big.size)
        #expect(wholeThreads == 2)
        let (half, halfThreads) = try decoded(PixelSize(width: 1200, height: 850))
        #expect(halfThreads == 1)
        #expect(psnr(whole, big) >= 35 && half.size == PixelSize(width: 1200, height: 850))
        // On two threads, what OpenJPEG's own tool decodes.
        #expect(psnr(whole, try Self.reference(bytes, tools: tools)) >= 50)
    }

    @Test("lossless RGB, gray, alpha and 16-bit files decode to the written pixels")
    func losslessChannels() throws {
        let tools = FormatTools()
        let photo = ColourFixtures.photo(Self.size)
        let rgb = try Self.compress(TIFFWriter.tiff(photo, .rgb), ["-n", "4"], tools: tools)
        #expect(PixelDiff.compare(try ImageDecoder().decode(rgb), photo).max == 0)
        let grayPhoto = ColourFixtures.photo(Self.size, gray: true)
        let gray = try Self.compress(TIFFWriter.tiff(grayPhoto, .gray), [], suffix: "j2k", tools: tools)
        let grayHeader = try ImageDecoder().readHeader(gray)
        #expect(grayHeader.isGrayscale)
        #expect(PixelDiff.compare(try ImageDecoder().decode(gray), grayPhoto).max == 0)

        // Alpha: a translucent gradient, premultiplied on decode as the written image is.
        var translucent = PixelImage(width: Self.size.width, height: Self.size.height, style: .bgra32Premultiplied)
        let stride = translucent.bytesPerRow
        translucent.withUnsafeMutableBytes { raw in
            for y in 0..<Self.size.height {
                for x in 0..<Self.size.width {
                    let p = photo.pixelBytes(x: x, y: y)
                    let a = (x * 255) / (Self.size.width - 1)
                    for c in 0..<3 { raw[y * stride + x * 4 + c] = UInt8((Int(p[c]) * a + 127) / 255) }
                    raw[y * stride + x * 4 + 3] = UInt8(a)
                }
            }
        }
        let rgba = try Self.compress(TIFFWriter.tiff(translucent, .rgba), [], tools: tools)
        let rgbaHeader = try ImageDecoder().readHeader(rgba)
        #expect(rgbaHeader.hasAlpha)
        // Straight alpha written, premultiplied read: within one step of rounding.
        #expect(PixelDiff.compare(try ImageDecoder().decode(rgba), translucent).max <= 1)

        // 16 bits a sample (vips writes each 8-bit value times 257): rounded back to it.
        let source = tools.write(TIFFWriter.tiff(photo, .rgb), suffix: "tif")
        let wide = tools.path("v")
        try ExternalTools.run("vips", ["linear", source, wide, "257", "0"])
        let sixteen = tools.path("tif")
        try ExternalTools.run("vips", ["cast", wide, sixteen, "ushort"])
        let deep = try Self.compress(tools.read(sixteen), [], tools: tools)
        #expect(PixelDiff.compare(try ImageDecoder().decode(deep), photo).max == 0)
    }

    @Test("an ICC profile in the colr box is read and converted like any other format's")
    func iccProfile() throws {
        let tools = FormatTools()
        let photo = ColourFixtures.photo(Self.size)
        let profile = ColourFixtures.profile(.swappedMatrix)
        let plain = try Self.compress(TIFFWriter.tiff(photo, .rgb), [], tools: tools)
        let tagged = try JP2Boxes.withICC(plain, profile: profile)
        let header = try ImageDecoder().readHeader(tagged)
        #expect(header.colour.profile?.bytes == profile, "\(header.colour)")
        // The renderer converts it to sRGB as Little CMS does.
        let rendered = try ImageRenderer().render(tagged, request: RenderRequest(box: Self.size))
        let expected = ColourFixtures.convertedToSRGB(photo, from: profile)
        #expect(psnr(rendered, expected) >= 40, "\(psnr(rendered, expected)) dB")
        #expect(psnr(rendered, photo) < 30, "the profile changes the colours")
    }

    @Test("truncated or corrupt files are errors, never a partial image; the pixel limit holds before decoding")
    func badInput() throws {
        let bytes = Fixtures.bytes(Self.tiled)
        let decoder = ImageDecoder()
        for cut in [100, bytes.count / 2, bytes.count - 10] {
            #expect(throws: ImageDecodingError.self, "cut at \(cut)") { try decoder.decode(Array(bytes.prefix(cut))) }
        }
        // Nine components (OpenJPEG's raw input takes any count): refused from the header.
        let tools = FormatTools()
        let raw = tools.write((0..<(16 * 16 * 9)).map { UInt8($0 % 251) }, suffix: "raw")
        let nine = tools.path("j2k")
        try ExternalTools.run("opj_compress", ["-i", raw, "-o", nine, "-F", "16,16,9,8,u", "-n", "2"])
        let many = #expect(throws: ImageDecodingError.self) { try decoder.readHeader(tools.read(nine)) }
        #expect("\(String(describing: many))".contains("9 components"), "\(String(describing: many))")
        var flipped = bytes
        for i in stride(from: 400, to: flipped.count, by: 97) { flipped[i] ^= 0x5A }
        #expect(throws: ImageDecodingError.self) { try decoder.decode(flipped) }
        let limited = ImageDecoder(limits: DecodingLimits(maxPixels: 500_000))
        let error = #expect(throws: ImageDecodingError.self) { try limited.readHeader(bytes) }
        #expect(error?.reason == .tooLarge(pixels: 1024 * 640, limit: 500_000))
        #expect(error?.format == .jp2)
        // The memory budget counts OpenJPEG's planes: three 32-bit planes at the decoded size.
        let header = try decoder.readHeader(bytes)
        let working = bytes.withUnsafeBytes {
            ImageDecoder.workingBytes(for: header, decodedSize: PixelSize(width: 256, height: 160), bytes: $0)
        }
        #expect(working >= 3 * 4 * 256 * 160)
    }
}
