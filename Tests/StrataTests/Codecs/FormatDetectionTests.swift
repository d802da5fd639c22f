import Testing
@testable import Strata
import StrataTestSupport

@Suite("Format detection")
struct FormatDetectionTests {
    @Test(
        "detects by magic bytes",
        arguments: [
            ("jpeg/path-2560x1600.jpg", ImageFormat?.some(.jpeg)),
            ("jpeg/eveningglow-1024x640-progressive.jpg", .jpeg),
            ("webp/path-2560x1600.webp", .webp),
            ("webp/kite-320x200-lossless.webp", .webp),
            ("webp/animated-96x64-3frames.webp", .webp),
            ("png/red-8x8.png", .png),
            ("broken/empty.bin", nil),
            ("broken/garbage.bin", nil),
        ])
    func detect(path: String, expected: ImageFormat?) {
        let bytes = Fixtures.bytes(path)
        #expect(ImageFormatDetector.detect(bytes) == expected)
        #expect(bytes.withUnsafeBytes { ImageFormatDetector.detect($0) } == expected)
    }

    @Test("ignores the file name: a WebP named .jpg is WebP")
    func nameIsIrrelevant() throws {
        let webp = Fixtures.bytes("webp/kite-320x200-lossless.webp")
        let header = try ImageDecoder().readHeader(webp)
        #expect(header.format == .webp)
    }

    @Test("short prefixes of a signature are not recognized")
    func shortPrefixes() {
        #expect(ImageFormatDetector.detect([0xFF, 0xD8] as [UInt8]) == nil)
        #expect(ImageFormatDetector.detect(Array("RIFF\u{0}\u{0}\u{0}\u{0}WEB".utf8)) == nil)
        #expect(ImageFormatDetector.detect(Array("RIFF\u{0}\u{0}\u{0}\u{0}WAVE".utf8)) == nil)
        #expect(ImageFormatDetector.detect([0x89, 0x50, 0x4E, 0x47] as [UInt8]) == nil)
    }
}
