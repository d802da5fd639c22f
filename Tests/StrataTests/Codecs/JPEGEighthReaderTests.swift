import CTurboJPEG
import Testing
@testable import Strata
import StrataTestSupport

/// The 1/8-scale reader whose Huffman decoding runs on several threads: libjpeg's own pixels
/// where libjpeg's 1/8 scale is exact (luma, 4:4:4, grayscale), the block means of a full
/// decode elsewhere, the same bytes however the data is cut into parts, and typed errors for
/// broken data.
@Suite struct JPEGEighthReaderTests {
    struct Read {
        var image: PixelImage
        var inStep: Int64
        var speculative: Int
    }

    /// The reader's image of `bytes`, in rounds of `parts` parts of `partBytes` bytes each;
    /// `nil` when the reader does not take the file.
    static func eighth(_ bytes: [UInt8], parts: Int = 1, partBytes: Int = 1 << 20) throws -> Read? {
        try bytes.withUnsafeBytes { raw in
            guard let reader = try JPEGEighthReader(raw, partBytes: partBytes) else { return nil }
            let size = reader.size
            var image = PixelImage(width: size.width, height: size.height)
            let stride = image.bytesPerRow
            var y = 0
            try image.withUnsafeMutableBytes { out in
                try reader.read(parts: parts, forkJoin: .dispatch) { rows, rowStride, count in
                    for row in 0..<count {
                        (out.baseAddress! + (y + row) * stride).copyMemory(from: rows + row * rowStride, byteCount: size.width * 4)
                    }
                    y += count
                }
            }
            #expect(y == size.height)
            return Read(image: image, inStep: reader.partsInStep, speculative: reader.speculativeParts)
        }
    }

    /// libjpeg's own decode at 1/8 scale.
    static func libjpeg(_ bytes: [UInt8]) throws -> PixelImage {
        try bytes.withUnsafeBytes { raw in
            let jpeg = JPEGRowDecompressor()
            let size = try #require(try jpeg.start(raw, factor: JPEGScalingFactor(1, 8)))
            var image = PixelImage(width: size.width, height: size.height)
            let stride = image.bytesPerRow
            try image.withUnsafeMutableBytes { out in
                var y = 0
                while y < size.height {
                    y += try jpeg.read(into: out.baseAddress! + y * stride, stride: stride, count: size.height - y)
                }
            }
            try jpeg.finish()
            return image
        }
    }

    /// The means of the 8 × 8 blocks of a full decode (the blocks at the right and bottom
    /// edges cut to the image).
    static func blockMeans(_ bytes: [UInt8]) throws -> PixelImage {
        let full = try ImageDecoder().decode(bytes)
        let size = PixelSize(width: (full.width + 7) / 8, height: (full.height + 7) / 8)
        var means = PixelImage(width: size.width, height: size.height)
        let stride = means.bytesPerRow
        full.withUnsafeBytes { source in
            means.withUnsafeMutableBytes { out in
                for by in 0..<size.height {
                    for bx in 0..<size.width {
                        var sums = [0, 0, 0, 0], n = 0
                        for y in by * 8..<min(by * 8 + 8, full.height) {
                            for x in bx * 8..<min(bx * 8 + 8, full.width) {
                                for c in 0..<4 { sums[c] += Int(source[y * full.bytesPerRow + x * 4 + c]) }
                                n += 1
                            }
                        }
                        for c in 0..<4 { out[by * stride + bx * 4 + c] = UInt8((sums[c] + n / 2) / n) }
                    }
                }
            }
        }
        return means
    }

    /// `photo` re-encoded with `subsampling` at quality 85.
    static func encoded(_ photo: PixelImage, _ subsampling: TJSAMP) throws -> [UInt8] {
        try photo.withUnsafeBytes { raw in
            try TurboJPEGCompressor().compress(
                raw.baseAddress!, size: photo.size, pitch: photo.bytesPerRow, pixelFormat: TJPF_BGRX, subsampling: subsampling,
                quality: 85)
        }
    }

