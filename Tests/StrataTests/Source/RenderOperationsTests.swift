import Foundation
import Strata
import StrataTestSupport
import Testing

/// The renderer with operations: each geometry operation against the same steps done by hand on
/// the full decode (resample of the region, then the flip and the turn), within 40 dB — the
/// shrink-on-load decode is the only difference — and the filters on the resized output.
@Suite("Render operations")
struct RenderOperationsTests {
    static let photo = Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg")

    /// The full decode's `rect` resampled to `size`, flipped, then turned.
    static func byHand(
        _ rect: SourceRect, to size: PixelSize, flip: ImageOperations.Flip? = nil, turns: Int = 0, from full: PixelImage
    ) -> PixelImage {
        var image = Resampler().resample(full, region: rect, to: size)
        if flip == .h { image = image.mirrored() }
        if flip == .v { image = image.flippedVertically() }
        return image.rotated(clockwiseQuarterTurns: turns)
    }

    static func render(_ request: RenderRequest) throws -> (image: PixelImage, originalSize: PixelSize) {
        try Self.photo.withUnsafeBytes { bytes in try ImageRenderer().renderWithOriginalSize(bytes, request: request) }
    }

    @Test func cropsFlipsAndTurnsAsTheStepsByHand() throws {
        let full = try ImageDecoder().decode(Self.photo)
        // A pixel crop, fitted: 600×400 of the original into 300×300 → 300×200.
        let crop = try #require(CropRegion(parsing: "700,300,600,400"))
        let cropped = try Self.render(RenderRequest(box: PixelSize(width: 300, height: 300), operations: ImageOperations(crop: crop)))
        #expect(cropped.image.size == PixelSize(width: 300, height: 200) && cropped.originalSize == PixelSize(width: 600, height: 400))
        let expected = Self.byHand(SourceRect(x: 700, y: 300, width: 600, height: 400), to: cropped.image.size, from: full)
        #expect(psnr(cropped.image, expected) >= 40, "\(psnr(cropped.image, expected)) dB")

        // A fractional crop turned a quarter and mirrored: the box is the turned image's.
        let turned = ImageOperations(crop: CropRegion(parsing: "0.5,0.0,0.5,1.0"), flip: .h, quarterTurns: 1)
        let rendered = try Self.render(RenderRequest(box: PixelSize(width: 400, height: 200), operations: turned))
        // The right half is 1024×1280; turned it is 1280×1024, fitted into 400×200 → 250×200.
        #expect(rendered.image.size == PixelSize(width: 250, height: 200) && rendered.originalSize == PixelSize(width: 1280, height: 1024))
        let byHand = Self.byHand(
            SourceRect(x: 1024, y: 0, width: 1024, height: 1280), to: PixelSize(width: 200, height: 250), flip: .h, turns: 1, from: full)
        #expect(psnr(rendered.image, byHand) >= 40, "\(psnr(rendered.image, byHand)) dB")

        // A fill of the turned image placed north: north of the answer is the original's west
        // (a quarter turn clockwise brings the left edge to the top).
        let north = try Self.render(
            RenderRequest(
                box: PixelSize(width: 200, height: 200), mode: .fill, gravity: .north, operations: ImageOperations(quarterTurns: 1)))
        let west = Self.byHand(
            SourceRect(x: 0, y: 0, width: 1280, height: 1280), to: PixelSize(width: 200, height: 200), turns: 1, from: full)
        #expect(psnr(north.image, west) >= 40, "\(psnr(north.image, west)) dB")

        // A vertical flip turned a half is a horizontal mirror.
        let half = try Self.render(
            RenderRequest(box: PixelSize(width: 256, height: 256), operations: ImageOperations(flip: .v, quarterTurns: 2)))
        let mirror = try Self.render(RenderRequest(box: PixelSize(width: 256, height: 256), operations: ImageOperations(flip: .h)))
        #expect(half.image.hasSamePixels(as: mirror.image))
    }

    @Test func aCropOutsideTheOriginalIsRefusedNamingIt() throws {
        let outside = ImageOperations(crop: CropRegion(parsing: "3000,10,100,100"))
        #expect {
            try Self.render(RenderRequest(box: PixelSize(width: 100, height: 100), operations: outside))
        } throws: { error in
            guard let decoding = error as? ImageDecodingError, case .operation(let message) = decoding.reason else { return false }
            return message.contains("crop=3000,10,100,100") && message.contains("2048×1280")
        }
    }

    @Test func aTrimIsTheSameBoxAtEverySize() throws {
        // The photo in a flat border: every size crops the same box of the original.
        let directory = TempDirectory()
        let framed = directory.path + "/framed.png"
        try ExternalTools.run(
            "vips",
            ["embed", Fixtures.url("jpeg/cups-320x200-rgb-reference.jpg").path, framed, "40", "30", "400", "300", "--extend", "white"])
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: framed)))
        for box in [PixelSize(width: 320, height: 320), PixelSize(width: 160, height: 160), PixelSize(width: 64, height: 64)] {
            let (image, original) = try bytes.withUnsafeBytes { raw in
                try ImageRenderer().renderWithOriginalSize(raw, request: RenderRequest(box: box, operations: ImageOperations(trim: 10)))
            }
            #expect(original == PixelSize(width: 320, height: 200), "\(box): \(original)")
            #expect(image.size == SizingPlan(source: original, box: box, mode: .fit).output)
            #expect(image.pixelBytes(x: 0, y: 0) != [255, 255, 255, 255], "a white border is left at \(box)")
        }
    }

    @Test func padBlurAndSharpenRunOnTheResizedImage() throws {
        let plain = try Self.render(RenderRequest(box: PixelSize(width: 300, height: 300))).image
        let padded = try Self.render(
            RenderRequest(
                box: PixelSize(width: 300, height: 300), mode: .fill,
                operations: ImageOperations(pad: .background, background: BackgroundColour(hex: "00ff00")))
        ).image
        #expect(padded.size == PixelSize(width: 300, height: 300))
        #expect(padded.pixelBytes(x: 0, y: 0) == [0, 255, 0, 255] && padded.pixelBytes(x: 299, y: 299) == [0, 255, 0, 255])
        // The fit (300×188) sits in the middle: rows 56 to 243.
        #expect(plain.size == PixelSize(width: 300, height: 188))
        let top = (300 - 188) / 2
        #expect(padded.pixelBytes(x: 150, y: top + 90) == plain.pixelBytes(x: 150, y: 90))
        let blurred = try Self.render(RenderRequest(box: PixelSize(width: 300, height: 300), operations: ImageOperations(blur: 2))).image
        #expect(psnr(blurred, plain.blurred(sigma: 2)) == .infinity)
        let sharpened = try Self.render(RenderRequest(box: PixelSize(width: 300, height: 300), operations: ImageOperations(sharpen: 1)))
            .image
        #expect(psnr(sharpened, plain.sharpened(sigma: 1)) == .infinity)
    }
}
