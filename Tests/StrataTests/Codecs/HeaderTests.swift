import Testing
@testable import Strata
import StrataTestSupport

@Suite("Image headers and the pixel limit")
struct HeaderTests {
    @Test func baselineJPEG() throws {
        let h = try headerOfFixture("jpeg/fallenleaf-2048x1280-420.jpg")
        #expect(h.format == .jpeg)
        #expect(h.size == PixelSize(width: 2048, height: 1280))
        #expect(h.codedSize == h.size)
        #expect(h.orientation == 1)
        #expect(!h.hasAlpha && !h.isGrayscale && !h.isAnimated)
    }

    @Test func grayscaleJPEG() throws {
        let h = try headerOfFixture("jpeg/kite-800x500-gray.jpg")
        #expect(h.isGrayscale)
        #expect(h.size == PixelSize(width: 800, height: 500))
    }

    @Test("EXIF orientation read for all eight values", arguments: 1...8)
    func orientation(_ n: Int) throws {
        let h = try headerOfFixture("jpeg/orientation-\(n).jpg")
        #expect(h.orientation == n)
        // Displayed size is the reference's for every orientation; stored sides swap for 5–8.
        #expect(h.size == PixelSize(width: 160, height: 96))
        #expect(h.codedSize == (n >= 5 ? PixelSize(width: 96, height: 160) : PixelSize(width: 160, height: 96)))
    }

    @Test func webpHeaders() throws {
        let lossy = try headerOfFixture("webp/path-2560x1600.webp")
        #expect(lossy.format == .webp && lossy.size == PixelSize(width: 2560, height: 1600) && !lossy.hasAlpha)
        let alpha = try headerOfFixture("webp/cups-640x400-alpha.webp")
        #expect(alpha.hasAlpha && alpha.size == PixelSize(width: 640, height: 400))
        let animated = try headerOfFixture("webp/animated-96x64-3frames.webp")
        #expect(animated.isAnimated && animated.size == PixelSize(width: 96, height: 64))
    }

    @Test func pngHeader() throws {
        let h = try headerOfFixture("png/red-8x8.png")
        #expect(h.format == .png && h.size == PixelSize(width: 8, height: 8) && !h.hasAlpha)
    }

    @Test(
        "pixel limit is enforced from the header",
        arguments: [
            "jpeg/path-2560x1600.jpg", "webp/path-2560x1600.webp", "jpeg/fallenleaf-2048x1280-420.jpg",
        ])
    func customLimit(path: String) throws {
        let size = try headerOfFixture(path).codedSize
        let limit = size.pixelCount - 1
        let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: limit))
        let bytes = Fixtures.bytes(path)
        let error = decodingError { _ = try decoder.readHeader(bytes) }
        #expect(error?.reason == .tooLarge(pixels: size.pixelCount, limit: limit))
        let decodeError = decodingError { _ = try decoder.decode(bytes) }
        #expect(decodeError?.reason == .tooLarge(pixels: size.pixelCount, limit: limit))
        // Exactly at the limit is accepted.
        #expect(throws: Never.self) { _ = try ImageDecoder(limits: DecodingLimits(maxPixels: size.pixelCount)).readHeader(bytes) }
    }

    @Test(
        "pixel bombs are refused before allocation (default 100 MP)",
        arguments: [
            ("broken/bomb-65000x65000.jpg", ImageFormat.jpeg, 65000 * 65000),
            ("broken/bomb-16383x16383.webp", .webp, 16383 * 16383),
            ("broken/bomb-65000x65000.png", .png, 65000 * 65000),
        ])
    func bombs(path: String, format: ImageFormat, pixels: Int) {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes(path)
        let error = decodingError { _ = try decoder.readHeader(bytes) }
        #expect(error?.reason == .tooLarge(pixels: pixels, limit: 100_000_000))
        #expect(error?.format == format)
        let decodeError = decodingError { _ = try decoder.decode(bytes, minimumSize: PixelSize(width: 64, height: 64)) }
        #expect(decodeError?.reason == .tooLarge(pixels: pixels, limit: 100_000_000))
        #expect(decoder.scratchByteCount == 0)
    }

    @Test func errorDescriptionNamesInputAndReason() {
        let error = ImageDecodingError(.tooLarge(pixels: 200, limit: 100), format: .jpeg).named("photos/k1")
        #expect(error.description.contains("photos/k1"))
        #expect(error.description.contains("200"))
        #expect(ImageDecodingError(.truncated, format: .webp).description.contains("WebP"))
    }
}
