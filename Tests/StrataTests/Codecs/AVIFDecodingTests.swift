import Testing
@testable import Strata
import StrataTestSupport

/// AVIF files made by `avifenc` (libavif-bin) from the Fixtures at test time; references are
/// `avifdec`'s decodes of the same files.
@Suite("AVIF decoding")
struct AVIFDecodingTests {
    static let photo = "jpeg/cups-320x200-rgb-reference.jpg"

    @Test("8-bit 4:2:0: the pixels are avifdec's (≥ 40 dB) and close to the source")
    func eightBit() throws {
        let tools = FormatTools()
        let avif = try tools.avifenc(Fixtures.url(Self.photo).path, ["--min", "0", "--max", "12"])
        let header = try ImageDecoder().readHeader(avif)
        #expect(header.format == .avif)
        #expect(header.size == PixelSize(width: 320, height: 200))
        #expect(!header.hasAlpha && !header.isAnimated && header.orientation == 1)
        #expect(header.colour == .none, "no ICC, nclx unspecified or BT.709/sRGB")
        let image = try ImageDecoder().decode(avif)
        #expect(image.size == header.size)
        #expect(psnr(image, try tools.avifdec(avif)) >= 40)
        #expect(psnr(image, try decodeFixture(Self.photo)) >= 32)
        #expect(image.pixelBytes(x: 100, y: 100)[3] == 255)
    }

    @Test("10- and 12-bit files are reduced to 8 bits", arguments: [10, 12])
    func highBitDepth(depth: Int) throws {
        let tools = FormatTools()
        let avif = try tools.avifenc(Fixtures.url(Self.photo).path, ["-d", "\(depth)", "--min", "0", "--max", "12"])
        let image = try ImageDecoder().decode(avif)
        #expect(psnr(image, try tools.avifdec(avif)) >= 40)
        #expect(psnr(image, try decodeFixture(Self.photo)) >= 32)
    }

