import Foundation
import StrataTestSupport
import Testing
@testable import Strata

/// AVIF encoding (``AVIFCodec``), checked through Debian's `avifdec` (``AVIFReference``): the
/// pixels it reads back, and what `avifdec --info` says of the file.
@Suite("AVIF encoder")
struct AVIFEncoderTests {
    /// Peak signal-to-noise ratio over the B, G, R bytes of two premultiplied BGRA images, dB.
    static func psnr(_ a: PixelImage, _ b: PixelImage) -> Double {
        var squared = 0.0
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                for y in 0..<a.height {
                    for x in 0..<a.width {
                        for c in 0..<3 {
                            let d = Double(pa[y * a.bytesPerRow + 4 * x + c]) - Double(pb[y * b.bytesPerRow + 4 * x + c])
                            squared += d * d
                        }
                    }
                }
            }
        }
        let mse = squared / Double(a.width * a.height * 3)
        return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
    }

    /// A photo at 1024×640, as the service would answer `?w=1024`.
    static func photo() throws -> PixelImage {
        try ImageRenderer().render(
            Fixtures.bytes("jpeg/path-2560x1600.jpg"), request: RenderRequest(box: PixelSize(width: 1024, height: 1024)))
    }

    @Test func aPhotoAtTheDefaultsReadsBackClose() throws {
        let source = try Self.photo()
        let encoded = try ImageEncoder.encode(source, as: .avif, quality: AVIFCodec.defaultQuality)
        #expect(ImageFormatDetector.detect(encoded) == .avif)
        let decoded = try AVIFReference.decode(encoded)
        #expect(decoded.size == source.size)
        let psnr = Self.psnr(decoded, source)
        #expect(psnr >= 32, "PSNR \(psnr) dB")
        #expect(PixelDiff.meanDifference(decoded, source) < 4)
        // A tenth of the raw pixels at most (the figures compare it with JPEG).
        #expect(encoded.count < source.width * source.height * 3 / 10, "\(encoded.count) bytes")
        let info = try AVIFReference.info(encoded)
        #expect(info["Format"] == "YUV420")
        #expect(info["Bit Depth"] == "8")
        #expect(info["Range"] == "Full")
        #expect(info["Alpha"] == "Absent")
        #expect(info["Color Primaries"] == "1" && info["Transfer Char."] == "13" && info["Matrix Coeffs."] == "6")
        #expect(info["ICC Profile"] == "Absent")
    }

    @Test func higherQualityCostsBytesAndGainsFidelity() throws {
        let source = try Self.photo()
        let low = try ImageEncoder.encode(source, as: .avif, quality: 30)
        let high = try ImageEncoder.encode(source, as: .avif, quality: 85)
        #expect(low.count < high.count)
        #expect(try Self.psnr(AVIFReference.decode(low), source) < Self.psnr(AVIFReference.decode(high), source))
        // From quality 90 chroma is kept whole, as for JPEG.
        #expect(try AVIFReference.info(ImageEncoder.encode(source, as: .avif, quality: 90))["Format"] == "YUV444")
    }

    @Test func qualityMapsToOneQuantizer() {
        #expect(AVIFCodec.quantizer(forQuality: 100) == 0)
        #expect(AVIFCodec.quantizer(forQuality: 1) == 62)
        #expect(AVIFCodec.quantizer(forQuality: 60) == 25)
        #expect(AVIFCodec.quantizer(forQuality: 0) == 62)
        #expect(AVIFCodec.quantizer(forQuality: 500) == 0)
        #expect((1...99).allSatisfy { AVIFCodec.quantizer(forQuality: $0) >= AVIFCodec.quantizer(forQuality: $0 + 1) })
    }

    @Test func alphaIsWrittenOnlyWhenSomePixelIsTranslucent() throws {
        let translucent = try decodeFixture("webp/cups-640x400-alpha.webp")
        let encoded = try ImageEncoder.encode(translucent, as: .avif, quality: AVIFCodec.defaultQuality)
        #expect(try AVIFReference.info(encoded)["Alpha"] == "Not premultiplied")
        let decoded = try AVIFReference.decode(encoded)
        // The alpha plane is coded finer than the colour: its bytes stay close.
        var alphaError = 0, transparent = 0
        decoded.withUnsafeBytes { d in
            translucent.withUnsafeBytes { s in
                for y in 0..<decoded.height {
                    for x in 0..<decoded.width {
                        let a = Int(s[y * translucent.bytesPerRow + 4 * x + 3])
                        alphaError = max(alphaError, abs(Int(d[y * decoded.bytesPerRow + 4 * x + 3]) - a))
                        if a == 0 { transparent += 1 }
                    }
                }
            }
        }
        #expect(transparent > 0)
        #expect(alphaError <= 24, "largest alpha error \(alphaError)")
        #expect(PixelDiff.meanDifference(decoded, translucent) < 3)
        let opaque = PixelConversion.convert(translucent, to: .bgrx32)
        #expect(try AVIFReference.info(ImageEncoder.encode(opaque, as: .avif))["Alpha"] == "Absent")
    }

    @Test func aGivenProfileIsEmbeddedByteForByte() throws {
        let source = try decodeFixture("jpeg/cups-320x200-rgb-reference.jpg")
        let profile = ColourProfile.displayP3
        let encoded = try ImageEncoder.encode(source, as: .avif, profile: profile)
        let info = try AVIFReference.info(encoded)
        #expect(info["ICC Profile"] == "Present (\(profile.bytes.count) bytes)")
        #expect(info["Color Primaries"] == "2" && info["Transfer Char."] == "2", "the profile, not CICP, says the colours")
        #expect(encoded.firstRange(of: profile.bytes) != nil)
        // Not for gray images: an RGB profile cannot describe them.
        let gray = PixelConversion.convert(source, to: .gray8)
        #expect(try AVIFReference.info(ImageEncoder.encode(gray, as: .avif, profile: profile))["ICC Profile"] == "Absent")
        // A profile cannot be added to an AVIF afterwards: the error says to encode with it.
        let error = #expect(throws: ImageEncodingError.self) { try ImageEncoder.embedding(profile, in: encoded, format: .avif) }
        #expect(error?.description.contains("encode it with the profile") == true)
    }

    @Test func aSideOverAV1sLimitIsRefused() {
        let wide = PixelImage(width: AVIFCodec.maximumSide + 1, height: 1)
        let error = #expect(throws: ImageEncodingError.self) { try ImageEncoder.encode(wide, as: .avif) }
        #expect(error?.reason == .tooLarge(wide.size, maximumSide: AVIFCodec.maximumSide))
        #expect(error?.description.contains("resize it first") == true)
    }
}
