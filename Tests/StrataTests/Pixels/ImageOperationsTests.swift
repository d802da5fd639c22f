import Foundation
import Strata
import StrataTestSupport
import Testing

/// `ImageOperations`: their canonical text, the keys they derive (and the family identity a
/// purge finds them by), and the exact pixels of padding, flips and flattening.
@Suite("Image operations")
struct ImageOperationsTests {
    @Test func canonicalTextReadsBackAndOrdersTheOperations() throws {
        let operations = ImageOperations(
            trim: 12, crop: CropRegion(parsing: "0.1,0.2,0.5,0.25"), flip: .v, quarterTurns: 3, pad: .mirror,
            background: BackgroundColour(hex: "FF8000"), blur: 1.5, sharpen: 0.75)
        #expect(operations.canonical == "trim:12;crop:0.1,0.2,0.5,0.25;flip:v;rot:270;pad:mirror;bg:ff8000ff;blur:1.5;sharpen:0.75")
        #expect(ImageOperations(canonical: Substring(operations.canonical)) == operations)
        #expect(ImageOperations(canonical: "") == ImageOperations.none)
        #expect(ImageOperations.none.canonical.isEmpty && ImageOperations.none.isEmpty)
        for bad in ["trim", "trim:300", "rot:45", "flip:x", "blur:0.1", "bg:12345", "crop:1,2,3", "nope:1", "blur:2;"] {
            #expect(ImageOperations(canonical: Substring(bad)) == nil, "\(bad)")
        }
        #expect(ImageOperations(quarterTurns: 5).quarterTurns == 1 && ImageOperations(quarterTurns: -1).quarterTurns == 3)
    }

    @Test func cropsParseInPixelsOrFractionsAndClampToTheImage() throws {
        let pixels = try #require(CropRegion(parsing: "10,20,300,200"))
        #expect(!pixels.isFraction && pixels.description == "10,20,300,200")
        #expect(pixels.rect(in: PixelSize(width: 200, height: 100))! == (10, 20, 190, 80))
        let fractions = try #require(CropRegion(parsing: "0.25,0.5,0.5,0.5"))
        #expect(fractions.isFraction && fractions.description == "0.25,0.5,0.5,0.5")
        #expect(fractions.rect(in: PixelSize(width: 800, height: 500))! == (200, 250, 400, 250))
        #expect(pixels.rect(in: PixelSize(width: 10, height: 10)) == nil, "outside the image")
        for bad in [
            "", "1,2,3", "1,2,3,4,5", "0,0,0,10", "0.1,0,0.5,0.5", "-1,0,10,10", "0,0,1.5,0.5", "0.5,0.5,0,0.5", "a,b,c,d", "1e2,0,10,10",
        ] {
            #expect(CropRegion(parsing: Substring(bad)) == nil, "\(bad)")
        }
    }

    @Test func backgroundsParseSixOrEightDigits() {
        #expect(BackgroundColour(hex: "ff0000") == BackgroundColour(red: 255, green: 0, blue: 0))
        #expect(BackgroundColour(hex: "00FF0080") == BackgroundColour(red: 0, green: 255, blue: 0, alpha: 128))
        #expect(BackgroundColour(hex: "00FF0080")!.premultipliedBGRA == SIMD4(0, 128, 0, 128))
        for bad in ["", "fff", "ff00000", "gg0000", "ff0000ff00", "+f0000"] {
            #expect(BackgroundColour(hex: Substring(bad)) == nil, "\(bad)")
        }
    }

