import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// libwebp's incremental decoder (`WebPRowReader`) gives the bytes of the whole decode for every
/// kind of still WebP, band by band, holding only a band of its output; and a tile pyramid reads
/// a lossy WebP in rows, however large.
@Suite struct WebPRowReaderTests {
    /// The odd-sized photo, with an alpha ramp when `alpha`.
    static func photo(alpha: Bool) -> PixelImage {
        let photo = TilePyramidsTests.oddPhoto()
        return alpha ? PNGRowReaderTests.withAlphaRamp(photo) : photo
    }

    /// Every row of `bytes` read through a `WebPRowReader`, `count` rows asked at a time; and
    /// the most of its output that was resident after any read.
    static func rows(_ bytes: [UInt8], count: Int) throws -> (PixelImage, peakResident: Int, boundedByBands: Bool) {
        try bytes.withUnsafeBytes { raw in
            let reader = try WebPRowReader(raw)
            var image = PixelImage(width: reader.size.width, height: reader.size.height)
            let stride = image.bytesPerRow
            var peak = 0
            try image.withUnsafeMutableBytes { out in
                var done = 0
                while done < reader.size.height {
                    done += try reader.read(
                        into: out.baseAddress! + done * stride, stride: stride, count: min(count, reader.size.height - done))
                    peak = max(peak, reader.outputResidentBytes)
                }
            }
            return (image, peak, reader.isBoundedByBands)
        }
    }

    static let kinds: [(String, lossless: Bool, alpha: Bool)] = [
        ("lossy", false, false), ("lossy with alpha", false, true), ("lossless", true, false), ("lossless with alpha", true, true),
    ]

    /// `kind`'s WebP of the photo, made on a thread of its own (seconds of encoding must not hold
    /// one of Swift's two cooperative threads).
    static func webp(_ kind: String) async throws -> [UInt8] {
        try #require(try await encodings.value[kind])
    }

    /// Every kind's WebP, encoded once for the suite.
    static let encodings = Task {
        try await offThePool("webp") { () throws -> [String: [UInt8]] in
            var encoded: [String: [UInt8]] = [:]
            for (kind, lossless, alpha) in kinds {
                encoded[kind] = try ImageEncoder.encode(photo(alpha: alpha), as: .webp, quality: lossless ? 100 : 80)
            }
            return encoded
        }
    }

    @Test(arguments: kinds.map(\.0))
    func rowsAreTheWholeDecodesBytes(_ kind: String) async throws {
        let (_, lossless, alpha) = try #require(Self.kinds.first { $0.0 == kind })
        let bytes = try await Self.webp(kind)
        let (whole, rows, bounded) = try await offThePool("rows") { () throws -> (PixelImage, PixelImage, Bool) in
            let (rows, _, bounded) = try Self.rows(bytes, count: 37)
            return (try ImageDecoder().decode(bytes), rows, bounded)
        }
        let difference = PixelDiff.compare(rows, whole)
        #expect(difference.max == 0, "\(kind): \(difference)")
        #expect(bounded == (!lossless && !alpha))
        bytes.withUnsafeBytes { raw in #expect(WebPRowReader.isBoundedByBands(raw) == bounded) }
    }

    /// The decoder's whole-image output is never resident at once: rows already read are handed
    /// back, and the file is given to libwebp a slice at a time.
    @Test func onlyABandOfTheOutputIsResident() async throws {
        let bytes = try await offThePool("webp") { () throws -> [UInt8] in
            let mosaic = try ImageDecoder().decode(try Mosaic.jpeg(PixelSize(width: 4000, height: 3000)))
            return try ImageEncoder.encode(mosaic, as: .webp, quality: 80)
        }
        let (rows, peak, whole) = try await offThePool("rows") { () throws -> (PixelImage, Int, PixelImage) in
            let (rows, peak, _) = try Self.rows(bytes, count: 64)
            return (rows, peak, try ImageDecoder().decode(bytes))
        }
        let output = rows.width * 4 * rows.height
        #expect(peak > 0 && peak <= output / 8, "peak resident output \(peak >> 10) KiB of \(output >> 10) KiB")
        #expect(PixelDiff.compare(rows, whole).max == 0)
    }

    @Test func truncatedAndAnimatedFiles() async throws {
        let bytes = try await Self.webp("lossy")
        let cut = Array(bytes.prefix(bytes.count / 2))
        #expect(throws: ImageDecodingError(.truncated, format: .webp)) { try Self.rows(cut, count: 64) }
        // Damaged in the middle: a typed error, never a crash (libwebp may also decode noise).
        var damaged = bytes
        for i in stride(from: bytes.count / 3, to: bytes.count / 3 + 64, by: 1) { damaged[i] = 0xFF }
        do { _ = try Self.rows(damaged, count: 64) } catch { #expect(error is ImageDecodingError) }

        let animated = Fixtures.bytes("webp/animated-96x64-3frames.webp")
        try animated.withUnsafeBytes { raw in
            #expect(throws: ImageDecodingError.self) { try WebPRowReader(raw) }
            let header = try ImageDecoder().readHeader(raw)
            let geometry = PyramidGeometry(size: header.size, tileSize: 64)
            #expect(
                try PyramidPass.feed(for: header, bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1 << 20)
                    == .wholeDecode)
        }
    }

    /// Past the whole decode's limit, a lossy WebP without alpha is still read in rows; a
    /// lossless or transparent one is refused with a reason (libwebp would hold it whole).
    @Test(arguments: kinds.map(\.0))
    func feedPastTheWholeDecodesLimit(_ kind: String) async throws {
        let (_, lossless, alpha) = try #require(Self.kinds.first { $0.0 == kind })
        let bytes = try await Self.webp(kind)
        try bytes.withUnsafeBytes { raw in
            let header = try ImageDecoder().readHeader(raw)
            let geometry = PyramidGeometry(size: header.size, tileSize: 256)
            #expect(
                try PyramidPass.feed(for: header, bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1 << 30)
                    == .webpRows)
            if !lossless && !alpha {
                #expect(
                    try PyramidPass.feed(for: header, bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1000)
                        == .webpRows)
            } else {
                let error = #expect(throws: ImageDecodingError.self) {
                    try PyramidPass.feed(for: header, bytes: raw, geometry: geometry, maxSourcePixels: 1 << 40, wholeDecodePixels: 1000)
                }
                #expect("\(error.map { $0 } as Any)".contains("lossless or transparent WebP"))
            }
        }
    }

    /// A lossy WebP over the whole decode's pixel limit is read in rows into its pyramid: every
    /// tile within 40 dB of the full decode resized.
    @Test func aPyramidReadsAWebPInRowsPastTheWholeDecodesLimit() async throws {
        let bytes = try await Self.webp("lossy")
        let reference = try await offThePool("decode") { try ImageDecoder().decode(bytes) }
        let setup = try TilePyramidsTests.Setup(bytes, name: "photo.webp", maxPixels: 1_000_000)
        let lowest = try await TilePyramidsTests.lowestPSNR(setup, key: "photo.webp", reference: reference)
        #expect(lowest.box >= 40, "lowest tile PSNR \(lowest) dB")
    }
}
