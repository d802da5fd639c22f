import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// JPEG XL files made by `cjxl` (libjxl-tools) from the Fixtures at test time; references are
/// `djxl`'s decodes of the same files, and the sources themselves.
@Suite("JPEG XL decoding")
struct JXLDecodingTests {
    static let photo = "jpeg/cups-320x200-rgb-reference.jpg"

    /// The photo fixture as a PNG file cjxl reads (cjxl 0.7 takes a JPEG as a lossless recompression).
    static func photoPNG(_ tools: FormatTools) throws -> String {
        try tools.png(decodeFixture(photo))
    }

    @Test("detection: the codestream's FF 0A and the container's signature box, nothing shorter")
    func detection() {
        #expect(ImageFormatDetector.detect([0xFF, 0x0A]) == .jxl)
        #expect(ImageFormatDetector.detect([0xFF]) == nil)
        #expect(ImageFormatDetector.detect([0xFF, 0xD8, 0xFF]) == .jpeg)
        let box: [UInt8] = [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]
        #expect(ImageFormatDetector.detect(box) == .jxl)
        #expect(ImageFormatDetector.detect(Array(box.prefix(11))) == nil)
        #expect(ImageFormatDetector.detect([0, 0, 0, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A]) == .jp2)
    }

    @Test("lossy (XYB): the pixels are djxl's and close to the source; a bare codestream")
    func lossy() throws {
        let tools = FormatTools()
        let jxl = try tools.cjxl(Self.photoPNG(tools), ["-d", "1"])
        #expect(Array(jxl.prefix(2)) == [0xFF, 0x0A])
        let header = try ImageDecoder().readHeader(jxl)
        #expect(header.format == .jxl)
        #expect(header.size == PixelSize(width: 320, height: 200))
        #expect(!header.hasAlpha && !header.isAnimated && !header.isGrayscale && header.orientation == 1)
        #expect(header.colour == .none, "sRGB needs no conversion")
        let image = try ImageDecoder().decode(jxl)
        #expect(image.size == header.size)
        #expect(psnr(image, try tools.djxl(jxl)) >= 40)
        #expect(psnr(image, try decodeFixture(Self.photo)) >= 34)
        #expect(image.pixelBytes(x: 100, y: 100)[3] == 255)
    }

    @Test("lossless: the source's exact pixels, also in the ISOBMFF container")
    func lossless() throws {
        let tools = FormatTools()
        let source = try decodeFixture(Self.photo)
        for arguments in [["-d", "0"], ["-d", "0", "--container=1"]] {
            let jxl = try tools.cjxl(tools.png(source), arguments)
            #expect(ImageFormatDetector.detect(jxl) == .jxl)
            let image = try ImageDecoder().decode(jxl)
            #expect(PixelDiff.compare(image, source).max == 0, "\(arguments)")
        }
        let boxed = try tools.cjxl(tools.png(source), ["-d", "0", "--container=1"])
        #expect(Array(boxed.prefix(12)) == [0, 0, 0, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A])
    }

    @Test("alpha is premultiplied: transparent corners, an opaque centre, djxl's values")
    func alpha() throws {
        let tools = FormatTools()
        let source = try decodeFixture("webp/cups-640x400-alpha.webp")
        let jxl = try tools.cjxl(tools.png(source), ["-d", "0"])
        let header = try ImageDecoder().readHeader(jxl)
        #expect(header.hasAlpha)
        let image = try ImageDecoder().decode(jxl)
        #expect(image.pixelBytes(x: 0, y: 0) == [0, 0, 0, 0])
        #expect(image.pixelBytes(x: 320, y: 200)[3] == 255)
        #expect(PixelDiff.channelsAboveAlpha(image) == 0, "premultiplied: no channel above alpha")
        #expect(PixelDiff.compare(image, source).max <= 1, "lossless: the source's pixels, premultiplied alike")
        #expect(PixelDiff.compare(image, try tools.djxl(jxl)).max <= 1)
    }

    @Test("16-bit and gray files are reduced to 8-bit BGRA")
    func sixteenBitAndGray() throws {
        let tools = FormatTools()
        let png = try Self.photoPNG(tools)
        let sixteen = tools.path("png")
        try ExternalTools.run("vips", ["colourspace", png, sixteen, "rgb16"])
        let deep = try tools.cjxl(sixteen, ["-d", "0"])
        let image = try ImageDecoder().decode(deep)
        #expect(PixelDiff.compare(image, try decodeFixture(Self.photo)).max <= 1)

        let gray = tools.path("png")
        try ExternalTools.run("vips", ["colourspace", png, gray, "grey16"])
        let grayJXL = try tools.cjxl(gray, ["-d", "0"])
        let header = try ImageDecoder().readHeader(grayJXL)
        #expect(header.isGrayscale)
        #expect(header.colour == .none, "sRGB gray")
        let grayImage = try ImageDecoder().decode(grayJXL)
        // vips's own 8-bit gray of the photo (djxl writes this file as a 16-bit PNG whatever
        // --bits_per_sample says, tagged with a gray profile).
        let gray8 = tools.path("png")
        try ExternalTools.run("vips", ["colourspace", png, gray8, "b-w"])
        #expect(PixelDiff.compare(grayImage, try ImageDecoder().decode(tools.read(gray8))).max <= 1)
        let p = grayImage.pixelBytes(x: 50, y: 50)
        #expect(p[0] == p[1] && p[1] == p[2] && p[3] == 255)
    }

