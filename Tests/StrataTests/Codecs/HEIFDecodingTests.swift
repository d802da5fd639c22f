import CHeif
import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// HEIC files made by `heif-enc` (libheif-examples) from the Fixtures at test time, or by
/// libheif's encoder (``HEIFWriter``) where `irot`/`imir` are needed; references are
/// `heif-convert`'s decodes of the same files.
@Suite("HEIC decoding")
struct HEIFDecodingTests {
    static let photo = "jpeg/cups-320x200-rgb-reference.jpg"

    @Test("the primary image's pixels are heif-convert's (≥ 40 dB) and close to the source")
    func pixels() throws {
        let tools = FormatTools()
        let heic = try tools.heifenc(Fixtures.url(Self.photo).path)
        let header = try ImageDecoder().readHeader(heic)
        #expect(header.format == .heic)
        #expect(header.size == PixelSize(width: 320, height: 200))
        #expect(!header.hasAlpha && header.orientation == 1 && header.thumbnails.isEmpty)
        let image = try ImageDecoder().decode(heic)
        #expect(psnr(image, try tools.heifConvert(heic)) >= 40)
        #expect(psnr(image, try decodeFixture(Self.photo)) >= 32)
        #expect(image.pixelBytes(x: 10, y: 10)[3] == 255)
    }

    @Test("libheif decodes HEVC with Strata's decoder (libde265 with worker threads), on one thread too")
    func strataDecoderFirst() throws {
        #expect(ImageDecoder.hevcDecodeThreads == min(Processors.online, 4))
        var descriptors = [OpaquePointer?](repeating: nil, count: 8)
        let count = descriptors.withUnsafeMutableBufferPointer {
            heif_get_decoder_descriptors(heif_compression_HEVC, $0.baseAddress, Int32($0.count))
        }
        #expect(count >= 2, "libheif's own libde265 plugin is still registered behind it")
        let first = try #require(descriptors[0].flatMap { heif_decoder_descriptor_get_id_name($0) })
        #expect(String(cString: first) == "strata-libde265")
        // The same pixels with workers and on the calling thread.
        let heic = try FormatTools().heifenc(Fixtures.url(Self.photo).path)
        let threaded = try ImageDecoder().decode(heic)
        let threads = ImageDecoder.hevcDecodeThreads
        ImageDecoder.hevcDecodeThreads = 1
        defer { ImageDecoder.hevcDecodeThreads = threads }
        #expect(try ImageDecoder().decode(heic).hasSamePixels(as: threaded))
    }

    @Test("libheif applies irot/imir: the header is the displayed size with orientation 1", arguments: 1...8)
    func orientation(_ n: Int) throws {
        let stored = try storedPixels("jpeg/orientation-\(n).jpg")
        let heic = try HEIFWriter.encode(stored, orientation: n, quality: nil)
        let header = try ImageDecoder().readHeader(heic)
        #expect(header.orientation == 1, "applied once, by libheif")
        #expect(header.size == PixelSize(width: 160, height: 96))
        let image = try ImageDecoder().decode(heic)
        #expect(psnr(image, try decodeFixture("jpeg/orientation-reference-160x96.jpg")) >= 40)
        #expect(psnr(image, try FormatTools().heifConvert(heic)) >= 40)
    }

    @Test("alpha is premultiplied and matches heif-convert's")
    func alpha() throws {
        let tools = FormatTools()
        let source = try decodeFixture("webp/cups-640x400-alpha.webp")
        let heic = try tools.heifenc(tools.png(source), ["-q", "95"])
        #expect(try ImageDecoder().readHeader(heic).hasAlpha)
        let image = try ImageDecoder().decode(heic)
        #expect(image.pixelBytes(x: 0, y: 0)[3] == 0)
        #expect(image.pixelBytes(x: 320, y: 200)[3] == 255)
        #expect(PixelDiff.channelsAboveAlpha(image) == 0)
        let reference = try tools.heifConvert(heic)
        #expect(psnr(image, reference) >= 40)
        #expect(PixelDiff.compare(image, reference).max <= 2)
    }

    @Test("a 10-bit file is reduced to 8 bits")
    func tenBit() throws {
        let tools = FormatTools()
        let source = try decodeFixture(Self.photo)
        let png16 = tools.write(ColourFixtures.png(source, sixteenBit: true, profile: nil), suffix: "png")
        let heic = try tools.heifenc(png16, ["-q", "95", "-b", "10"])
        let image = try ImageDecoder().decode(heic)
        #expect(psnr(image, try tools.heifConvert(heic)) >= 40)
        #expect(psnr(image, source) >= 32)
    }

