import Strata
import Testing

@testable import StrataService

/// Quarter turns, mirroring, gray and bitonal against reference pixels of a small synthetic
/// image; a composed IIIF output (crop, resample, mirror, turn).
@Suite("IIIF pixel transforms")
struct IIIFPixelTests {
    /// 3×2, pixel n = y × 3 + x holds B = n, G = 10 + n, R = 20 + n, A = 255.
    static func numbered() -> PixelImage {
        var image = PixelImage(width: 3, height: 2)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            for y in 0..<2 {
                for x in 0..<3 {
                    let n = UInt8(y * 3 + x), p = y * stride + x * 4
                    raw[p] = n
                    raw[p + 1] = 10 + n
                    raw[p + 2] = 20 + n
                    raw[p + 3] = 255
                }
            }
        }
        return image
    }

    /// The pixel numbers of `image`, row by row.
    static func numbers(_ image: PixelImage) -> [[UInt8]] {
        (0..<image.height).map { y in (0..<image.width).map { x in image.pixelBytes(x: x, y: y)[0] } }
    }

    @Test func quarterTurnsAndMirror() {
        let image = Self.numbered()
        #expect(Self.numbers(image) == [[0, 1, 2], [3, 4, 5]])
        #expect(Self.numbers(image.rotated(clockwiseQuarterTurns: 1)) == [[3, 0], [4, 1], [5, 2]])
        #expect(Self.numbers(image.rotated(clockwiseQuarterTurns: 2)) == [[5, 4, 3], [2, 1, 0]])
        #expect(Self.numbers(image.rotated(clockwiseQuarterTurns: 3)) == [[2, 5], [1, 4], [0, 3]])
        #expect(Self.numbers(image.rotated(clockwiseQuarterTurns: 4)) == [[0, 1, 2], [3, 4, 5]])
        #expect(Self.numbers(image.mirrored()) == [[2, 1, 0], [5, 4, 3]])
        #expect(Self.numbers(image.mirrored().rotated(clockwiseQuarterTurns: 1)) == [[5, 2], [4, 1], [3, 0]])
        // The other channels travel with the pixel.
        #expect(image.rotated(clockwiseQuarterTurns: 1).pixelBytes(x: 0, y: 0) == [3, 13, 23, 255])
    }

    @Test func grayAndBitonal() {
        let image = Self.numbered()
        let gray = image.grayscale()
        // Pixel 0: B 0, G 10, R 20 → (77·20 + 150·10 + 29·0 + 128) >> 8 = 12.
        #expect(gray.pixelBytes(x: 0, y: 0) == [12, 12, 12, 255])
        // Pixel 5: B 5, G 15, R 25 → (1925 + 2250 + 145 + 128) >> 8 = 17.
        #expect(gray.pixelBytes(x: 2, y: 1) == [17, 17, 17, 255])
        // The source is unchanged (copy-on-write).
        #expect(image.pixelBytes(x: 0, y: 0) == [0, 10, 20, 255])
        let bitonal = image.grayscale(threshold: 15)
        #expect(bitonal.pixelBytes(x: 0, y: 0) == [0, 0, 0, 255])
        #expect(bitonal.pixelBytes(x: 2, y: 1) == [255, 255, 255, 255])
    }

    @Test func composeCropsResamplesAndTurns() {
        // A 4×4 original held as a 2×2 variant (scale 1/2): the region 2,0,2,4 is the right
        // column of the variant, turned 90° into a 2×1 row.
        var variant = PixelImage(width: 2, height: 2)
        let stride = variant.bytesPerRow
        variant.withUnsafeMutableBytes { raw in
            for (i, value) in [10, 200, 30, 220].enumerated() {
                let p = (i / 2) * stride + (i % 2) * 4
                raw[p] = UInt8(value)
                raw[p + 1] = UInt8(value)
                raw[p + 2] = UInt8(value)
                raw[p + 3] = 255
            }
        }
        let out = IIIFRendering.compose(
            variant, region: IIIFRect(x: 2, y: 0, width: 2, height: 4), original: PixelSize(width: 4, height: 4),
            output: PixelSize(width: 1, height: 2), rotation: IIIFRotation(quarterTurns: 1), quality: .default)
        #expect(out.size == PixelSize(width: 2, height: 1))
        #expect(out.pixelBytes(x: 0, y: 0)[0] == 220)
        #expect(out.pixelBytes(x: 1, y: 0)[0] == 200)
    }
}