    @Test("the codestream's orientation is applied: each of the eight gives the upright reference", arguments: 1...8)
    func orientation(_ n: Int) throws {
        let stored = try storedPixels("jpeg/orientation-\(n).jpg")
        let (pixels, _) = PixelOps.straightBGRA(stored)
        let jxl = try JXLCodec.encode(
            straightBGRA: pixels, size: stored.size, alpha: false, gray: false, quality: 100, effort: 1, profile: nil, orientation: n)
        let header = try ImageDecoder().readHeader(jxl)
        #expect(header.orientation == n)
        #expect(header.codedSize == stored.size)
        #expect(header.size == PixelSize(width: 160, height: 96))
        let image = try ImageDecoder().decode(jxl)
        let upright = try storedPixels("jpeg/orientation-reference-160x96.jpg")
        #expect(psnr(image, upright) >= 30, "orientation \(n)")
        let djxl = try FormatTools().djxl(jxl)
        #expect(PixelDiff.compare(image, djxl).max == 0, "djxl orients the same way")
    }

    @Test("a 4-megapixel decode (on libjxl's thread runner when a core is idle) gives djxl's pixels")
    func largeDecode() throws {
        let tools = FormatTools()
        let jxl = try tools.cjxl(tools.png(decodeFixture("jpeg/path-2560x1600.jpg")), ["-d", "2"])
        let header = try ImageDecoder().readHeader(jxl)
        #expect(header.size.pixelCount >= 4_000_000)
        var image = PixelImage(width: header.size.width, height: header.size.height)
        let stride = image.bytesPerRow
        let threads = try jxl.withUnsafeBytes { raw in
            try image.withUnsafeMutableBytes { out in
                try JXLCodec.decode(raw, size: header.codedSize, maxPixels: 5_000_000, into: out.baseAddress!, stride: stride)
            }
        }
        #expect(threads == 1 || threads == 2)
        #expect(PixelDiff.compare(image, try tools.djxl(jxl)).max <= 1)
    }

    @Test("more pixels than the limit: refused from the header, before any decode")
    func limits() throws {
        let tools = FormatTools()
        let jxl = try tools.cjxl(Self.photoPNG(tools), ["-d", "2"])
        let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: 320 * 200 - 1))
        #expect(throws: ImageDecodingError(.tooLarge(pixels: 64_000, limit: 63_999), format: .jxl)) {
            try decoder.readHeader(jxl)
        }
        #expect(throws: ImageDecodingError(.tooLarge(pixels: 64_000, limit: 63_999), format: .jxl)) {
            try decoder.decode(jxl)
        }
        // The codec's own check, for a caller that passes a header read under a larger limit.
        var image = PixelImage(width: 320, height: 200)
        #expect(throws: ImageDecodingError(.tooLarge(pixels: 64_000, limit: 1000), format: .jxl)) {
            try jxl.withUnsafeBytes { raw in
                try image.withUnsafeMutableBytes { out in
                    _ = try JXLCodec.decode(
                        raw, size: PixelSize(width: 320, height: 200), maxPixels: 1000, into: out.baseAddress!, stride: 1280)
                }
            }
        }
    }

    @Test("a truncated file is `truncated`, a damaged one `corrupt`, never pixels")
    func brokenFiles() throws {
        let tools = FormatTools()
        let jxl = try tools.cjxl(Self.photoPNG(tools), ["-d", "1"])
        for cut in [2, 10, jxl.count / 2, jxl.count - 1] {
            #expect(throws: ImageDecodingError(.truncated, format: .jxl), "cut at \(cut)") {
                try ImageDecoder().decode(Array(jxl.prefix(cut)))
            }
        }
        var damaged = jxl
        for i in stride(from: 2, to: 40, by: 1) { damaged[i] = 0xFF }
        #expect {
            try ImageDecoder().decode(damaged)
        } throws: { error in
            guard let error = error as? ImageDecodingError, error.format == .jxl else { return false }
            if case .corrupt = error.reason { return true }
            return error.reason == .truncated
        }
    }

    @Test("the seed corpus decodes (lossy, lossless, alpha, 16-bit gray container, ICC)")
    func corpus() throws {
        for name in ["lossy-64x40", "lossless-64x40", "alpha-64x40", "gray16-64x40-container", "a98-icc-64x40"] {
            let url = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus/FuzzJXL/\(name).jxl")
            let bytes = try [UInt8](Data(contentsOf: url))
            let image = try ImageRenderer().render(bytes, request: RenderRequest(box: PixelSize(width: 64, height: 64)))
            #expect(image.size == PixelSize(width: 64, height: 40), "\(name)")
        }
    }
}
