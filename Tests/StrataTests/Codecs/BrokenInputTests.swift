import Testing
@testable import Strata
import StrataTestSupport

@Suite("Broken inputs")
struct BrokenInputTests {
    @Test(
        "truncated files: header readable, decode throws truncated",
        arguments: [
            "broken/truncated-baseline.jpg", "broken/truncated-progressive.jpg", "broken/truncated.webp",
        ])
    func truncated(path: String) throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes(path)
        let header = try decoder.readHeader(bytes)
        let error = decodingError { _ = try decoder.decode(bytes) }
        #expect(error?.reason == .truncated)
        #expect(error?.format == header.format)
        // Also into a caller's destination, and scaled.
        let size = decoder.decodedSize(for: header, minimumSize: PixelSize(width: 100, height: 100))
        var destination = PixelImage(width: size.width, height: size.height)
        let scaledError = decodingError { try decoder.decode(bytes, minimumSize: PixelSize(width: 100, height: 100), into: &destination) }
        #expect(scaledError?.reason == .truncated)
    }

    @Test("corrupt entropy data is an error, not a garbled image")
    func corruptEntropy() throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("broken/corrupt-entropy.jpg")
        #expect(try decoder.readHeader(bytes).size == PixelSize(width: 800, height: 500))
        let error = try #require(decodingError { _ = try decoder.decode(bytes) })
        #expect(error.format == .jpeg)
        switch error.reason {
        case .corrupt, .truncated: break
        default: Issue.record("unexpected reason \(error.reason)")
        }
    }

    @Test("a JPEG cut before its scan data is truncated")
    func headerOnly() {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("broken/jpeg-header-only.jpg")
        let error = decodingError { _ = try decoder.decode(bytes) }
        #expect(error?.reason == .truncated)
        #expect(error?.format == .jpeg)
    }

    @Test("flipped bytes in WebP and PNG files fail cleanly or decode fully")
    func flippedBytes() {
        let decoder = ImageDecoder()
        for path in ["webp/kite-320x200-lossless.webp", "webp/cups-640x400-alpha.webp", "png/red-8x8.png"] {
            var bytes = Fixtures.bytes(path)
            for i in Swift.stride(from: 12, to: bytes.count, by: max(1, bytes.count / 61)) {
                let saved = bytes[i]
                bytes[i] ^= 0x5A
                let mutated = bytes
                var image: PixelImage?
                let error = decodingError { image = try decoder.decode(mutated) }
                #expect((image == nil) != (error == nil))
                if let image { #expect(image.width > 0) }
                bytes[i] = saved
            }
        }
    }

    @Test(
        "a header from other bytes is refused, never overflows the destination",
        arguments: ["png/red-8x8.png", "jpeg/orientation-6.jpg"])
    func mismatchedHeader(path: String) throws {
        let decoder = ImageDecoder()
        let other = try decoder.readHeader(Fixtures.bytes("webp/animated-96x64-3frames.webp"))
        var header = try decoder.readHeader(Fixtures.bytes(path))
        header = ImageHeader(
            format: header.format, codedSize: PixelSize(width: 4, height: 4),
            orientation: header.orientation, isAnimated: other.isAnimated)
        var destination = PixelImage(width: 4, height: 4)
        let bytes = Fixtures.bytes(path)
        let error = decodingError {
            try bytes.withUnsafeBytes { raw in try decoder.decode(raw, header: header, minimumSize: nil, into: &destination) }
        }
        #expect(error != nil)
    }

    @Test("empty and garbage bytes are unrecognized", arguments: ["broken/empty.bin", "broken/garbage.bin"])
    func unrecognized(path: String) {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes(path)
        #expect(decodingError { _ = try decoder.readHeader(bytes) }?.reason == .unrecognizedFormat)
        #expect(decodingError { _ = try decoder.decode(bytes) }?.reason == .unrecognizedFormat)
    }

    @Test("every prefix of a small JPEG and WebP fails cleanly or decodes completely")
    func everyPrefix() throws {
        let decoder = ImageDecoder()
        for path in [
            "jpeg/orientation-6.jpg", "webp/animated-96x64-3frames.webp", "webp/kite-320x200-lossless.webp",
            "webp/kite-320x200-lossless-reference.png",
        ] {
            let bytes = Fixtures.bytes(path)
            let complete = try decoder.decode(bytes)
            var cut = 0
            while cut < bytes.count {
                let prefix = Array(bytes[..<cut])
                var decoded: PixelImage?
                let error = decodingError { decoded = try decoder.decode(prefix) }
                if let decoded {
                    // Only a cut in trailing bytes may decode; then the pixels must be complete.
                    #expect(decoded.hasSamePixels(as: complete), "\(path) cut at \(cut) decoded differently")
                } else {
                    #expect(error != nil)
                }
                cut += max(1, bytes.count / 97)
            }
        }
    }

    @Test(
        "garbage in a JPEG's markers: each input decodes at its header's size or fails with a decoding error, and the decoder stays usable")
    func fuzzedMarkers() throws {
        let decoder = ImageDecoder()
        let good = Fixtures.bytes("jpeg/orientation-6.jpg")
        let reference = try decoder.decode(good)
        var bytes = good
        var decoded = 0, refused = 0
        for i in Swift.stride(from: 2, to: 400, by: 7) {
            let saved = bytes[i]
            bytes[i] = UInt8(truncatingIfNeeded: i &* 31)
            let mutated = bytes
            bytes[i] = saved
            do throws(ImageDecodingError) {
                let image = try decoder.decode(mutated)
                let header = try decoder.readHeader(mutated)
                #expect(image.size == header.size, "byte \(i): decoded \(image.size), header says \(header.size)")
                #expect(image.style == .bgra32Premultiplied)
                decoded += 1
            } catch {
                // A JPEG while its signature (FF D8 FF) is intact; unrecognized once byte 2 is hit.
                let format = ImageFormatDetector.detect(mutated)
                #expect(format == (i < 3 ? nil : .jpeg))
                #expect(error.format == format, "byte \(i): \(error)")
                #expect((error.reason == .unrecognizedFormat) == (format == nil), "byte \(i): \(error)")
                refused += 1
            }
            let again = try decoder.decode(good)
            #expect(again.hasSamePixels(as: reference), "the decoder decodes the good file differently after byte \(i)")
        }
        #expect(decoded + refused == 57)
        // The mutations reach both outcomes, so both branches above were checked.
        #expect(decoded > 0 && refused > 0, "decoded \(decoded), refused \(refused)")
    }
}
