import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// ``ImageDecoder/decodeJPEGInRows(_:header:minimumSize:into:stride:rowsPerStep:progress:)`` and
/// the renderer's overlapped decode and resample built on it.
@Suite("JPEG decoding in rows")
struct JPEGRowDecodingTests {
    /// Decodes in rows into a fresh image (filled with 0x5A first); nil when the decoder
    /// refused. Checks the progress reports: increasing, ending at the height.
    static func decodeInRows(
        _ decoder: ImageDecoder, _ bytes: [UInt8], minimumSize: PixelSize?, rowsPerStep: Int = 16
    ) throws -> (image: PixelImage, accepted: Bool) {
        let header = try decoder.readHeader(bytes)
        let size = decoder.decodedSize(for: header, minimumSize: minimumSize)
        var image = PixelImage(width: size.width, height: size.height)
        image.withUnsafeMutableBytes { raw in _ = raw.initializeMemory(as: UInt8.self, repeating: 0x5A) }
        let stride = image.bytesPerRow
        var reports: [Int] = []
        let accepted = try bytes.withUnsafeBytes { raw in
            try image.withUnsafeMutableBytes { out in
                try decoder.decodeJPEGInRows(
                    raw, header: header, minimumSize: minimumSize, into: out.baseAddress!, stride: stride,
                    rowsPerStep: rowsPerStep
                ) { reports.append($0) }
            }
        }
        if accepted {
            #expect(reports == reports.sorted() && Set(reports).count == reports.count, "progress goes forward")
            #expect(reports.last == size.height)
            #expect(reports.first.map { $0 >= min(rowsPerStep, size.height) } == true)
        } else {
            #expect(reports.isEmpty)
        }
        return (image, accepted)
    }

