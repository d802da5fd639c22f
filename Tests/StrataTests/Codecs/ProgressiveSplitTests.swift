import CTurboJPEG
import Testing

@testable import Strata
import StrataTestSupport

/// A progressive JPEG decoded on two threads (``ProgressiveJPEGSplit``): the same bytes as the
/// whole-file decode at every scale and chroma subsampling, and the whole-file decode's result
/// or error wherever the split does not apply or a half fails.
@Suite struct ProgressiveSplitTests {
    /// A decoder that splits progressive files (whatever the other tests running beside it
    /// decode), and one that never does.
    static func decoders() -> (split: ImageDecoder, whole: ImageDecoder) {
        let split = ImageDecoder()
        split.splitsProgressiveJPEG = true
        split.splitsOnlyWithIdleCores = false
        return (split, ImageDecoder())
    }

    /// The top-left `size` of the path photo's 1/2 decode, encoded progressive (libjpeg's default
    /// scan script) at `subsampling`. Odd sizes leave partial MCUs at the edges.
    static func progressive(_ subsampling: TJSAMP, size: PixelSize, quality: Int = 88) throws -> [UInt8] {
        let photo = try decodeFixture("jpeg/path-2560x1600.jpg", minimumSize: PixelSize(width: 1280, height: 800))
        return try photo.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(ImageEncodingError) in
            try TurboJPEGCompressor().compress(
                raw.baseAddress!, size: size, pitch: photo.bytesPerRow, pixelFormat: TJPF_BGRX,
                subsampling: subsampling, quality: quality, progressive: true)
        }
    }

    /// Decodes `bytes` at `factor` with both decoders; expects the same outcome, and the split
    /// decoder to have split (`splits`) or not.
    static func expectSameDecode(_ bytes: [UInt8], factor: JPEGScalingFactor, splits: Bool, _ label: String) throws {
        let (split, whole) = decoders()
        let header = try whole.readHeader(bytes)
        let minimum = factor.scaled(header.codedSize)
        let a = try whole.decode(bytes, minimumSize: minimum)
        let b = try split.decode(bytes, minimumSize: minimum)
        #expect(b.size == minimum, "\(label): decoded at \(factor)")
        #expect(split.lastDecodeWasSplit == splits, "\(label): split")
        #expect(!whole.lastDecodeWasSplit)
        let diff = PixelDiff.compare(a, b)
        #expect(diff.max == 0, "\(label) at \(factor): max difference \(diff.max)")
    }

    @Test(
        "the same bytes as the whole-file decode, at every scale and subsampling",
        arguments: [TJSAMP_444, TJSAMP_422, TJSAMP_420, TJSAMP_440, TJSAMP_411])
    func sameBytes(subsampling: TJSAMP) throws {
        for size in [PixelSize(width: 333, height: 211), PixelSize(width: 64, height: 40), PixelSize(width: 17, height: 9)] {
            let bytes = try Self.progressive(subsampling, size: size)
            #expect(bytes.withUnsafeBytes { ProgressiveJPEGSplit.splits($0) })
            for factor in JPEGScalingFactor.powersOfTwo {
                try Self.expectSameDecode(bytes, factor: factor, splits: true, "\(subsampling) \(size)")
            }
        }
    }

    @Test func theProgressiveFixtureDecodesTheSameAtEveryScale() throws {
        let bytes = Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg")
        for factor in JPEGScalingFactor.powersOfTwo {
            try Self.expectSameDecode(bytes, factor: factor, splits: true, "eveningglow")
        }
    }

    @Test func baselineGrayAndRotatedFilesAreNotSplit() throws {
        try Self.expectSameDecode(Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg"), factor: .init(1, 4), splits: false, "baseline")
        let photo = try decodeFixture("jpeg/kite-800x500-gray.jpg")
        let gray = try PixelConversion.convert(photo, to: .gray8).withUnsafeBytes {
            (raw: UnsafeRawBufferPointer) throws(ImageEncodingError) in
            try TurboJPEGCompressor().compress(
                raw.baseAddress!, size: photo.size, pitch: PixelLayout.bytesPerRow(width: photo.width, style: .gray8),
                pixelFormat: TJPF_GRAY, subsampling: TJSAMP_GRAY, quality: 85, progressive: true)
        }
        #expect(!gray.withUnsafeBytes { ProgressiveJPEGSplit.splits($0) })
        try Self.expectSameDecode(gray, factor: .one, splits: false, "gray progressive")
        // EXIF orientation 6: decoded through the scratch buffer and turned, not split.
        let (split, whole) = Self.decoders()
        let rotated = Fixtures.bytes("jpeg/coldripple-1024x640-orientation6.jpg")
        #expect(PixelDiff.compare(try split.decode(rotated), try whole.decode(rotated)).max == 0)
        #expect(!split.lastDecodeWasSplit)
    }

    @Test func aTruncatedFileGivesTheWholeDecodesError() throws {
        let bytes = Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg")
        let cut = Array(bytes.prefix(bytes.count * 6 / 10))
        #expect(!cut.withUnsafeBytes { ProgressiveJPEGSplit.splits($0) })
        let (split, whole) = Self.decoders()
        let expected = decodingError { _ = try whole.decode(cut) }
        #expect(expected != nil)
        #expect(decodingError { _ = try split.decode(cut) } == expected)
        #expect(!split.lastDecodeWasSplit)
        // The decoder goes on: the next good file splits.
        try Self.expectSameDecode(bytes, factor: .init(1, 2), splits: true, "after a truncated file")
    }

    /// Corrupt bytes in the middle of a chroma AC scan, then of a luma one: a half fails and the
    /// whole-file decode decides (here, libjpeg's warning about corrupt data is an error).
    @Test(arguments: [true, false])
    func corruptScanDataGivesTheWholeDecodesOutcome(inChroma: Bool) throws {
        var bytes = Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg")
        let scans = Self.acScans(bytes)
        let scan = try #require(scans.first { ($0.component != 1) == inChroma })
        for i in stride(from: scan.range.lowerBound + 40, to: scan.range.lowerBound + 240, by: 7) where bytes[i] != 0xFF {
            bytes[i] = bytes[i] == 0xFE ? 0x00 : bytes[i] ^ 0x5A == 0xFF ? 0x11 : bytes[i] ^ 0x5A
        }
        let (split, whole) = Self.decoders()
        let header = try whole.readHeader(bytes)
        var wholeImage = PixelImage(uninitializedWidth: header.size.width, height: header.size.height, style: .bgra32Premultiplied)
        var splitImage = wholeImage
        let wholeError = decodingError { try whole.decode(bytes, minimumSize: nil, into: &wholeImage) }
        let splitError = decodingError { try split.decode(bytes, minimumSize: nil, into: &splitImage) }
        #expect(splitError == wholeError)
        if wholeError == nil { #expect(PixelDiff.compare(wholeImage, splitImage).max == 0) }
        #expect(!split.lastDecodeWasSplit)
    }

    /// A file whose chroma keeps its AC scans' last bits to itself (their refinement scans
    /// dropped): libjpeg smooths such a file's blocks, the halves could not, so it is not split.
    @Test func aFileWithIncompleteCoefficientsIsNotSplit() throws {
        let bytes = Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg")
        let refinements = Self.acScans(bytes).filter { $0.component != 1 && $0.refines }
        #expect(refinements.count == 2)
        var dropped: [UInt8] = []
        var at = 0
        for scan in refinements {
            dropped += bytes[at..<scan.range.lowerBound]
            at = scan.range.upperBound
        }
        dropped += bytes[at...]
        #expect(!dropped.withUnsafeBytes { ProgressiveJPEGSplit.splits($0) })
        try Self.expectSameDecode(dropped, factor: .one, splits: false, "incomplete chroma")
    }

    @Test func aRendererWithTwoThreadsSplitsAndMatchesOneThread() throws {
        let bytes = Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg")
        let one = ImageRenderer(resampleThreads: 1)
        let two = ImageRenderer(resampleThreads: 2)
        #expect(!one.decoder.splitsProgressiveJPEG && two.decoder.splitsProgressiveJPEG)
        two.decoder.splitsOnlyWithIdleCores = false
        for box in [PixelSize(width: 256, height: 256), PixelSize(width: 700, height: 700), PixelSize(width: 1024, height: 1024)] {
            let request = RenderRequest(box: box)
            let a = try one.render(bytes, request: request)
            let b = try two.render(bytes, request: request)
            #expect(two.decoder.lastDecodeWasSplit, "\(box)")
            #expect(!two.lastRenderOverlapped, "a split file is not decoded in rows")
            #expect(PixelDiff.compare(a, b).max == 0, "\(box)")
        }
    }

    /// With every core decoding, a split would cost throughput: the file is decoded whole.
    @Test func noSplitWithoutAnIdleCore() throws {
        let bytes = Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg")
        let decoder = ImageDecoder()
        decoder.splitsProgressiveJPEG = true
        #expect(decoder.splitsOnlyWithIdleCores)
        let busy = ProgressiveJPEGSplit.processors
        #expect(!ProgressiveJPEGSplit.hasIdleCores(pending: busy))
        // As if `busy` more decodes were running (tests beside this one only split less).
        ProgressiveJPEGSplit.decodesInFlight.add(busy, ordering: .relaxed)
        defer { ProgressiveJPEGSplit.decodesInFlight.subtract(busy, ordering: .relaxed) }
        let image = try decoder.decode(bytes)
        #expect(!decoder.lastDecodeWasSplit)
        let header = try decoder.readHeader(bytes)
        #expect(bytes.withUnsafeBytes { decoder.decodesJPEGInRows($0, header: header) }, "decoded in rows instead")
        #expect(PixelDiff.compare(image, try ImageDecoder().decode(bytes)).max == 0)
    }

    /// The AC scans of a progressive file: each one's byte range (SOS marker to the next
    /// marker), component id, and whether it refines earlier bits.
    static func acScans(_ bytes: [UInt8]) -> [(range: Range<Int>, component: UInt8, refines: Bool)] {
        var scans: [(range: Range<Int>, component: UInt8, refines: Bool)] = []
        var i = 2
        while i + 4 <= bytes.count, bytes[i] == 0xFF, bytes[i + 1] != 0xD9 {
            let length = Int(bytes[i + 2]) << 8 | Int(bytes[i + 3])
            guard bytes[i + 1] == 0xDA else {
                i += 2 + length
                continue
            }
            let count = Int(bytes[i + 4])
            let first = bytes[i + 5 + 2 * count], refines = bytes[i + 7 + 2 * count] >> 4 != 0
            var end = i + 2 + length
            while end + 1 < bytes.count, !(bytes[end] == 0xFF && bytes[end + 1] != 0 && !(0xD0...0xD7).contains(bytes[end + 1])) {
                end += 1
            }
            if first != 0 { scans.append((i..<end, bytes[i + 5], refines)) }
            i = end
        }
        return scans
    }
}
