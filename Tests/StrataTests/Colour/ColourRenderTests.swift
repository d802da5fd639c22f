import CTurboJPEG
import Testing
import StrataTestSupport

@testable import Strata

/// Strata's renders of tagged images against Little CMS conversions of the whole images,
/// resized the same way, for each input format and kind of profile.
@Suite("Colour: renders match Little CMS")
struct ColourRenderTests {
    static let size = PixelSize(width: 640, height: 400)
    /// 150 px: JPEGs decode at 1/2 (shrink-on-load), then a Lanczos reduce.
    static let box = PixelSize(width: 150, height: 150)

    static let cases: [(ImageFormat, ColourFixtures.Kind)] = [
        (.jpeg, .swappedMatrix), (.jpeg, .tintedLUT), (.jpeg, .linearGray), (.jpeg, .cmykLUT),
        (.webp, .swappedMatrix), (.webp, .tintedLUT),
        (.png, .swappedMatrix), (.png, .tintedLUT), (.png, .linearGray),
        (.tiff, .swappedMatrix), (.tiff, .tintedLUT), (.tiff, .linearGray),
        (.jp2, .swappedMatrix), (.jp2, .tintedLUT), (.jp2, .linearGray),
        (.jxl, .swappedMatrix), (.jxl, .tintedLUT), (.jxl, .linearGray),
    ]

    /// The encoded test image of `kind` in `format`, tagged with `profile` (nil: untagged).
    static func encoded(_ format: ImageFormat, _ kind: ColourFixtures.Kind, profile: [UInt8]?) throws -> [UInt8] {
        let tag = try profile.map { try ColourProfile(bytes: $0) }
        if kind.isCMYK {
            let jpeg = ColourFixtures.cmykJPEG(ColourFixtures.cmykPhoto(size), size: size)
            return tag.map { EmbeddedProfiles.embed($0, inJPEG: jpeg) } ?? jpeg
        }
        let photo = ColourFixtures.photo(size, gray: kind.isGray)
        switch format {
        case .jpeg:
            let source = kind.isGray ? PixelConversion.convert(photo, to: .gray8) : photo
            let jpeg = try ImageEncoder.encode(source, as: .jpeg, quality: 95)
            return tag.map { EmbeddedProfiles.embed($0, inJPEG: jpeg) } ?? jpeg
        case .webp:
            return try ImageEncoder.encode(photo, as: .webp, quality: 100, profile: tag)
        case .png:
            return ColourFixtures.png(photo, gray: kind.isGray, profile: profile)
        case .tiff:
            return TIFFWriter.tiff(photo, kind.isGray ? .gray : .rgb, icc: profile)
        case .jp2:
            // Lossless (opj_compress's default), its colr box made an ICC one (JP2Boxes).
            let tools = FormatTools()
            let jp2 = try JP2DecodingTests.compress(TIFFWriter.tiff(photo, kind.isGray ? .gray : .rgb), [], tools: tools)
            return try profile.map { try JP2Boxes.withICC(jp2, profile: $0) } ?? jp2
        case .jxl:
            // Lossless (`cjxl -d 0`), which keeps the PNG's ICC profile as the original's.
            let tools = FormatTools()
            return try tools.cjxl(tools.write(ColourFixtures.png(photo, gray: kind.isGray, profile: profile), suffix: "png"), ["-d", "0"])
        case .avif, .heic, .gif:
            preconditionFailure("no colour fixture is made as \(format)")
        }
    }

    /// Little CMS's conversion of the whole decoded image, resized to the box.
    static func reference(_ bytes: [UInt8], kind: ColourFixtures.Kind, profile: [UInt8]) throws -> PixelImage {
        let whole: PixelImage
        if kind.isCMYK {
            let inverted = bytes.withUnsafeBytes { Metadata.jpegMarkers($0).adobeTransform != nil }
            whole = ColourFixtures.cmykToSRGB(
                ColourFixtures.decodeCMYK(bytes, size: size), size: size, from: profile, inverted: inverted)
        } else {
            whole = ColourFixtures.convertedToSRGB(try ImageDecoder().decode(bytes), from: profile, gray: kind.isGray)
        }
        return ImageRenderer().resize(whole, box: box, mode: .fit)
    }