    @Test("alpha is premultiplied: transparent corners, an opaque centre, a soft edge")
    func alpha() throws {
        let tools = FormatTools()
        let source = try decodeFixture("webp/cups-640x400-alpha.webp")
        let avif = try tools.avifenc(tools.png(source), ["--min", "0", "--max", "10", "--minalpha", "0", "--maxalpha", "0"])
        let header = try ImageDecoder().readHeader(avif)
        #expect(header.hasAlpha)
        let image = try ImageDecoder().decode(avif)
        #expect(image.pixelBytes(x: 0, y: 0) == [0, 0, 0, 0])
        #expect(image.pixelBytes(x: 639, y: 399) == [0, 0, 0, 0])
        #expect(image.pixelBytes(x: 320, y: 200)[3] == 255)
        var partial = 0, overflows = 0
        image.withUnsafeBytes { raw in
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let o = y * image.bytesPerRow + 4 * x
                    let a = raw[o + 3]
                    if raw[o] > a || raw[o + 1] > a || raw[o + 2] > a { overflows += 1 }
                    if a > 0 && a < 255 { partial += 1 }
                }
            }
        }
        #expect(overflows == 0, "premultiplied: no channel above alpha")
        #expect(partial > 1000)
        let reference = try tools.avifdec(avif)
        #expect(psnr(image, reference) >= 40)
        #expect(PixelDiff.compare(image, reference).max <= 3, "alpha and colour within rounding of avifdec's")
    }

    /// The stored pixels of `orientation-N.jpg` with the `irot`/`imir` that EXIF orientation N
    /// means (ISO/IEC 23008-12: `irot` anticlockwise, then `imir`; mode 0 flips top and bottom).
    static let transforms: [Int: [String]] = [
        1: [], 2: ["--imir", "1"], 3: ["--irot", "2"], 4: ["--imir", "0"], 5: ["--irot", "1", "--imir", "0"],
        6: ["--irot", "3"], 7: ["--irot", "3", "--imir", "0"], 8: ["--irot", "1"],
    ]

    @Test("irot and imir are applied: each of the eight gives the upright reference", arguments: 1...8)
    func orientation(_ n: Int) throws {
        let tools = FormatTools()
        let stored = try storedPixels("jpeg/orientation-\(n).jpg")
        let avif = try tools.avifenc(tools.png(stored), ["--min", "0", "--max", "4", "-y", "444"] + Self.transforms[n]!)
        let header = try ImageDecoder().readHeader(avif)
        #expect(header.orientation == n)
        #expect(header.size == PixelSize(width: 160, height: 96))
        let image = try ImageDecoder().decode(avif)
        #expect(image.size == PixelSize(width: 160, height: 96))
        #expect(psnr(image, try decodeFixture("jpeg/orientation-reference-160x96.jpg")) >= 40)
        // libheif reads AVIF too and applies the transformations itself: the same picture.
        #expect(psnr(image, try tools.heifConvert(avif)) >= 40)
    }

    @Test("an embedded ICC profile is handed to the colour step")
    func iccProfile() throws {
        let tools = FormatTools()
        let profile = ColourFixtures.profile(.swappedMatrix)
        let icc = tools.write(profile, suffix: "icc")
        let avif = try tools.avifenc(Fixtures.url(Self.photo).path, ["--icc", icc])
        #expect(try ImageDecoder().readHeader(avif).colour == .profile(try ColourProfile(bytes: profile)))
    }

    @Test("nclx Display P3 primaries with the sRGB transfer become the Display P3 profile; PQ is not converted")
    func nclx() throws {
        let tools = FormatTools()
        let p3 = try tools.avifenc(Fixtures.url(Self.photo).path, ["--cicp", "12/13/6"])
        #expect(try ImageDecoder().readHeader(p3).colour == .profile(.displayP3))
        let srgb = try tools.avifenc(Fixtures.url(Self.photo).path, ["--cicp", "1/13/6"])
        #expect(try ImageDecoder().readHeader(srgb).colour == .none)
        let pq = try tools.avifenc(Fixtures.url(Self.photo).path, ["--cicp", "9/16/9"])
        guard case .unusable = try ImageDecoder().readHeader(pq).colour else {
            Issue.record("a PQ image should be unusable colour (taken as sRGB), not converted")
            return
        }
    }

    @Test("an image sequence decodes its first frame")
    func animated() throws {
        let tools = FormatTools()
        let first = try decodeFixture("webp/animated-first-frame-reference.png")
        var second = first
        second.withUnsafeMutableBytes { raw in
            for i in 0..<raw.count where i % 4 != 3 { raw[i] = 255 - raw[i] }
        }
        let avif = try tools.avifSequence([try tools.png(first), try tools.png(second)])
        let header = try ImageDecoder().readHeader(avif)
        #expect(header.isAnimated)
        let image = try ImageDecoder().decode(avif)
        #expect(psnr(image, first) >= 30)
        #expect(psnr(image, second) < 15)
    }

    @Test("a render through ImageRenderer orients and resizes")
    func render() throws {
        let tools = FormatTools()
        let stored = try storedPixels("jpeg/orientation-6.jpg")
        let avif = try tools.avifenc(tools.png(stored), Self.transforms[6]!)
        let image = try ImageRenderer().render(avif, request: RenderRequest(box: PixelSize(width: 80, height: 80)))
        #expect(image.size == PixelSize(width: 80, height: 48))
    }

    @Test("truncated, damaged and oversized files throw typed errors")
    func broken() throws {
        let tools = FormatTools()
        let avif = try tools.avifenc(Fixtures.url(Self.photo).path, ["--min", "0", "--max", "12"])
        let decoder = ImageDecoder()
        for cut in [40, avif.count / 3, avif.count * 2 / 3, avif.count - 10] {
            let error = decodingError { _ = try decoder.decode(Array(avif.prefix(cut))) }
            #expect(error?.format == .avif, "cut at \(cut): \(String(describing: error))")
            #expect(error.map { if case .truncated = $0.reason { true } else if case .corrupt = $0.reason { true } else { false } } == true)
        }
        #expect(decodingError { _ = try decoder.decode(Array(avif.prefix(avif.count - 10))) }?.reason == .truncated)
        var damaged = avif
        for i in stride(from: avif.count / 2, to: avif.count - 4, by: 7) { damaged[i] ^= 0x5A }
        _ = try? decoder.decode(damaged)  // pixels or a typed error; a crash fails the run
        // A bomb: the container claims 60000 × 60000.
        let bomb = try withISPE(avif, width: 60000, height: 60000)
        #expect(decodingError { _ = try decoder.readHeader(bomb) }?.reason == .tooLarge(pixels: 3_600_000_000, limit: 100_000_000))
        // Claims smaller than the AV1 frame: the decode refuses the disagreement.
        let small = try withISPE(avif, width: 32, height: 20)
        let error = decodingError { _ = try ImageDecoder(limits: DecodingLimits(maxPixels: 1000)).decode(small) }
        #expect(error?.format == .avif && error?.reason != nil)
        // The decoder keeps working after all of that.
        #expect(try decoder.decode(avif).size == PixelSize(width: 320, height: 200))
    }
}
