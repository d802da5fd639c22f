import StrataTestSupport
import Testing
@testable import Strata

@Suite("Encoders")
struct EncoderTests {
    static func convert(_ image: PixelImage, to style: PixelStyle) -> PixelImage {
        var out = PixelImage(width: image.width, height: image.height, style: style)
        let outStride = out.bytesPerRow
        out.withUnsafeMutableBytes { dst in
            image.withUnsafeBytes { src in
                for y in 0..<image.height {
                    for x in 0..<image.width {
                        let s = y * image.bytesPerRow + 4 * x
                        let b = Int(src[s]), g = Int(src[s + 1]), r = Int(src[s + 2])
                        let d = y * outStride + x * style.bytesPerPixel
                        switch style {
                        case .bgra32Premultiplied: for c in 0..<4 { dst[d + c] = src[s + c] }
                        case .bgrx32:
                            dst[d] = UInt8(b)
                            dst[d + 1] = UInt8(g)
                            dst[d + 2] = UInt8(r)
                            dst[d + 3] = 255
                        case .gray8: dst[d] = UInt8((b * 29 + g * 150 + r * 77 + 128) >> 8)
                        case .rgb565:
                            let v = UInt16(r >> 3) << 11 | UInt16(g >> 2) << 5 | UInt16(b >> 3)
                            dst[d] = UInt8(v & 255)
                            dst[d + 1] = UInt8(v >> 8)
                        }
                    }
                }
            }
        }
        return out
    }

    /// `encoded` decoded: AVIF by `avifdec` (``AVIFReference``), the others by ImageDecoder.
    static func decode(_ encoded: [UInt8], format: ImageFormat) throws -> PixelImage {
        format == .avif ? try AVIFReference.decode(encoded) : try ImageDecoder().decode(encoded)
    }

    @Test("round trips through every format stay close to the input", arguments: ImageEncoder.formats)
    func roundTrip(format: ImageFormat) throws {
        let source = try decodeFixture("jpeg/cups-320x200-rgb-reference.jpg")
        let encoded = try ImageEncoder.encode(source, as: format, quality: 92)
        #expect(ImageFormatDetector.detect(encoded) == format)
        let decoded = try Self.decode(encoded, format: format)
        #expect(decoded.size == source.size)
        let diff = PixelDiff.compare(decoded, source)
        if format == .png {
            #expect(diff.max == 0)
        } else {
            #expect(diff.mean < 3, "\(format): mean \(diff.mean)")
        }
    }

    @Test("WebP quality 100 is lossless")
    func webpLossless() throws {
        let source = try decodeFixture("webp/kite-320x200-lossless.webp")
        let decoded = try ImageDecoder().decode(ImageEncoder.encode(source, as: .webp, quality: 100))
        #expect(decoded.hasSamePixels(as: source))
    }

    @Test("alpha survives PNG, WebP and AVIF (premultiplied within rounding); JPEG drops it", arguments: ImageEncoder.formats)
    func alpha(format: ImageFormat) throws {
        let source = try decodeFixture("webp/cups-640x400-alpha.webp", minimumSize: PixelSize(width: 160, height: 100))
        let encoded = try ImageEncoder.encode(source, as: format, quality: 100)
        let decoded = try Self.decode(encoded, format: format)
        if format == .avif {
            #expect(try AVIFReference.info(encoded)["Alpha"] == "Not premultiplied")
        } else {
            #expect(try ImageDecoder().readHeader(encoded).hasAlpha == (format != .jpeg))
        }
        if format == .jpeg {
            #expect(decoded.pixelBytes(x: 0, y: 0) == [0, 0, 0, 255])
        } else {
            // AVIF at quality 100 is lossless AV1 on 4:4:4 YUV: the RGB↔YUV rounding remains.
            let diff = PixelDiff.compare(decoded, source)
            #expect(diff.max <= (format == .avif ? 3 : 1), "\(format): max \(diff.max)")
        }
    }

    @Test("every pixel style encodes", arguments: PixelStyle.allCases)
    func styles(style: PixelStyle) throws {
        let source = try decodeFixture("jpeg/cups-320x200-rgb-reference.jpg")
        let image = Self.convert(source, to: style)
        for format in ImageEncoder.formats {
            let encoded = try ImageEncoder.encode(image, as: format, quality: 95)
            let decoder = ImageDecoder()
            let decoded = try Self.decode(encoded, format: format)
            #expect(decoded.size == source.size)
            let expected = style == .bgra32Premultiplied ? source : try decoder.decode(ImageEncoder.encode(image, as: .png))
            #expect(PixelDiff.meanDifference(decoded, expected) < 3, "\(style) as \(format)")
            if style == .gray8 && format == .jpeg { #expect(try decoder.readHeader(encoded).isGrayscale) }
            if style == .gray8 && format == .avif { #expect(try AVIFReference.info(encoded)["Format"] == "YUV400") }
        }
    }

    @Test func errorDescribesTooLarge() {
        let error = ImageEncodingError(.tooLarge(PixelSize(width: 20000, height: 10), maximumSide: 16383), format: .webp)
        #expect(error.description.contains("16383"))
    }
}
