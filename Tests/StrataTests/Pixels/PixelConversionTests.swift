import Testing
@testable import Strata

@Suite("PixelConversion")
struct PixelConversionTests {
    /// A BGRA image whose pixels come from `pixel(x, y)` (B, G, R, A).
    static func bgra(_ width: Int, _ height: Int, _ pixel: (Int, Int) -> (UInt8, UInt8, UInt8, UInt8)) -> PixelImage {
        var image = PixelImage(width: width, height: height, style: .bgra32Premultiplied)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            for y in 0..<height {
                for x in 0..<width {
                    let (b, g, r, a) = pixel(x, y)
                    let i = y * stride + x * 4
                    raw[i] = b
                    raw[i + 1] = g
                    raw[i + 2] = r
                    raw[i + 3] = a
                }
            }
        }
        return image
    }

    @Test func sameStyleReturnsTheImageItself() {
        for style in PixelStyle.allCases {
            let image = PixelImage(width: 5, height: 3, style: style)
            let converted = PixelConversion.convert(image, to: style)
            #expect(converted.storage === image.storage)
        }
    }

    @Test func grayRoundTripsExactlyThroughBothFourByteStyles() {
        var gray = PixelImage(width: 256, height: 2, style: .gray8)
        let stride = gray.bytesPerRow
        gray.withUnsafeMutableBytes { raw in
            for x in 0..<256 {
                raw[x] = UInt8(x)
                raw[stride + x] = UInt8(255 - x)
            }
        }
        for wide in [PixelStyle.bgra32Premultiplied, .bgrx32] {
            let expanded = PixelConversion.convert(gray, to: wide)
            #expect(expanded.pixelBytes(x: 200, y: 0) == [200, 200, 200, 255])
            let back = PixelConversion.convert(expanded, to: .gray8)
            #expect(back.hasSamePixels(as: gray))
        }
        // Through RGB565 gray is quantised, but 0 and 255 survive.
        let via565 = PixelConversion.convert(PixelConversion.convert(gray, to: .rgb565), to: .gray8)
        #expect(via565.pixelBytes(x: 0, y: 0) == [0])
        #expect(via565.pixelBytes(x: 255, y: 0) == [255])
    }

    @Test func bgraTo565AndBackIsWithinHalfAQuantisationStep() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt8 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return UInt8(truncatingIfNeeded: state >> 33)
        }
        let image = Self.bgra(97, 31) { _, _ in (next(), next(), next(), 255) }
        let back = PixelConversion.convert(PixelConversion.convert(image, to: .rgb565), to: .bgra32Premultiplied)
        var worst = [0, 0, 0]
        for y in 0..<image.height {
            for x in 0..<image.width {
                let a = image.pixelBytes(x: x, y: y), b = back.pixelBytes(x: x, y: y)
                for c in 0..<3 { worst[c] = max(worst[c], abs(Int(a[c]) - Int(b[c]))) }
                #expect(b[3] == 255)
            }
        }
        // Steps are 255/31 ≈ 8.2 (blue, red) and 255/63 ≈ 4.0 (green).
        #expect(worst[0] <= 4 && worst[2] <= 4 && worst[1] <= 2, "worst error per channel \(worst)")
        #expect(worst.max()! > 0, "565 must actually quantise")
    }

    @Test func every565ValueSurvivesWideningAndRequantising() {
        var image = PixelImage(width: 256, height: 256, style: .rgb565)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            for v in 0..<65536 {
                let y = v >> 8, x = v & 255
                raw.storeBytes(of: UInt16(v).littleEndian, toByteOffset: y * stride + x * 2, as: UInt16.self)
            }
        }
        let back = PixelConversion.convert(PixelConversion.convert(image, to: .bgrx32), to: .rgb565)
        #expect(back.hasSamePixels(as: image))
        // Bit replication: full-scale channels widen to 255, zero stays 0.
        let white = PixelConversion.convert(image, to: .bgra32Premultiplied).pixelBytes(x: 255, y: 255)
        #expect(white == [255, 255, 255, 255])
        let red = image.pixelBytes(x: 0, y: 0xF8)  // 0xF800: red only
        #expect(red == [0x00, 0xF8])
        #expect(PixelConversion.convert(image, to: .bgrx32).pixelBytes(x: 0, y: 0xF8) == [0, 0, 255, 255])
    }

    @Test func premultipliedDropsAlphaAsOverBlack() {
        // Premultiplied half-transparent orange: colour bytes already scaled by alpha.
        let image = Self.bgra(3, 2) { _, _ in (10, 64, 128, 128) }
        let opaque = PixelConversion.convert(image, to: .bgrx32)
        #expect(opaque.pixelBytes(x: 2, y: 1) == [10, 64, 128, 255])
        let back = PixelConversion.convert(opaque, to: .bgra32Premultiplied)
        #expect(back.pixelBytes(x: 0, y: 0) == [10, 64, 128, 255])
        let gray = PixelConversion.convert(image, to: .gray8)
        let luma = 0.299 * 128 + 0.587 * 64 + 0.114 * 10
        #expect(abs(Double(gray.pixelBytes(x: 1, y: 1)[0]) - luma) <= 0.5)
    }

    @Test func grayUsesRec601Weights() {
        let primaries: [(UInt8, UInt8, UInt8)] = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (37, 150, 201), (90, 90, 90)]
        let image = Self.bgra(primaries.count, 1) { x, _ in
            let (b, g, r) = primaries[x]
            return (b, g, r, 255)
        }
        let gray = PixelConversion.convert(image, to: .gray8)
        for (x, (b, g, r)) in primaries.enumerated() {
            let expected = 0.299 * Double(r) + 0.587 * Double(g) + 0.114 * Double(b)
            let got = Double(gray.pixelBytes(x: x, y: 0)[0])
            #expect(abs(got - expected) <= 0.5, "pixel \(x): \(got) vs \(expected)")
        }
        #expect(gray.pixelBytes(x: 4, y: 0) == [90])
    }

    @Test func grayTo565RoundsAndBack() {
        var gray = PixelImage(width: 4, height: 1, style: .gray8)
        gray.withUnsafeMutableBytes { raw in
            raw[0] = 0
            raw[1] = 128
            raw[2] = 200
            raw[3] = 255
        }
        let wide = PixelConversion.convert(PixelConversion.convert(gray, to: .rgb565), to: .bgrx32)
        for x in 0..<4 {
            let g = Int(gray.pixelBytes(x: x, y: 0)[0])
            let p = wide.pixelBytes(x: x, y: 0)
            #expect(abs(Int(p[0]) - g) <= 4 && abs(Int(p[1]) - g) <= 2 && abs(Int(p[2]) - g) <= 4)
        }
    }

    @Test func convertIntoKeepsTheDestinationsRowPadding() {
        let image = Self.bgra(5, 4) { x, y in (UInt8(x), UInt8(y), 9, 255) }
        // A destination with a wider stride than the default and a marker in its padding.
        let stride = 128
        var destination = PixelImage(
            width: 5, height: 4, bytesPerRow: stride, style: .gray8,
            storage: PixelStorage(zeroedByteCount: stride * 4), offset: 0)
        destination.withUnsafeMutableBytes { raw in for y in 0..<4 { raw[y * stride + 100] = 0xAB } }
        PixelConversion.convert(image, into: &destination)
        destination.withUnsafeBytes { raw in
            for y in 0..<4 { #expect(raw[y * stride + 100] == 0xAB) }
        }
        #expect(destination.hasSamePixels(as: PixelConversion.convert(image, to: .gray8)))
    }
}