    @Test func keysWithOperationsAreTheirSourceKeysFamily() {
        let source = CacheKey("photos/a.jpg")
        let blurred = CacheKey("photos/a.jpg", colour: .srgb, gravity: .center, operations: ImageOperations(blur: 2))
        let both = CacheKey("photos/a.jpg", colour: .original, gravity: .north, operations: ImageOperations(quarterTurns: 1))
        #expect(blurred.string == "photos/a.jpg\u{0}ops=blur:2")
        #expect(both.string == "photos/a.jpg\u{0}gravity=north\u{0}ops=rot:90\u{0}colour=original")
        #expect(both.gravity == .north && both.colourOutput == .original && both.operations == ImageOperations(quarterTurns: 1))
        #expect(both.sourceKey == "photos/a.jpg" && blurred.operations.blur == 2 && source.operations.isEmpty)
        // Same high word as the source, its own low word; plain derived keys are not family.
        #expect(blurred.entityID.isFamily(of: source.entityID) && both.entityID.isFamily(of: source.entityID))
        #expect(blurred.entityID != both.entityID)
        #expect(!CacheKey("photos/a.jpg", colour: .original).entityID.isFamily(of: source.entityID))
        #expect(
            !CacheKey("photos/b.jpg", colour: .srgb, gravity: .center, operations: ImageOperations(blur: 2)).entityID.isFamily(
                of: source.entityID))
        #expect(ImageEntityID(hashing: blurred.string) == blurred.entityID, "every tier derives the same identity")
    }

    /// A 3×2 image of distinct opaque pixels, value `10 × index + 10` in each colour channel.
    static func numbered(width: Int = 3, height: Int = 2) -> PixelImage {
        var image = PixelImage(width: width, height: height)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            for y in 0..<height {
                for x in 0..<width {
                    let v = UInt8(10 * (y * width + x) + 10)
                    let at = y * stride + 4 * x
                    raw[at] = v
                    raw[at + 1] = v
                    raw[at + 2] = v
                    raw[at + 3] = 255
                }
            }
        }
        return image
    }

    static func column(_ image: PixelImage, y: Int) -> [UInt8] { (0..<image.width).map { image.pixelBytes(x: $0, y: y)[0] } }

    @Test func paddingPlacesTheImageAndFillsByEachExtension() {
        let image = Self.numbered()
        let red = BackgroundColour(red: 255, green: 0, blue: 0).premultipliedBGRA
        let padded = image.padded(to: PixelSize(width: 7, height: 4), extend: .background, background: red)
        #expect(padded.size == PixelSize(width: 7, height: 4))
        // Offsets rounded down: (7 − 3) / 2 = 2 across, (4 − 2) / 2 = 1 down.
        #expect(padded.pixelBytes(x: 0, y: 0) == [0, 0, 255, 255])
        #expect(Self.column(padded, y: 1) == [0, 0, 10, 20, 30, 0, 0])
        #expect(padded.pixelBytes(x: 2, y: 2) == [40, 40, 40, 255])
        let copied = image.padded(to: PixelSize(width: 7, height: 4), extend: .copy)
        #expect(Self.column(copied, y: 0) == [10, 10, 10, 20, 30, 30, 30])
        #expect(Self.column(copied, y: 3) == [40, 40, 40, 50, 60, 60, 60])
        let mirrored = image.padded(to: PixelSize(width: 9, height: 2), focus: CropFocus(x: 0.5, y: 0.5), extend: .mirror)
        // Offset 3; reflected with the edge pixel repeated, as libvips' mirror.
        #expect(Self.column(mirrored, y: 0) == [30, 20, 10, 10, 20, 30, 30, 20, 10])
        let corner = image.padded(to: PixelSize(width: 5, height: 2), focus: CropFocus(x: 1, y: 0), extend: .copy)
        #expect(Self.column(corner, y: 0) == [10, 10, 10, 20, 30])
        #expect(image.padded(to: image.size).hasSamePixels(as: image))
    }

    @Test func flipsAndFlatteningAreExact() {
        let image = Self.numbered()
        #expect(Self.column(image.flippedVertically(), y: 0) == [40, 50, 60])
        #expect(Self.column(image.flippedVertically(), y: 1) == [10, 20, 30])
        var translucent = PixelImage(width: 1, height: 1)
        translucent.withUnsafeMutableBytes { raw in raw.copyBytes(from: [0, 0, 64, 128]) }  // red at half opacity
        let white = BackgroundColour(red: 255, green: 255, blue: 255).premultipliedBGRA
        #expect(translucent.flattened(over: white).pixelBytes(x: 0, y: 0) == [127, 127, 191, 255])
        #expect(image.flattened(over: white).hasSamePixels(as: image))
    }

    @Test func aTrimFindsTheBoxInsideANoisyBorder() {
        var image = PixelImage(width: 40, height: 30)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            var state: UInt64 = 7
            for y in 0..<30 {
                for x in 0..<40 {
                    state = state &* 6_364_136_223_846_793_005 &+ 1
                    let inside = (8..<31).contains(x) && (5..<26).contains(y)
                    // The border is 240 ± 4 with single-pixel specks of 0 (noise a median removes).
                    var v = inside ? UInt8(truncatingIfNeeded: 40 + (x * y) % 60) : UInt8(236 + Int(state >> 61))
                    if !inside && state >> 58 == 0 && x + y > 0 { v = 0 }
                    if x + y == 0 { v = 240 }  // the corner names the border's colour
                    let at = y * stride + 4 * x
                    raw[at] = v
                    raw[at + 1] = v
                    raw[at + 2] = v
                    raw[at + 3] = 255
                }
            }
        }
        let box = image.trimBox(threshold: 10)
        #expect(box == (8, 5, 23, 21))
        #expect(PixelImage(width: 5, height: 5).trimBox(threshold: 10) == (0, 0, 5, 5), "all border: the whole image")
    }
}