    @Test(arguments: ["jpeg/kite-800x500-gray.jpg", "jpeg/path-2560x1600.jpg", "jpeg/kite-800x500-gray-restart.jpg"])
    func grayscaleAnd444AreLibjpegsOwnPixelsHoweverTheDataIsCut(_ name: String) throws {
        let bytes = Fixtures.bytes(name)
        let reference = try Self.libjpeg(bytes)
        let whole = try #require(try Self.eighth(bytes))
        #expect(whole.image.hasSamePixels(as: reference), "one part")
        for (parts, partBytes) in [(2, 1 << 20), (2, 4096), (3, 1000), (5, 333)] {
            let cut = try #require(try Self.eighth(bytes, parts: parts, partBytes: partBytes))
            #expect(cut.image.hasSamePixels(as: reference), "\(parts) parts of \(partBytes) bytes")
            if partBytes < bytes.count / 4 {
                // Speculation pays: most parts fall in step with the true decode.
                #expect(cut.inStep * 2 > cut.speculative, "\(cut.inStep) of \(cut.speculative) parts in step")
            }
        }
    }

    @Test(arguments: [TJSAMP_420, TJSAMP_422, TJSAMP_440])
    func subsampledChromaIsTheMeanOfItsQuadrant(_ subsampling: TJSAMP) throws {
        let photo = try ImageDecoder().decode(Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg"))
        let bytes = try Self.encoded(photo, subsampling)
        let read = try #require(try Self.eighth(bytes))
        let means = try Self.blockMeans(bytes)
        #expect(psnr(read.image, means) >= 40, "against the block means of a full decode")
        #expect(psnr(read.image, try Self.libjpeg(bytes)) >= 38, "against libjpeg's 1/8 scale")
        let cut = try #require(try Self.eighth(bytes, parts: 3, partBytes: 2000))
        #expect(cut.image.hasSamePixels(as: read.image))
        #expect(cut.inStep * 2 > cut.speculative, "\(cut.inStep) of \(cut.speculative) parts in step")
    }

    @Test func restartMarkersAreFollowedAndCutAt() throws {
        let bytes = Fixtures.bytes("jpeg/fallenleaf-1024x640-420-restart.jpg")
        let read = try #require(try Self.eighth(bytes))
        #expect(psnr(read.image, try Self.blockMeans(bytes)) >= 40)
        for (parts, partBytes) in [(2, 3000), (4, 700)] {
            let cut = try #require(try Self.eighth(bytes, parts: parts, partBytes: partBytes))
            #expect(cut.image.hasSamePixels(as: read.image), "\(parts) parts of \(partBytes) bytes")
            // A part starts after a restart marker, where the state is known: always in step.
            #expect(cut.inStep == cut.speculative, "\(cut.inStep) of \(cut.speculative) parts in step")
        }
    }

    @Test func otherJPEGsAreLeftToLibjpeg() throws {
        let photo = try ImageDecoder().decode(Fixtures.bytes("jpeg/kite-800x500-gray.jpg"))
        for name in ["jpeg/eveningglow-1024x640-progressive.jpg", "jpeg/cups-320x200-cmyk-plain.jpg", "jpeg/cups-320x200-ycck-adobe.jpg"] {
            #expect(try Self.eighth(Fixtures.bytes(name)) == nil, "\(name)")
        }
        #expect(try Self.eighth(Self.encoded(photo, TJSAMP_411)) == nil, "4:1:1 (a sampling factor of 4)")
    }

    @Test func brokenDataIsATypedErrorWhereverItIsRead() throws {
        let bytes = Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg")
        // Cut short (an end-of-image marker where the data stops), and with a stray marker
        // half-way: the data ends before the last MCU.
        var truncated = Array(bytes[..<(bytes.count * 3 / 5)])
        truncated += [0xFF, 0xD9]
        var marker = bytes
        marker.replaceSubrange(bytes.count / 2..<bytes.count / 2 + 2, with: [0xFF, 0xD9])
        for broken in [truncated, marker] {
            for (parts, partBytes) in [(1, 1 << 20), (3, 1500)] {
                #expect(throws: ImageDecodingError.self) { try Self.eighth(broken, parts: parts, partBytes: partBytes) }
            }
        }
        // A header libjpeg cannot read.
        #expect(throws: ImageDecodingError.self) { try Self.eighth(Array(bytes[..<40])) }
    }
}
