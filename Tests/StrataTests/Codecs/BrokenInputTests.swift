import Testing
@testable import Strata

@Suite("Broken inputs")
struct BrokenInputTests {
    @Test("truncated files: header readable, decode throws truncated", arguments: [
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

    @Test("a JPEG cut before its scan data fails")
    func headerOnly() {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes("broken/jpeg-header-only.jpg")
        let error = decodingError { _ = try decoder.decode(bytes) }
        #expect(error != nil)
        #expect(error?.format == .jpeg)
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
        for path in ["jpeg/orientation-6.jpg", "webp/animated-96x64-3frames.webp", "webp/kite-320x200-lossless.webp"] {
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

    @Test("garbage after a valid JPEG header does not crash the marker parser")
    func fuzzedMarkers() {
        let decoder = ImageDecoder()
        var bytes = Fixtures.bytes("jpeg/orientation-6.jpg")
        for i in Swift.stride(from: 2, to: 400, by: 7) {
            let saved = bytes[i]
            bytes[i] = UInt8(truncatingIfNeeded: i &* 31)
            let mutated = bytes
            _ = decodingError { _ = try decoder.decode(mutated) }
            bytes[i] = saved
        }
    }
}
