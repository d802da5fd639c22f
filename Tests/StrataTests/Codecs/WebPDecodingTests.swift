import Testing
@testable import Strata
import StrataTestSupport

@Suite("WebP decoding")
struct WebPDecodingTests {
    @Test func lossyFull() throws {
        let webp = try decodeFixture("webp/path-2560x1600.webp")
        let jpeg = try decodeFixture("jpeg/path-2560x1600.jpg")
        #expect(webp.size == PixelSize(width: 2560, height: 1600))
        // The same photo re-encoded: close to the JPEG decode.
        #expect(PixelDiff.meanDifference(webp, jpeg) < 6)
        #expect(webp.pixelBytes(x: 1000, y: 800)[3] == 255)
    }

    @Test("lossless decodes exactly to the PNG reference")
    func lossless() throws {
        let webp = try decodeFixture("webp/kite-320x200-lossless.webp")
        let png = try decodeFixture("webp/kite-320x200-lossless-reference.png")
        #expect(webp.hasSamePixels(as: png))
    }

    @Test("alpha is premultiplied: transparent corners are zero, the centre is opaque, no channel exceeds alpha")
    func alpha() throws {
        let image = try decodeFixture("webp/cups-640x400-alpha.webp")
        #expect(image.pixelBytes(x: 0, y: 0) == [0, 0, 0, 0])
        #expect(image.pixelBytes(x: 639, y: 399) == [0, 0, 0, 0])
        #expect(image.pixelBytes(x: 320, y: 200)[3] == 255)
        var partial = 0
        image.withUnsafeBytes { raw in
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let o = y * image.bytesPerRow + 4 * x
                    let a = raw[o + 3]
                    #expect(raw[o] <= a && raw[o + 1] <= a && raw[o + 2] <= a)
                    if a > 0 && a < 255 { partial += 1 }
                }
            }
        }
        #expect(partial > 1000)  // the blurred mask edge
    }

    @Test("animated WebP decodes its first frame at full size")
    func animatedFirstFrame() throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("webp/animated-96x64-3frames.webp")
        let header = try decoder.readHeader(bytes)
        #expect(header.isAnimated)
        #expect(decoder.decodedSize(for: header, minimumSize: PixelSize(width: 10, height: 10)) == header.size)
        let image = try decoder.decode(bytes, minimumSize: PixelSize(width: 10, height: 10))
        let reference = try decodeFixture("webp/animated-first-frame-reference.png")
        #expect(image.size == reference.size)
        #expect(PixelDiff.meanDifference(image, reference) < 4)
    }

    @Test(
        "scaled decode returns the aspect-preserving size covering the minimum",
        arguments: [
            PixelSize(width: 300, height: 300), PixelSize(width: 640, height: 100), PixelSize(width: 100, height: 400),
            PixelSize(width: 3000, height: 10),
        ])
    func scaled(minimum: PixelSize) throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("webp/path-2560x1600.webp")
        let header = try decoder.readHeader(bytes)
        let size = decoder.decodedSize(for: header, minimumSize: minimum)
        #expect(size.width <= 2560 && size.height <= 1600)
        if minimum.width <= 2560 && minimum.height <= 1600 {
            #expect(size.width >= minimum.width && size.height >= minimum.height)
            // One side is exactly the minimum (no larger than needed), aspect kept within a pixel.
            #expect(size.width == minimum.width || size.height == minimum.height)
            #expect(abs(Double(size.width) / Double(size.height) - 1.6) * Double(size.height) <= 1.6)
        } else {
            #expect(size == header.size)
        }
        let image = try decoder.decode(bytes, minimumSize: minimum)
        #expect(image.size == size)
    }

    @Test("a scale above half decodes in full: libwebp's rescaler is slower there than the full decode")
    func aScaleAboveHalfDecodesInFull() throws {
        let decoder = ImageDecoder()
        let header = try decoder.readHeader(Fixtures.bytes("webp/path-2560x1600.webp"))
        #expect(decoder.decodedSize(for: header, minimumSize: PixelSize(width: 2048, height: 1280)) == header.size)
        #expect(decoder.decodedSize(for: header, minimumSize: PixelSize(width: 1281, height: 10)) == header.size)
        #expect(decoder.decodedSize(for: header, minimumSize: PixelSize(width: 10, height: 801)) == header.size)
        #expect(
            decoder.decodedSize(for: header, minimumSize: PixelSize(width: 1280, height: 800))
                == PixelSize(width: 1280, height: 800))
    }

    @Test("scaled decode resembles the full decode reduced")
    func scaledContent() throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("webp/kite-320x200-lossless.webp")
        let half = try decoder.decode(bytes, minimumSize: PixelSize(width: 160, height: 100))
        #expect(half.size == PixelSize(width: 160, height: 100))
        let full = try decoder.decode(bytes)
        var reduced = PixelImage(width: 160, height: 100)
        let rowBytes = reduced.bytesPerRow
        reduced.withUnsafeMutableBytes { out in
            full.withUnsafeBytes { src in
                for y in 0..<100 {
                    for x in 0..<160 {
                        for c in 0..<4 {
                            var sum = 0
                            for dy in 0..<2 { for dx in 0..<2 { sum += Int(src[(2 * y + dy) * full.bytesPerRow + 4 * (2 * x + dx) + c]) } }
                            out[y * rowBytes + 4 * x + c] = UInt8((sum + 2) / 4)
                        }
                    }
                }
            }
        }
        #expect(PixelDiff.meanDifference(half, reduced) < 4)
    }

    @Test("decodes straight into a destination with a custom stride")
    func customStride() throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("webp/cups-640x400-alpha.webp")
        let expected = try decoder.decode(bytes, minimumSize: PixelSize(width: 200, height: 125))
        let stride = expected.width * 4 + 36
        let storage = PixelStorage(uninitializedByteCount: stride * expected.height)
        var destination = PixelImage(
            width: expected.width, height: expected.height, bytesPerRow: stride,
            style: .bgra32Premultiplied, storage: storage, offset: 0)
        destination.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xCD) }
        try decoder.decode(bytes, minimumSize: PixelSize(width: 200, height: 125), into: &destination)
        #expect(destination.hasSamePixels(as: expected))
        #expect(decoder.scratchByteCount == 0)  // no scratch for a still, upright WebP
        destination.withUnsafeBytes { raw in #expect(raw[stride - 1] == 0xCD) }
    }

    @Test("EXIF orientation in a WebP's EXIF chunk is applied, also when scaled")
    func orientation() throws {
        let header = try headerOfFixture("webp/orientation-6-lossless.webp")
        #expect(header.orientation == 6 && header.codedSize == PixelSize(width: 96, height: 160))
        let reference = try decodeFixture("jpeg/orientation-reference-160x96.jpg")
        let image = try decodeFixture("webp/orientation-6-lossless.webp")
        #expect(image.size == PixelSize(width: 160, height: 96))
        #expect(PixelDiff.meanDifference(image, reference) < 1.5)
        let half = try decodeFixture("webp/orientation-6-lossless.webp", minimumSize: PixelSize(width: 80, height: 48))
        let referenceHalf = try decodeFixture("jpeg/orientation-reference-160x96.jpg", minimumSize: PixelSize(width: 80, height: 48))
        #expect(half.size == PixelSize(width: 80, height: 48))
        #expect(PixelDiff.meanDifference(half, referenceHalf) < 4)
    }

    @Test func png() throws {
        let image = try decodeFixture("png/red-8x8.png")
        #expect(image.size == PixelSize(width: 8, height: 8))
        #expect(image.pixelBytes(x: 3, y: 3) == [0, 0, 255, 255])
    }
}