    @Test(
        "the bytes are the whole-image decode's, at every DCT scale",
        arguments: [
            "jpeg/path-2560x1600.jpg", "jpeg/fallenleaf-2048x1280-420.jpg", "jpeg/eveningglow-1024x640-progressive.jpg",
            "jpeg/kite-800x500-gray.jpg", "jpeg/cups-320x200-rgb-reference.jpg", "jpeg/orientation-1.jpg",
        ])
    func sameBytes(path: String) throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes(path)
        let size = try decoder.readHeader(bytes).size
        for denominator in [1, 2, 4, 8] {
            let minimum = PixelSize(width: size.width / denominator, height: size.height / denominator)
            let whole = try decoder.decode(bytes, minimumSize: minimum)
            let (rows, accepted) = try Self.decodeInRows(decoder, bytes, minimumSize: minimum)
            #expect(accepted)
            #expect(ResamplerFillingTests.sameBytes(rows, whole), "\(path) at 1/\(denominator)")
        }
    }

    @Test(
        "rotated and CMYK/YCCK files are refused, nothing written",
        arguments: ["jpeg/orientation-6.jpg", "jpeg/cups-320x200-cmyk-plain.jpg", "jpeg/cups-320x200-ycck-adobe.jpg"])
    func refused(path: String) throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes(path)
        let header = try decoder.readHeader(bytes)
        #expect(!bytes.withUnsafeBytes { decoder.decodesJPEGInRows($0, header: header) })
        let (image, accepted) = try Self.decodeInRows(decoder, bytes, minimumSize: nil)
        #expect(!accepted)
        image.withUnsafeBytes { raw in #expect(raw.allSatisfy { $0 == 0x5A }) }
    }

    @Test(
        "broken files give the typed errors of the whole-image decode, and the decoder goes on",
        arguments: [
            "broken/truncated-baseline.jpg", "broken/truncated-progressive.jpg", "broken/corrupt-entropy.jpg",
            "broken/jpeg-header-only.jpg",
        ])
    func broken(path: String) throws {
        let decoder = ImageDecoder()
        let bytes = Fixtures.bytes(path)
        let whole = try #require(decodingError { _ = try decoder.decode(bytes) })
        let inRows = try #require(decodingError { _ = try Self.decodeInRows(decoder, bytes, minimumSize: nil) })
        #expect(inRows.format == .jpeg)
        switch (whole.reason, inRows.reason) {
        case (.truncated, .truncated), (.corrupt, .corrupt): break
        default: Issue.record("whole: \(whole.reason), in rows: \(inRows.reason)")
        }
        // The same decoder then decodes a good file exactly.
        let good = Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg")
        let (rows, _) = try Self.decodeInRows(decoder, good, minimumSize: PixelSize(width: 512, height: 320))
        #expect(ResamplerFillingTests.sameBytes(rows, try decoder.decode(good, minimumSize: PixelSize(width: 512, height: 320))))
    }

    @Test("a JPEG cut in half mid-scan is truncated in rows too")
    func cutMidScan() throws {
        let decoder = ImageDecoder()
        let full = Fixtures.bytes("jpeg/path-2560x1600.jpg")
        let bytes = Array(full.prefix(full.count / 2))
        let error = try #require(decodingError { _ = try Self.decodeInRows(decoder, bytes, minimumSize: nil) })
        #expect(error.reason == .truncated)
    }

    // MARK: The renderer

    @Test(
        "a render that overlaps decode and resample gives the serial render's bytes",
        arguments: [
            ("jpeg/path-2560x1600.jpg", RenderRequest(box: PixelSize(width: 1024, height: 1024))),
            ("jpeg/fallenleaf-2048x1280-420.jpg", RenderRequest(box: PixelSize(width: 1024, height: 1024))),
            ("jpeg/fallenleaf-2048x1280-420.jpg", RenderRequest(box: PixelSize(width: 900, height: 900), mode: .fill)),
            ("jpeg/path-2560x1600.jpg", RenderRequest(box: PixelSize(width: 1000, height: 600), mode: .fill, style: .bgrx32)),
            ("jpeg/eveningglow-1024x640-progressive.jpg", RenderRequest(box: PixelSize(width: 700, height: 700))),
        ])
    func renderer(path: String, request: RenderRequest) async throws {
        // Large resamples (minutes under TSan): off Swift's cooperative pool.
        let failures = try await offThePool("overlapped-render") { () throws -> [String] in
            let bytes = Fixtures.bytes(path)
            let overlapped = ImageRenderer(resampleThreads: 2)
            overlapped.resampler.overlapWork = 0
            // A progressive file would be split over two threads instead (ProgressiveSplitTests).
            overlapped.decoder.splitsProgressiveJPEG = false
            let serial = ImageRenderer(resampleThreads: 2)
            serial.overlapsDecode = false
            var failures: [String] = []
            for round in 0..<2 {  // the second time with the renderers' reused buffers
                let a = try overlapped.render(bytes, request: request)
                if !overlapped.lastRenderOverlapped { failures.append("round \(round): not overlapped") }
                let b = try serial.render(bytes, request: request)
                if serial.lastRenderOverlapped { failures.append("round \(round): the serial render overlapped") }
                if !ResamplerFillingTests.sameBytes(a, b) { failures.append("round \(round): the bytes differ") }
            }
            return failures
        }
        #expect(failures.isEmpty, "\(path) \(request): \(failures)")
    }

    @Test("an overlapped render of a truncated photo throws truncated, and the renderer goes on")
    func rendererTruncated() async throws {
        let failures = try await offThePool("overlapped-truncated") { () throws -> [String] in
            let full = Fixtures.bytes("jpeg/path-2560x1600.jpg")
            let request = RenderRequest(box: PixelSize(width: 1024, height: 1024))
            let renderer = ImageRenderer(resampleThreads: 2)
            var failures: [String] = []
            for cut in [full.count / 3, full.count * 9 / 10] {
                do throws(ImageDecodingError) {
                    _ = try renderer.render(Array(full.prefix(cut)), request: request)
                    failures.append("cut at \(cut): rendered")
                } catch {
                    if error.reason != .truncated { failures.append("cut at \(cut): \(error.reason)") }
                }
                if !renderer.lastRenderOverlapped { failures.append("cut at \(cut): not overlapped") }
            }
            let image = try renderer.render(full, request: request)
            let serial = ImageRenderer(resampleThreads: 1)
            if !ResamplerFillingTests.sameBytes(image, try serial.render(full, request: request)) {
                failures.append("the next render differs from a serial one")
            }
            if serial.lastRenderOverlapped { failures.append("one resample thread overlapped") }
            return failures
        }
        #expect(failures.isEmpty, "\(failures)")
    }
}