    @Test("an embedded ICC profile is handed to the colour step")
    func iccProfile() throws {
        let tools = FormatTools()
        let profile = ColourFixtures.profile(.swappedMatrix)
        let png = tools.write(ColourFixtures.png(try decodeFixture(Self.photo), profile: profile), suffix: "png")
        let heic = try tools.heifenc(png)
        #expect(try ImageDecoder().readHeader(heic).colour == .profile(try ColourProfile(bytes: profile)))
    }

    @Test("a thumbnail that covers the minimum size is decoded instead of the primary image")
    func thumbnail() throws {
        let tools = FormatTools()
        let heic = try tools.heifenc(Fixtures.url("jpeg/eveningglow-1024x640-progressive.jpg").path, ["-q", "90", "-t", "256"])
        let decoder = ImageDecoder()
        let header = try decoder.readHeader(heic)
        #expect(header.size == PixelSize(width: 1024, height: 640))
        #expect(header.thumbnails == [PixelSize(width: 256, height: 160)])
        #expect(decoder.decodedSize(for: header, minimumSize: PixelSize(width: 200, height: 100)) == PixelSize(width: 256, height: 160))
        #expect(decoder.decodedSize(for: header, minimumSize: PixelSize(width: 300, height: 100)) == header.size)
        #expect(decoder.decodedSize(for: header, minimumSize: nil) == header.size)
        let small = try decoder.decode(heic, minimumSize: PixelSize(width: 256, height: 160))
        #expect(small.size == PixelSize(width: 256, height: 160))
        let full = try decoder.decode(heic)
        let reduced = ImageRenderer().resize(full, box: PixelSize(width: 256, height: 160), mode: .fit)
        // heif-enc's thumbnails are point-sampled (libheif 1.15 scales with nearest neighbour):
        // about 22 dB against a Lanczos reduction of the full image, against about 10 for
        // another picture (the same one upside down).
        #expect(psnr(small, reduced) >= 19, "the thumbnail is the same picture")
        var flipped = reduced
        flipped.withUnsafeMutableBytes { raw in
            for y in 0..<(reduced.height / 2) {
                for x in 0..<(reduced.bytesPerRow) {
                    raw.swapAt(y * reduced.bytesPerRow + x, (reduced.height - 1 - y) * reduced.bytesPerRow + x)
                }
            }
        }
        #expect(psnr(small, flipped) < 15)
        // Through the renderer (headroom 2): a 128 px render uses it, a 200 px one does not.
        let renderer = ImageRenderer()
        let (_, minimum) = renderer.plan(for: header, request: RenderRequest(box: PixelSize(width: 128, height: 128)))
        #expect(decoder.decodedSize(for: header, minimumSize: minimum) == PixelSize(width: 256, height: 160))
        #expect(
            try renderer.render(heic, request: RenderRequest(box: PixelSize(width: 128, height: 128))).size
                == PixelSize(width: 128, height: 80))
        let (_, larger) = renderer.plan(for: header, request: RenderRequest(box: PixelSize(width: 200, height: 200)))
        #expect(decoder.decodedSize(for: header, minimumSize: larger) == header.size)
    }

    @Test("a thumbnail without the primary image's alpha is not used")
    func thumbnailWithoutAlpha() throws {
        let tools = FormatTools()
        let heic = try tools.heifenc(
            tools.png(try decodeFixture("webp/cups-640x400-alpha.webp")), ["-q", "90", "-t", "160", "--no-thumb-alpha"])
        let header = try ImageDecoder().readHeader(heic)
        #expect(header.hasAlpha && header.thumbnails.isEmpty)
        let withAlpha = try tools.heifenc(tools.png(try decodeFixture("webp/cups-640x400-alpha.webp")), ["-q", "90", "-t", "160"])
        #expect(try ImageDecoder().readHeader(withAlpha).thumbnails == [PixelSize(width: 160, height: 100)])
    }

    @Test("a grid whose canvas is larger than its ispe is refused before libheif allocates it (a FuzzHEIF input)")
    func gridCanvasBeyondISPE() throws {
        let bytes = try Self.fuzzSeed("regression-grid-canvas-beyond-ispe")
        let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: 1_000_000))
        let header = try decoder.readHeader(bytes)
        #expect(header.size == PixelSize(width: 48, height: 32) && header.thumbnails == [PixelSize(width: 24, height: 16)])
        #expect(try decoder.decode(bytes).size == header.size)
        // The thumbnail item is a grid whose descriptor claims a canvas of about 2 GB.
        let error = decodingError { _ = try decoder.decode(bytes, minimumSize: PixelSize(width: 24, height: 16)) }
        #expect(error?.format == .heic, "\(String(describing: error))")
    }

    @Test("an elongated grid's square canvas is refused by the pixel limit, before libheif allocates it")
    func elongatedGridCanvas() throws {
        var bytes = try Self.fuzzSeed("regression-grid-canvas-beyond-ispe")
        let canvases = bytes.withUnsafeBytes { HEIFDerivedCanvases.canvases(in: $0) }
        // The primary grid, whose alpha is a grid of the same canvas.
        #expect(canvases[2] == .init(size: PixelSize(width: 48, height: 32), reaches: 48 * 32))
        #expect(canvases.values.contains { $0.size == PixelSize(width: 65535, height: 31675) }, "the thumbnail's")
        // The primary grid made 48×4096 (its `ispe`), claiming a 4096×4096 canvas: both sides
        // within libheif's per-side limit (4097), 85 times the pixels its header says.
        let ispe = try #require(Self.find(Array("ispe".utf8) + [0, 0, 0, 0, 0, 0, 0, 0x30, 0, 0, 0, 0x20], in: bytes))
        bytes[ispe + 14] = 0x10
        bytes[ispe + 15] = 0
        let descriptor = try #require(Self.find(Array("idat".utf8) + [0, 0, 0, 0, 0, 0x30, 0, 0x20], in: bytes)) + 8
        bytes.replaceSubrange(descriptor..<descriptor + 4, with: [0x10, 0, 0x10, 0])
        let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: 1_000_000))
        #expect(try decoder.readHeader(bytes).size == PixelSize(width: 48, height: 4096))
        let error = decodingError { _ = try decoder.decode(bytes) }
        #expect(error?.reason == .tooLarge(pixels: 4096 * 4096, limit: 1_000_000), "\(String(describing: error))")
    }

    @Test("a grid that is its own tile is refused before libheif decodes it (a FuzzHEIF input that aborted the process)")
    func gridThatIsItsOwnTile() throws {
        let bytes = try Self.fuzzSeed("regression-grid-is-its-own-tile")
        let canvases = bytes.withUnsafeBytes { HEIFDerivedCanvases.canvases(in: $0) }
        #expect(canvases[2]?.nesting == .some(nil), "\(canvases)")
        Self.expectRefusedAsItsOwnInput(bytes, decoder: ImageDecoder())
    }

    @Test("derived images nested deeper than an overlay of grids, or in a cycle, are refused")
    func derivedNesting() {
        func dimg(_ from: UInt8, _ to: [UInt8]) -> [UInt8] { Self.box("dimg", [0, from, 0, UInt8(to.count)] + to.flatMap { [0, $0] }) }
        // 1 overlay → 2 grid → 3 grid → 4 hvc1 (1 is three deep, 2 two); 5 grid → 6 grid → 5.
        let items: [(UInt8, String)] = [(1, "iovl"), (2, "grid"), (3, "grid"), (4, "hvc1"), (5, "grid"), (6, "grid")]
        let iinf = Self.box("iinf", [0, 0, 0, 0, 0, UInt8(items.count)] + items.flatMap { Self.infe($0.0, $0.1) })
        let iref = Self.box("iref", [0, 0, 0, 0] + dimg(1, [2]) + dimg(2, [3, 4]) + dimg(3, [4]) + dimg(5, [6]) + dimg(6, [5]))
        let file = Self.box("ftyp", Array("heicmif1".utf8)) + Self.box("meta", [0, 0, 0, 0] + iinf + iref)
        let canvases = file.withUnsafeBytes { HEIFDerivedCanvases.canvases(in: $0) }
        #expect(canvases[1]?.nesting == 3 && canvases[2]?.nesting == 2, "\(canvases)")
        #expect(canvases[3] == nil, "a grid of coded images with no readable descriptor has nothing to check")
        #expect(canvases[5]?.nesting == .some(nil) && canvases[6]?.nesting == .some(nil), "\(canvases)")
        #expect((try? HEIFDerivedCanvases.check(item: 2, of: canvases, maxPixels: 100)) != nil)
        for refused: UInt32 in [1, 5, 6] {
            #expect(throws: ImageDecodingError.self) { try HEIFDerivedCanvases.check(item: refused, of: canvases, maxPixels: 100) }
        }
    }

    @Test(
        "an image whose alpha is a grid of the image itself is refused before libheif decodes it (FuzzHEIF: out of memory)",
        arguments: [
            "regression-alpha-is-a-grid-of-its-image",
            // The same, with the size of the `dimg` reference before the `auxl` one overwritten
            // (libheif reads references one after another, whatever their sizes say).
            "regression-reference-box-size-disagrees",
        ])
    func alphaThatIsAGridOfItsImage(seed: String) throws {
        let bytes = try Self.fuzzSeed(seed)
        // The primary grid 2 (tile 1) has the alpha image 4, a grid whose tile is 2.
        let canvases = bytes.withUnsafeBytes { HEIFDerivedCanvases.canvases(in: $0) }
        #expect(canvases[2]?.nesting == .some(nil) && canvases[4]?.nesting == .some(nil), "\(canvases)")
        Self.expectRefusedAsItsOwnInput(bytes, decoder: ImageDecoder(limits: DecodingLimits(maxPixels: 1_000_000)))
    }

    /// `bytes` decode to a corrupt-file error saying an image is among its own inputs.
    static func expectRefusedAsItsOwnInput(_ bytes: [UInt8], decoder: ImageDecoder) {
        let error = decodingError { _ = try decoder.decode(bytes) }
        guard case .corrupt(let message)? = error?.reason else {
            Issue.record("expected a corrupt-file error, got \(String(describing: error))")
            return
        }
        #expect(message.contains("own inputs"), "\(message)")
    }

    @Test("what an image's alpha decodes counts: a cycle through auxl, and an alpha grid's canvas against the limit")
    func auxiliaryImagesAreFollowed() {
        func reference(_ type: String, _ from: UInt8, _ to: [UInt8]) -> [UInt8] {
            Self.box(type, [0, from, 0, UInt8(to.count)] + to.flatMap { [0, $0] })
        }
        // 1 hvc1 whose alpha is 2, a grid of 3 (hvc1); 4 hvc1 whose alpha is 5, whose alpha is 4.
        let items: [(UInt8, String)] = [(1, "hvc1"), (2, "grid"), (3, "hvc1"), (4, "hvc1"), (5, "hvc1")]
        let iinf = Self.box("iinf", [0, 0, 0, 0, 0, UInt8(items.count)] + items.flatMap { Self.infe($0.0, $0.1) })
        let iref = Self.box(
            "iref",
            [0, 0, 0, 0] + reference("auxl", 2, [1]) + reference("dimg", 2, [3]) + reference("auxl", 5, [4])
                + reference("auxl", 4, [5]) + reference("thmb", 3, [1]))
        // The alpha grid's descriptor in idat: 1×1 tiles, 4000×3000.
        let grid: [UInt8] = [0, 0, 0, 0, 0x0F, 0xA0, 0x0B, 0xB8]
        let iloc: [UInt8] = [1, 0, 0, 0, 0x44, 0x00, 0, 1] + [0, 2, 0, 1, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, 8]
        let file =
            Self.box("ftyp", Array("heicmif1".utf8))
            + Self.box("meta", [0, 0, 0, 0] + iinf + iref + Self.box("iloc", iloc) + Self.box("idat", grid))
        let canvases = file.withUnsafeBytes { HEIFDerivedCanvases.canvases(in: $0) }
        #expect(canvases[1] == .init(size: PixelSize(width: 0, height: 0), nesting: 1, reaches: 12_000_000))
        #expect(canvases[3] == nil, "a tile decodes nothing more (a thumbnail reference is not followed)")
        #expect(canvases[4]?.nesting == .some(nil) && canvases[5]?.nesting == .some(nil), "\(canvases)")
        #expect((try? HEIFDerivedCanvases.check(item: 1, of: canvases, maxPixels: 12_000_000)) != nil)
        #expect(throws: ImageDecodingError.self) { try HEIFDerivedCanvases.check(item: 1, of: canvases, maxPixels: 11_999_999) }
        #expect(throws: ImageDecodingError.self) { try HEIFDerivedCanvases.check(item: 4, of: canvases, maxPixels: 100) }
        #expect((try? HEIFDerivedCanvases.check(item: 3, of: canvases, maxPixels: 1)) != nil)
    }

    @Test("grid and overlay canvases are read from idat and from the file, 16- and 32-bit")
    func derivedCanvasScan() {
        // Items: 1 a grid in idat (16-bit sides), 2 an overlay in the file (32-bit sides), 3 an hvc1.
        let grid: [UInt8] = [0, 0, 1, 1, 0x01, 0x00, 0x00, 0xC8]  // 256×200
        let overlay: [UInt8] = [0, 1] + [UInt8](repeating: 0xFF, count: 8) + [0, 1, 0, 0, 0, 0, 0x80, 0]  // 65536×32768
        let ftyp = Self.box("ftyp", Array("heicmif1".utf8))
        func meta(overlayAt offset: Int) -> [UInt8] {
            let iinf = Self.box("iinf", [0, 0, 0, 0, 0, 3] + Self.infe(1, "grid") + Self.infe(2, "iovl") + Self.infe(3, "hvc1"))
            // Version 1, offset and length 4 bytes, no base offset or index; 2 items.
            var iloc: [UInt8] = [1, 0, 0, 0, 0x44, 0x00, 0, 2]
            iloc += [0, 1, 0, 1, 0, 0, 0, 1] + [0, 0, 0, 0, 0, 0, 0, UInt8(grid.count)]  // method 1
            iloc += [0, 2, 0, 0, 0, 0, 0, 1] + [0, 0, UInt8(offset >> 8), UInt8(offset & 0xFF), 0, 0, 0, UInt8(overlay.count)]
            let hdlr = Self.box("hdlr", [UInt8](repeating: 0, count: 24))
            return Self.box("meta", [0, 0, 0, 0] + hdlr + iinf + Self.box("iloc", iloc) + Self.box("idat", grid))
        }
        let offset = ftyp.count + meta(overlayAt: 0).count + 8
        let file = ftyp + meta(overlayAt: offset) + Self.box("mdat", overlay)
        let canvases = file.withUnsafeBytes { HEIFDerivedCanvases.canvases(in: $0) }
        #expect(
            canvases == [
                1: .init(size: PixelSize(width: 256, height: 200)),
                2: .init(size: PixelSize(width: 65536, height: 32768)),
            ])
        // The grid is within a limit of 100 000; the overlay's own canvas is not.
        #expect((try? HEIFDerivedCanvases.check(item: 1, of: canvases, maxPixels: 100_000)) != nil)
        #expect((try? HEIFDerivedCanvases.check(item: 3, of: canvases, maxPixels: 1)) != nil, "not derived")
        #expect(throws: ImageDecodingError.self) { try HEIFDerivedCanvases.check(item: 2, of: canvases, maxPixels: (1 << 31) - 1) }
        // Cut anywhere, the scan never traps and finds no more than the whole file has.
        for cut in 0..<file.count {
            let found = Array(file.prefix(cut)).withUnsafeBytes { HEIFDerivedCanvases.canvases(in: $0) }
            #expect(found.count <= 2)
        }
    }

    /// A FuzzHEIF seed (`Fuzz/Corpus/FuzzHEIF/`), most of them regression inputs.
    static func fuzzSeed(_ name: String) throws -> [UInt8] {
        let url = Fixtures.directory.deletingLastPathComponent().appendingPathComponent("Fuzz/Corpus/FuzzHEIF/" + name)
        return try [UInt8](Data(contentsOf: url))
    }

    /// An ISO BMFF box of `type` around `payload`.
    static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        let size = UInt32(8 + payload.count)
        return [UInt8(size >> 24), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)] + Array(type.utf8) + payload
    }

    /// An `infe` (version 2) of item `id` and `type`.
    static func infe(_ id: UInt8, _ type: String) -> [UInt8] { box("infe", [2, 0, 0, 0, 0, id, 0, 0] + Array(type.utf8)) }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        return (0...haystack.count - needle.count).first { haystack[$0..<$0 + needle.count].elementsEqual(needle) }
    }

    @Test("truncated, damaged and oversized files throw typed errors")
    func broken() throws {
        let tools = FormatTools()
        let heic = try tools.heifenc(Fixtures.url(Self.photo).path)
        let decoder = ImageDecoder()
        for cut in [40, heic.count / 3, heic.count * 2 / 3, heic.count - 10] {
            let error = decodingError { _ = try decoder.decode(Array(heic.prefix(cut))) }
            #expect(error?.format == .heic, "cut at \(cut): \(String(describing: error))")
        }
        var damaged = heic
        for i in stride(from: heic.count / 2, to: heic.count - 4, by: 7) { damaged[i] ^= 0x5A }
        _ = try? decoder.decode(damaged)  // pixels or a typed error; a crash fails the run
        let bomb = try withISPE(heic, width: 60000, height: 60000)
        #expect(decodingError { _ = try decoder.readHeader(bomb) }?.reason == .tooLarge(pixels: 3_600_000_000, limit: 100_000_000))
        #expect(try decoder.decode(heic).size == PixelSize(width: 320, height: 200))
    }
}
