import Testing
@testable import Strata
import StrataTestSupport

@Suite("JPEG decoding")
struct JPEGDecodingTests {
    @Test(
        "baseline 4:4:4, baseline 4:2:0 and progressive decode to opaque BGRA",
        arguments: [
            "jpeg/path-2560x1600.jpg", "jpeg/fallenleaf-2048x1280-420.jpg", "jpeg/eveningglow-1024x640-progressive.jpg",
        ])
    func fullDecode(path: String) throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes(path)
        let header = try decoder.readHeader(bytes)
        let image = try decoder.decode(bytes)
        #expect(image.size == header.size)
        #expect(image.style == .bgra32Premultiplied)
        #expect(image.isRowAligned)
        // Opaque everywhere, and a real photo (not one flat colour).
        var minLuma = 255, maxLuma = 0, allOpaque = true
        for y in Swift.stride(from: 0, to: image.height, by: 37) {
            for x in Swift.stride(from: 0, to: image.width, by: 41) {
                let p = image.pixelBytes(x: x, y: y)
                allOpaque = allOpaque && p[3] == 255
                let luma = (Int(p[0]) + Int(p[1]) * 2 + Int(p[2])) / 4
                minLuma = min(minLuma, luma)
                maxLuma = max(maxLuma, luma)
            }
        }
        #expect(allOpaque)
        #expect(maxLuma - minLuma > 64)
    }

    @Test("the three JPEGs of one photo agree: 4:2:0 decode matches a scaled 4:4:4 decode")
    func subsamplingAgrees() throws {
        // 2048x1280 4:2:0 (from FallenLeaf) vs itself at 1/2: sanity that scaled decodes resemble full ones.
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg")
        let half = try decoder.decode(bytes, minimumSize: PixelSize(width: 1024, height: 640))
        #expect(half.size == PixelSize(width: 1024, height: 640))
        let full = try decoder.decode(bytes)
        // Box-reduce the full decode 2x and compare.
        var reduced = PixelImage(width: 1024, height: 640)
        let rowBytes = reduced.bytesPerRow
        reduced.withUnsafeMutableBytes { out in
            full.withUnsafeBytes { src in
                for y in 0..<640 {
                    for x in 0..<1024 {
                        for c in 0..<4 {
                            var sum = 0
                            for dy in 0..<2 { for dx in 0..<2 { sum += Int(src[(2 * y + dy) * full.bytesPerRow + 4 * (2 * x + dx) + c]) } }
                            out[y * rowBytes + 4 * x + c] = UInt8((sum + 2) / 4)
                        }
                    }
                }
            }
        }
        #expect(PixelDiff.meanDifference(half, reduced) < 3)
    }

    @Test func grayscale() throws {
        let image = try decodeFixture("jpeg/kite-800x500-gray.jpg")
        #expect(image.size == PixelSize(width: 800, height: 500))
        for (x, y) in [(0, 0), (400, 250), (799, 499), (123, 456)] {
            let p = image.pixelBytes(x: x, y: y)
            #expect(p[0] == p[1] && p[1] == p[2] && p[3] == 255)
        }
    }

    @Test("grayscale with an EXIF orientation, full and scaled")
    func grayscaleOriented() throws {
        for minimum in [nil, PixelSize(width: 80, height: 48)] {
            let reference = try decodeFixture("jpeg/orientation-gray-reference-160x96.jpg", minimumSize: minimum)
            let image = try decodeFixture("jpeg/orientation-gray-8.jpg", minimumSize: minimum)
            #expect(image.size == reference.size)
            #expect(PixelDiff.meanDifference(image, reference) < (minimum == nil ? 1.5 : 3))
            let p = image.pixelBytes(x: 5, y: 7)
            #expect(p[0] == p[1] && p[1] == p[2] && p[3] == 255)
        }
    }

    @Test(
        "CMYK, Adobe-inverted CMYK and YCCK decode to the RGB reference's colours",
        arguments: [
            "jpeg/cups-320x200-cmyk-adobe-inverted.jpg", "jpeg/cups-320x200-cmyk-plain.jpg", "jpeg/cups-320x200-ycck-adobe.jpg",
        ])
    func cmyk(path: String) throws {
        let reference = try decodeFixture("jpeg/cups-320x200-rgb-reference.jpg")
        let image = try decodeFixture(path)
        #expect(image.size == reference.size)
        let diff = PixelDiff.compare(image, reference)
        #expect(diff.mean < 4, "mean difference \(diff.mean)")
        #expect(image.pixelBytes(x: 10, y: 10)[3] == 255)
    }

    @Test("all eight EXIF orientations decode to the same upright pixels", arguments: 1...8)
    func orientation(_ n: Int) throws {
        let reference = try decodeFixture("jpeg/orientation-reference-160x96.jpg")
        let image = try decodeFixture("jpeg/orientation-\(n).jpg")
        #expect(image.size == PixelSize(width: 160, height: 96))
        let diff = PixelDiff.compare(image, reference)
        #expect(diff.mean < 1.5, "orientation \(n): mean difference \(diff.mean)")
    }

    @Test("orientation with DCT scaling", arguments: [5, 6, 7, 8])
    func orientationScaled(_ n: Int) throws {
        let reference = try decodeFixture("jpeg/orientation-reference-160x96.jpg", minimumSize: PixelSize(width: 80, height: 48))
        #expect(reference.size == PixelSize(width: 80, height: 48))
        let image = try decodeFixture("jpeg/orientation-\(n).jpg", minimumSize: PixelSize(width: 80, height: 48))
        #expect(image.size == PixelSize(width: 80, height: 48))
        #expect(PixelDiff.meanDifference(image, reference) < 3)
    }

    @Test(
        "DCT scaling picks the smallest factor that still covers the minimum size",
        arguments: [
            PixelSize(width: 256, height: 256), PixelSize(width: 1024, height: 100), PixelSize(width: 100, height: 700),
            PixelSize(width: 2048, height: 1280), PixelSize(width: 4000, height: 4000), PixelSize(width: 1, height: 1),
        ])
    func scaledSize(minimum: PixelSize) throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg")
        let header = try decoder.readHeader(bytes)
        let size = decoder.decodedSize(for: header, minimumSize: minimum)
        let factor = try #require(decoder.jpegScalingFactor(for: header, minimumSize: minimum))
        #expect(size == factor.scaled(header.codedSize))
        #expect(size.width <= header.size.width && size.height <= header.size.height)
        if minimum.width <= header.size.width && minimum.height <= header.size.height {
            #expect(size.width >= minimum.width && size.height >= minimum.height)
        } else {
            #expect(size == header.size)
        }
        // The next smaller factor would not cover the minimum.
        let factors = JPEGScalingFactor.powersOfTwo
        if let i = factors.firstIndex(of: factor), i + 1 < factors.count {
            let smaller = factors[i + 1].scaled(header.codedSize)
            #expect(smaller.width < minimum.width || smaller.height < minimum.height)
        }
        let image = try decoder.decode(bytes, minimumSize: minimum)
        #expect(image.size == size)
    }

    @Test("all libjpeg-turbo factors are usable when asked for")
    func allFactors() throws {
        let decoder = ImageDecoder()
        decoder.jpegScaling = .all
        let bytes = Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg")
        let header = try decoder.readHeader(bytes)
        let minimum = PixelSize(width: 1500, height: 900)
        let factor = try #require(decoder.jpegScalingFactor(for: header, minimumSize: minimum))
        #expect(factor.value < 1)  // 3/4 gives 1536x960
        let image = try decoder.decode(bytes, minimumSize: minimum)
        #expect(image.width >= 1500 && image.height >= 900 && image.width < 2048)
        decoder.jpegScaling = .none
        #expect(decoder.decodedSize(for: header, minimumSize: minimum) == header.size)
    }

    @Test("decodes into a caller's destination with its own stride, leaving the padding alone")
    func customStride() throws {
        let decoder = ImageDecoder()
        for path in ["jpeg/eveningglow-1024x640-progressive.jpg", "jpeg/orientation-6.jpg", "jpeg/cups-320x200-ycck-adobe.jpg"] {
            let bytes = Fixtures.bytes(path)
            let expected = try decoder.decode(bytes, minimumSize: PixelSize(width: 60, height: 60))
            let stride = expected.width * 4 + 100
            let storage = PixelStorage(uninitializedByteCount: stride * expected.height + 16)
            var destination = PixelImage(
                width: expected.width, height: expected.height, bytesPerRow: stride,
                style: .bgra32Premultiplied, storage: storage, offset: 16)
            destination.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xAB) }
            try decoder.decode(bytes, minimumSize: PixelSize(width: 60, height: 60), into: &destination)
            #expect(destination.hasSamePixels(as: expected), "\(path)")
            destination.withUnsafeBytes { raw in
                for y in 0..<(expected.height - 1) {
                    for i in (expected.width * 4)..<stride { #expect(raw[y * stride + i] == 0xAB) }
                }
            }
        }
    }

    @Test("the scratch buffer is reused, not reallocated, across decodes")
    func scratchReuse() throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("jpeg/coldripple-1024x640-orientation6.jpg")
        let first = try decoder.decode(bytes)
        #expect(first.size == PixelSize(width: 1024, height: 640))
        let held = decoder.scratchByteCount
        #expect(held >= 1024 * 640 * 4)
        var destination = PixelImage(width: 1024, height: 640)
        try decoder.decode(bytes, minimumSize: nil, into: &destination)
        #expect(decoder.scratchByteCount == held)
        #expect(destination.hasSamePixels(as: first))
        // A smaller decode also fits in the same buffer.
        _ = try decoder.decode(bytes, minimumSize: PixelSize(width: 200, height: 100))
        #expect(decoder.scratchByteCount == held)
        // Beyond the retention limit the buffer is released after the decode.
        decoder.scratchRetentionLimit = 1024
        _ = try decoder.decode(bytes)
        #expect(decoder.scratchByteCount == 0)
    }

    @Test("the orientation-6 photo shows the upright landscape")
    func orientedPhoto() throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("jpeg/coldripple-1024x640-orientation6.jpg")
        let header = try decoder.readHeader(bytes)
        #expect(header.orientation == 6 && header.codedSize == PixelSize(width: 640, height: 1024))
        #expect(header.size == PixelSize(width: 1024, height: 640))
        let scaled = try decoder.decode(bytes, minimumSize: PixelSize(width: 256, height: 160))
        #expect(scaled.size == PixelSize(width: 256, height: 160))
    }

    @Test("bare decode: the library call alone, into a reused buffer")
    func bare() throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg")
        let header = try decoder.readHeader(bytes)
        let factor = JPEGScalingFactor(1, 4)
        var destination = PixelImage(width: factor.scaled(header.codedSize).width, height: factor.scaled(header.codedSize).height)
        try bytes.withUnsafeBytes { raw in try decoder.decodeBare(raw, scale: factor, into: &destination) }
        let regular = try decoder.decode(bytes, minimumSize: factor.scaled(header.codedSize))
        #expect(destination.hasSamePixels(as: regular))
    }
}