    @Test("tagged renders are Little CMS's conversion, resized (PSNR ≥ 40 dB); ignoring the profile is far off", arguments: cases)
    func tagged(format: ImageFormat, kind: ColourFixtures.Kind) throws {
        let profile = ColourFixtures.profile(kind)
        let bytes = try Self.encoded(format, kind, profile: profile)
        #expect(try ImageDecoder().readHeader(bytes).colour.profile?.bytes == profile)
        let reference = try Self.reference(bytes, kind: kind, profile: profile)
        let rendered = try ImageRenderer().render(bytes, request: RenderRequest(box: Self.box))
        let psnr = ColourFixtures.psnr(rendered, reference)
        #expect(psnr >= 40, "\(format) \(kind): \(psnr) dB")
        // The same pixels without their profile are visibly different: the test can fail.
        let untagged = try ImageRenderer().render(try Self.encoded(format, kind, profile: nil), request: RenderRequest(box: Self.box))
        let ignored = ColourFixtures.psnr(untagged, reference)
        #expect(ignored < 30, "\(format) \(kind): untagged is \(ignored) dB from the reference")
    }

    @Test("every JPEG decode path converts alike: DCT scaling, rows overlapped with the resample, whole image")
    func jpegPaths() throws {
        let profile = ColourFixtures.profile(.swappedMatrix)
        let bytes = try Self.encoded(.jpeg, .swappedMatrix, profile: profile)
        for box in [PixelSize(width: 80, height: 80), PixelSize(width: 350, height: 350), PixelSize(width: 1000, height: 1000)] {
            let whole = ColourFixtures.convertedToSRGB(try ImageDecoder().decode(bytes), from: profile)
            let reference = ImageRenderer().resize(whole, box: box, mode: .fit)
            for overlap in [true, false] {
                let renderer = ImageRenderer(resampleThreads: 2)
                renderer.overlapsDecode = overlap
                // However small, overlapped (the conversion runs on each chunk) or in bands.
                renderer.resampler.overlapWork = 0
                renderer.resampler.parallelWork = 0
                let rendered = try renderer.render(bytes, request: RenderRequest(box: box))
                #expect(ColourFixtures.psnr(rendered, reference) >= 40, "box \(box), overlap \(overlap)")
                if box.width < 640 { #expect(renderer.lastRenderOverlapped == overlap) }
            }
        }
    }

    @Test("a progressive JPEG decoded on two threads is converted too")
    func progressiveSplit() throws {
        let profile = ColourFixtures.profile(.swappedMatrix)
        let photo = ColourFixtures.photo(Self.size)
        let progressive = try photo.withUnsafeBytes { raw in
            try TurboJPEGCompressor().compress(
                raw.baseAddress!, size: photo.size, pitch: photo.bytesPerRow, pixelFormat: TJPF_BGRX, subsampling: TJSAMP_444,
                quality: 95, progressive: true)
        }
        let bytes = EmbeddedProfiles.embed(try ColourProfile(bytes: profile), inJPEG: progressive)
        let renderer = ImageRenderer(resampleThreads: 2)
        renderer.decoder.splitsOnlyWithIdleCores = false
        let rendered = try renderer.render(bytes, request: RenderRequest(box: Self.box))
        #expect(renderer.decoder.lastDecodeWasSplit)
        let reference = try Self.reference(bytes, kind: .swappedMatrix, profile: profile)
        #expect(ColourFixtures.psnr(rendered, reference) >= 40)
    }

    @Test("a 16-bit PNG with a profile renders as its 8-bit twin does")
    func sixteenBitPNG() throws {
        let profile = ColourFixtures.profile(.swappedMatrix)
        let photo = ColourFixtures.photo(Self.size)
        let sixteen = ColourFixtures.png(photo, sixteenBit: true, profile: profile)
        let eight = ColourFixtures.png(photo, profile: profile)
        let a = try ImageRenderer().render(sixteen, request: RenderRequest(box: Self.box))
        let b = try ImageRenderer().render(eight, request: RenderRequest(box: Self.box))
        #expect(ColourFixtures.psnr(a, b) >= 50)
        let reference = try Self.reference(eight, kind: .swappedMatrix, profile: profile)
        #expect(ColourFixtures.psnr(a, reference) >= 40)
    }

    @Test("sRGB-tagged images render exactly as untagged ones (no transform)", arguments: [ImageFormat.jpeg, .webp, .png])
    func sRGBIdentity(format: ImageFormat) throws {
        for profile in [ColourFixtures.sRGB(), ColourFixtures.sRGBRebuilt()] {
            let tagged = try Self.encoded(format, .swappedMatrix, profile: profile)
            let untagged = try Self.encoded(format, .swappedMatrix, profile: nil)
            let before = ColourStatistics.current
            let a = try ImageRenderer().render(tagged, request: RenderRequest(box: Self.box))
            let b = try ImageRenderer().render(untagged, request: RenderRequest(box: Self.box))
            #expect(ColourFixtures.packedBytes(a) == ColourFixtures.packedBytes(b))
            #expect(ColourStatistics.current.identities > before.identities)
            if case .identity = ColourTransforms.shared.prepared(for: try ColourProfile(bytes: profile), layout: .bgra) {
            } else {
                Issue.record("\(format): an sRGB profile was not recognised")
            }
        }
    }

    @Test("original mode leaves RGB pixels in their space; gray and CMYK are still converted")
    func originalMode() throws {
        for kind in ColourFixtures.Kind.allCases {
            let profile = ColourFixtures.profile(kind)
            let tagged = try Self.encoded(.jpeg, kind, profile: profile)
            let untagged = try Self.encoded(.jpeg, kind, profile: nil)
            let original = try ImageRenderer().render(tagged, request: RenderRequest(box: Self.box, colour: .original))
            let plain = try ImageRenderer().render(untagged, request: RenderRequest(box: Self.box))
            let converted = try ImageRenderer().render(tagged, request: RenderRequest(box: Self.box))
            let header = try ImageDecoder().readHeader(tagged)
            let embedded = ColourConversion.profileToEmbed(for: header.colour, grayscale: header.isGrayscale, output: .original)
            if kind.isGray || kind.isCMYK {
                #expect(ColourFixtures.packedBytes(original) == ColourFixtures.packedBytes(converted), "\(kind)")
                #expect(embedded == nil)
            } else {
                #expect(ColourFixtures.packedBytes(original) == ColourFixtures.packedBytes(plain), "\(kind)")
                #expect(embedded?.bytes == profile)
            }
        }
    }
}

extension ColourRenderTests {
    @Test("transparent pixels are converted as straight colour, their alpha kept", arguments: [ImageFormat.png, .webp])
    func transparency(format: ImageFormat) throws {
        let profile = ColourFixtures.profile(.swappedMatrix)
        var photo = ColourFixtures.photo(Self.size)
        let stride = photo.bytesPerRow
        photo.withUnsafeMutableBytes { raw in
            for y in 0..<Self.size.height {
                for x in 0..<Self.size.width { raw[y * stride + 4 * x + 3] = UInt8(40 + 215 * x / Self.size.width) }
            }
            PixelOps.premultiply(raw.baseAddress!, size: Self.size, stride: stride)
        }
        let bytes = try ImageEncoder.encode(photo, as: format, quality: 100, profile: try ColourProfile(bytes: profile))
        var whole = try ImageDecoder().decode(bytes)
        let wholeStride = whole.bytesPerRow
        whole.withUnsafeMutableBytes { PixelOps.unpremultiply($0.baseAddress!, size: Self.size, stride: wholeStride) }
        var converted = ColourFixtures.convertedToSRGB(whole, from: profile)
        let convertedStride = converted.bytesPerRow
        converted.withUnsafeMutableBytes { PixelOps.premultiply($0.baseAddress!, size: Self.size, stride: convertedStride) }
        let reference = ImageRenderer().resize(converted, box: Self.box, mode: .fit)
        let rendered = try ImageRenderer().render(bytes, request: RenderRequest(box: Self.box))
        #expect(ColourFixtures.psnr(rendered, reference) >= 40)
        // Alpha is carried: the same as the untagged image's render.
        let untagged = try ImageRenderer().render(
            try ImageEncoder.encode(photo, as: format, quality: 100), request: RenderRequest(box: Self.box))
        let alpha = { (image: PixelImage) in ColourFixtures.packedBytes(image).enumerated().filter { $0.offset % 4 == 3 }.map(\.element) }
        let sameAlpha = alpha(rendered) == alpha(untagged)
        #expect(sameAlpha)
    }
}

extension ColourRenderTests {
    @Test("the HP sRGB IEC61966-2.1 profile of a fixture photo is recognised as sRGB (no transform)")
    func hpSRGB() throws {
        let bytes = Fixtures.bytes("jpeg/path-2560x1600.jpg")
        let profile = try #require(try ImageDecoder().readHeader(bytes).colour.profile)
        #expect(profile.bytes.count == 3144)
        guard case .identity = ColourTransforms.shared.prepared(for: profile, layout: .bgra) else {
            Issue.record("the HP sRGB profile was not recognised as sRGB")
            return
        }
    }
}
