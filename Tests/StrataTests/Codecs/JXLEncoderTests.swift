import StrataTestSupport
import Testing
@testable import Strata

/// JPEG XL encoding (``JXLCodec``), read back by libjxl's own `djxl` and by Strata's decoder.
@Suite("JPEG XL encoder")
struct JXLEncoderTests {
    /// A photo at 1024×640, as the service would answer `?w=1024`.
    static func photo() throws -> PixelImage {
        try ImageRenderer().render(
            Fixtures.bytes("jpeg/path-2560x1600.jpg"), request: RenderRequest(box: PixelSize(width: 1024, height: 1024)))
    }

    @Test("the quality → distance mapping is libjxl's (cjxl -q)")
    func distanceMapping() {
        #expect(JXLCodec.distance(forQuality: 100) == 0)
        #expect(abs(JXLCodec.distance(forQuality: 90) - 1.0) < 1e-9)
        #expect(abs(JXLCodec.distance(forQuality: 80) - 1.9) < 1e-9)
        #expect(abs(JXLCodec.distance(forQuality: 30) - 6.4) < 1e-9)
        let q: Double = 29
        let below30: Double = 53.0 / 3000.0 * q * q - 23.0 / 20.0 * q + 25.0
        #expect(abs(JXLCodec.distance(forQuality: 29) - below30) < 1e-9)
        #expect(JXLCodec.distance(forQuality: 0) == JXLCodec.distance(forQuality: 1), "clamped to 1…100")
        // Continuous at 30 and decreasing with the quality.
        let at30: Double = 53.0 / 3000.0 * 900.0 - 23.0 / 20.0 * 30.0 + 25.0
        #expect(abs(at30 - 6.4) < 1e-9)
        for q in 1..<100 { #expect(JXLCodec.distance(forQuality: q) > JXLCodec.distance(forQuality: q + 1)) }
    }

    @Test("a photo at the default quality: djxl reads it back close; Strata's decoder reads the same pixels")
    func photoReadsBack() throws {
        let source = try Self.photo()
        let encoded = try ImageEncoder.encode(source, as: .jxl, quality: 80)
        #expect(ImageFormatDetector.detect(encoded) == .jxl)
        #expect(Array(encoded.prefix(2)) == [0xFF, 0x0A], "a bare codestream")
        let tools = FormatTools()
        let djxl = try tools.djxl(encoded)
        #expect(djxl.size == source.size)
        let psnr = ColourFixtures.psnr(djxl, source)
        #expect(psnr >= 32, "PSNR \(psnr) dB")
        #expect(encoded.count < source.width * source.height * 3 / 10, "\(encoded.count) bytes")
        let header = try ImageDecoder().readHeader(encoded)
        #expect(header.colour == .none, "tagged sRGB")
        #expect(!header.hasAlpha)
        #expect(PixelDiff.compare(try ImageDecoder().decode(encoded), djxl).max <= 1)
    }

    @Test("higher quality costs bytes and gains fidelity")
    func qualityOrders() throws {
        let source = try Self.photo()
        let tools = FormatTools()
        let low = try ImageEncoder.encode(source, as: .jxl, quality: 40)
        let high = try ImageEncoder.encode(source, as: .jxl, quality: 90)
        #expect(low.count < high.count)
        #expect(ColourFixtures.psnr(try tools.djxl(low), source) < ColourFixtures.psnr(try tools.djxl(high), source))
    }

    @Test("quality 100 is lossless: exact pixels, alpha included, and gray8 as one channel")
    func lossless() throws {
        let tools = FormatTools()
        let rgb = try decodeFixture("jpeg/cups-320x200-rgb-reference.jpg")
        let exact = try ImageEncoder.encode(rgb, as: .jxl, quality: 100)
        #expect(PixelDiff.compare(try tools.djxl(exact), rgb).max == 0)
        #expect(PixelDiff.compare(try ImageDecoder().decode(exact), rgb).max == 0)

        let alpha = try decodeFixture("webp/cups-640x400-alpha.webp")
        let withAlpha = try ImageEncoder.encode(alpha, as: .jxl, quality: 100)
        #expect(try ImageDecoder().readHeader(withAlpha).hasAlpha)
        #expect(PixelDiff.compare(try ImageDecoder().decode(withAlpha), alpha).max <= 1, "premultiplied rounding only")
        #expect(PixelDiff.compare(try tools.djxl(withAlpha), alpha).max <= 1)

        let gray = PixelConversion.convert(rgb, to: .gray8)
        let grayJXL = try ImageEncoder.encode(gray, as: .jxl, quality: 100)
        let header = try ImageDecoder().readHeader(grayJXL)
        #expect(header.isGrayscale && header.colour == .none)
        let back = try ImageDecoder().decode(grayJXL)
        #expect(back.pixelBytes(x: 7, y: 9)[0] == gray.pixelBytes(x: 7, y: 9)[0])
    }

    @Test("lossy with alpha: an alpha channel only when some pixel is not opaque")
    func lossyAlpha() throws {
        let alpha = try decodeFixture("webp/cups-640x400-alpha.webp")
        let encoded = try ImageEncoder.encode(alpha, as: .jxl, quality: 85)
        #expect(try ImageDecoder().readHeader(encoded).hasAlpha)
        let decoded = try ImageDecoder().decode(encoded)
        #expect(decoded.pixelBytes(x: 0, y: 0)[3] == 0)
        #expect(decoded.pixelBytes(x: 320, y: 200)[3] == 255)
        let opaque = try ImageEncoder.encode(try Self.photo(), as: .jxl, quality: 85)
        #expect(try !ImageDecoder().readHeader(opaque).hasAlpha)
    }

    @Test("a profile is embedded as the codestream's ICC profile and read back")
    func profileEmbedded() throws {
        let bytes = ColourFixtures.profile(.swappedMatrix)
        let profile = try ColourProfile(bytes: bytes)
        let source = try decodeFixture("jpeg/cups-320x200-rgb-reference.jpg")
        for quality in [100, 80] {
            let encoded = try ImageEncoder.encode(source, as: .jxl, quality: quality, profile: profile)
            let header = try ImageDecoder().readHeader(encoded)
            if quality == 100 {
                #expect(header.colour.profile?.bytes == bytes, "lossless: the original profile, byte for byte")
            } else {
                #expect(header.colour == .none, "lossy: libjxl renders to sRGB")
            }
        }
        #expect(throws: ImageEncodingError.self) { try ImageEncoder.embedding(profile, in: [0xFF, 0x0A], format: .jxl) }
    }

    @Test("larger than a level-5 codestream: a typed error before any work")
    func tooLarge() {
        #expect(throws: ImageEncodingError(.tooLarge(PixelSize(width: 300_000, height: 1), maximumSide: 262_144), format: .jxl)) {
            try JXLCodec.encode(
                straightBGRA: [], size: PixelSize(width: 300_000, height: 1), alpha: false, gray: false, quality: 80, profile: nil)
        }
    }
}
