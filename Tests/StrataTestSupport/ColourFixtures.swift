import CLCMS2
import CTurboJPEG
import CZlib
import Glibc
import Strata

/// ICC profiles the colour tests make with Little CMS (never read from disk), Little CMS
/// reference conversions of whole images, the images they are applied to, and PSNR.
package enum ColourFixtures {
    /// The kinds of profile the tests embed.
    package enum Kind: String, CaseIterable, Sendable, CustomStringConvertible {
        /// A matrix/TRC RGB profile whose red and green primaries are swapped, gamma 1.8.
        case swappedMatrix
        /// A LUT-based RGB profile (A2B0 CLUT, 17 points a side) of a strongly tinted space.
        case tintedLUT
        /// A linear (gamma 1) gray profile.
        case linearGray
        /// A LUT-based CMYK profile (A2B0 CLUT, 9 points a side) whose cyan prints green.
        case cmykLUT

        package var description: String { rawValue }
        package var isGray: Bool { self == .linearGray }
        package var isCMYK: Bool { self == .cmykLUT }
    }

    private static let d65 = cmsCIExyY(x: 0.3127, y: 0.3290, Y: 1)

    /// Profiles made so far: Little CMS stamps a profile with the time it was made, so each
    /// kind is made once per process and the same bytes are returned after.
    private static let made = Lock<[Kind: [UInt8]]>([:])

    /// The bytes of a profile of `kind` (the same bytes on every call).
    package static func profile(_ kind: Kind) -> [UInt8] {
        if let known = made.withLock({ $0[kind] }) { return known }
        let bytes = make(kind)
        return made.withLock { map in
            if let raced = map[kind] { return raced }
            map[kind] = bytes
            return bytes
        }
    }

    private static func make(_ kind: Kind) -> [UInt8] {
        switch kind {
        case .swappedMatrix:
            return matrix(red: (0.21, 0.71), green: (0.64, 0.33), blue: (0.15, 0.06), gamma: 1.8)
        case .tintedLUT:
            return lutRGB()
        case .linearGray:
            let curve = cmsBuildGamma(nil, 1.0)!
            defer { cmsFreeToneCurve(curve) }
            let profile = cmsCreateGrayProfile(cmsD50_xyY(), curve)!
            defer { cmsCloseProfile(profile) }
            return save(profile)
        case .cmykLUT:
            return lutCMYK()
        }
    }

    /// Little CMS's own sRGB profile.
    package static func sRGB() -> [UInt8] {
        let profile = cmsCreate_sRGBProfile()!
        defer { cmsCloseProfile(profile) }
        return save(profile)
    }

    /// sRGB rebuilt from its primaries and its curve as a v2 profile: other bytes (and digest)
    /// than ``sRGB()``, the same colours.
    package static func sRGBRebuilt() -> [UInt8] {
        let parameters: [Double] = [2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045]
        let curve = parameters.withUnsafeBufferPointer { cmsBuildParametricToneCurve(nil, 4, $0.baseAddress) }!
        defer { cmsFreeToneCurve(curve) }
        var white = d65
        var primaries = cmsCIExyYTRIPLE(
            Red: cmsCIExyY(x: 0.64, y: 0.33, Y: 1), Green: cmsCIExyY(x: 0.30, y: 0.60, Y: 1), Blue: cmsCIExyY(x: 0.15, y: 0.06, Y: 1))
        var curves: [OpaquePointer?] = [curve, curve, curve]
        let profile = cmsCreateRGBProfile(&white, &primaries, &curves)!
        defer { cmsCloseProfile(profile) }
        cmsSetProfileVersion(profile, 2.1)
        return save(profile)
    }

    /// A matrix/TRC RGB profile of these primaries (D65 white) and gamma.
    package static func matrix(red: (Double, Double), green: (Double, Double), blue: (Double, Double), gamma: Double) -> [UInt8] {
        let curve = cmsBuildGamma(nil, gamma)!
        defer { cmsFreeToneCurve(curve) }
        var white = d65
        var primaries = cmsCIExyYTRIPLE(
            Red: cmsCIExyY(x: red.0, y: red.1, Y: 1), Green: cmsCIExyY(x: green.0, y: green.1, Y: 1),
            Blue: cmsCIExyY(x: blue.0, y: blue.1, Y: 1))
        var curves: [OpaquePointer?] = [curve, curve, curve]
        let profile = cmsCreateRGBProfile(&white, &primaries, &curves)!
        defer { cmsCloseProfile(profile) }
        return save(profile)
    }

    private static func save(_ profile: cmsHPROFILE) -> [UInt8] {
        var count: cmsUInt32Number = 0
        precondition(cmsSaveProfileToMem(profile, nil, &count) != 0)
        var bytes = [UInt8](repeating: 0, count: Int(count))
        precondition(bytes.withUnsafeMutableBytes { cmsSaveProfileToMem(profile, $0.baseAddress, &count) } != 0)
        return bytes
    }

    private static let lab16 = UInt32(PT_Lab) << 16 | 3 << 3 | 2
    private static let rgb16 = UInt32(PT_RGB) << 16 | 3 << 3 | 2

    /// An RGB → Lab CLUT sampled from a tinted matrix space.
    private static func lutRGB() -> [UInt8] {
        let tinted = matrix(red: (0.60, 0.38), green: (0.26, 0.55), blue: (0.20, 0.10), gamma: 2.6)
        let source = tinted.withUnsafeBytes { cmsOpenProfileFromMem($0.baseAddress, cmsUInt32Number($0.count)) }!
        defer { cmsCloseProfile(source) }
        let lab = cmsCreateLab4Profile(nil)!
        defer { cmsCloseProfile(lab) }
        let toLab = cmsCreateTransform(source, rgb16, lab, lab16, UInt32(INTENT_RELATIVE_COLORIMETRIC), UInt32(cmsFLAGS_NOCACHE))!
        defer { cmsDeleteTransform(toLab) }
        return clutProfile(space: cmsSigRgbData, inputs: 3, grid: 17, cargo: toLab) { input, output, cargo in
            cmsDoTransform(cargo, input, output, 1)
            return 1
        }
    }

    /// A CMYK → Lab CLUT: straight CMYK, cyan and magenta swapped, through sRGB.
    private static func lutCMYK() -> [UInt8] {
        let srgb = cmsCreate_sRGBProfile()!
        defer { cmsCloseProfile(srgb) }
        let lab = cmsCreateLab4Profile(nil)!
        defer { cmsCloseProfile(lab) }
        let toLab = cmsCreateTransform(srgb, rgb16, lab, lab16, UInt32(INTENT_RELATIVE_COLORIMETRIC), UInt32(cmsFLAGS_NOCACHE))!
        defer { cmsDeleteTransform(toLab) }
        return clutProfile(space: cmsSigCmykData, inputs: 4, grid: 9, cargo: toLab) { input, output, cargo in
            guard let input, let output else { return 0 }
            let c = Double(input[0]) / 65535, m = Double(input[1]) / 65535, y = Double(input[2]) / 65535
            let k = Double(input[3]) / 65535
            // Cyan prints green, magenta prints cyan-ish: obvious when ignored.
            var rgb: [UInt16] = [
                UInt16((1 - m) * (1 - k) * 65535), UInt16((1 - c) * (1 - y * 0.3) * (1 - k) * 65535),
                UInt16((1 - y) * (1 - k) * 65535),
            ]
            cmsDoTransform(cargo, &rgb, output, 1)
            return 1
        }
    }

    private static func clutProfile(
        space: cmsColorSpaceSignature, inputs: UInt32, grid: UInt32, cargo: cmsHTRANSFORM,
        sampler:
            @escaping @convention(c) (UnsafePointer<cmsUInt16Number>?, UnsafeMutablePointer<cmsUInt16Number>?, UnsafeMutableRawPointer?) ->
            cmsInt32Number
    ) -> [UInt8] {
        let profile = cmsCreateProfilePlaceholder(nil)!
        defer { cmsCloseProfile(profile) }
        cmsSetProfileVersion(profile, 4.3)
        cmsSetDeviceClass(profile, space == cmsSigCmykData ? cmsSigOutputClass : cmsSigDisplayClass)
        cmsSetColorSpace(profile, space)
        cmsSetPCS(profile, cmsSigLabData)
        let pipeline = cmsPipelineAlloc(nil, inputs, 3)!
        defer { cmsPipelineFree(pipeline) }
        let clut = cmsStageAllocCLut16bit(nil, grid, inputs, 3, nil)!
        precondition(cmsStageSampleCLut16bit(clut, sampler, UnsafeMutableRawPointer(cargo), 0) != 0)
        // An mAB (v4) tag is A curves, CLUT, B curves: identity curves around the CLUT.
        precondition(cmsPipelineInsertStage(pipeline, cmsAT_END, cmsStageAllocToneCurves(nil, inputs, nil)) != 0)
        precondition(cmsPipelineInsertStage(pipeline, cmsAT_END, clut) != 0)
        precondition(cmsPipelineInsertStage(pipeline, cmsAT_END, cmsStageAllocToneCurves(nil, 3, nil)) != 0)
        precondition(cmsWriteTag(profile, cmsSigAToB0Tag, UnsafeRawPointer(pipeline)) != 0)
        precondition(cmsWriteTag(profile, cmsSigMediaWhitePointTag, cmsD50_XYZ()) != 0)
        let description = cmsMLUalloc(nil, 1)!
        defer { cmsMLUfree(description) }
        cmsMLUsetASCII(description, "en", "US", "Strata test CLUT")
        precondition(cmsWriteTag(profile, cmsSigProfileDescriptionTag, UnsafeRawPointer(description)) != 0)
        return save(profile)
    }

    // MARK: Reference conversions

    private static let bgra8 = UInt32(PT_RGB) << 16 | 1 << 14 | 1 << 10 | 1 << 7 | 3 << 3 | 1
    private static let grayIn4 = UInt32(PT_GRAY) << 16 | 3 << 7 | 1 << 3 | 1

    /// `image` (opaque premultiplied BGRA; gray expanded to B = G = R when `gray`) converted
    /// from `profile` to sRGB by Little CMS, perceptual with black-point compensation.
    package static func convertedToSRGB(_ image: PixelImage, from profile: [UInt8], gray: Bool = false) -> PixelImage {
        var packed = packedBytes(image)
        transform(&packed, pixels: image.width * image.height, from: profile, input: gray ? grayIn4 : bgra8)
        return imageFrom(packed, size: image.size)
    }

    /// Straight (libjpeg) CMYK bytes, or Adobe-inverted ones, converted to opaque BGRA by Little CMS.
    package static func cmykToSRGB(_ cmyk: [UInt8], size: PixelSize, from profile: [UInt8], inverted: Bool) -> PixelImage {
        var pixels = cmyk
        let format = UInt32(PT_CMYK) << 16 | (inverted ? 1 << 13 : 0) | 4 << 3 | 1
        transform(&pixels, pixels: size.pixelCount, from: profile, input: format)
        for i in 0..<size.pixelCount { pixels[4 * i + 3] = 255 }
        return imageFrom(pixels, size: size)
    }

    private static func transform(_ bytes: inout [UInt8], pixels: Int, from profile: [UInt8], input: UInt32) {
        let source = profile.withUnsafeBytes { cmsOpenProfileFromMem($0.baseAddress, cmsUInt32Number($0.count)) }!
        defer { cmsCloseProfile(source) }
        let srgb = cmsCreate_sRGBProfile()!
        defer { cmsCloseProfile(srgb) }
        let transform = cmsCreateTransform(
            source, input, srgb, bgra8, UInt32(INTENT_PERCEPTUAL), UInt32(cmsFLAGS_BLACKPOINTCOMPENSATION | cmsFLAGS_NOCACHE))!
        defer { cmsDeleteTransform(transform) }
        let input = bytes
        input.withUnsafeBytes { src in
            bytes.withUnsafeMutableBytes { dst in cmsDoTransform(transform, src.baseAddress, dst.baseAddress, cmsUInt32Number(pixels)) }
        }
    }

    /// Tightly packed BGRA bytes of `image`.
    package static func packedBytes(_ image: PixelImage) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: image.width * image.height * 4)
        image.withUnsafeBytes { raw in
            for y in 0..<image.height {
                for x in 0..<(image.width * 4) { out[y * image.width * 4 + x] = raw[y * image.bytesPerRow + x] }
            }
        }
        return out
    }

    /// An opaque premultiplied BGRA image of tightly packed `bytes`.
    package static func imageFrom(_ bytes: [UInt8], size: PixelSize) -> PixelImage {
        var image = PixelImage(width: size.width, height: size.height, style: .bgra32Premultiplied)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            for y in 0..<size.height {
                for x in 0..<(size.width * 4) { raw[y * stride + x] = bytes[y * size.width * 4 + x] }
            }
        }
        return image
    }

    // MARK: Images

    /// A smooth, colourful opaque test photo of `size` (sums of low-frequency waves).
    package static func photo(_ size: PixelSize, gray: Bool = false) -> PixelImage {
        var bytes = [UInt8](repeating: 255, count: size.pixelCount * 4)
        for y in 0..<size.height {
            for x in 0..<size.width {
                let fx = Double(x) / Double(size.width), fy = Double(y) / Double(size.height)
                let r = 0.5 + 0.45 * sin(6.0 * fx + 1.0) * cos(3.0 * fy)
                let g = 0.5 + 0.45 * sin(4.0 * fy + 2.0 * fx)
                let b = 0.5 + 0.45 * cos(5.0 * fx * fy + 0.5)
                let i = 4 * (y * size.width + x)
                if gray {
                    let v = UInt8((0.3 * r + 0.5 * g + 0.2 * b) * 255)
                    (bytes[i], bytes[i + 1], bytes[i + 2]) = (v, v, v)
                } else {
                    (bytes[i], bytes[i + 1], bytes[i + 2]) = (UInt8(b * 255), UInt8(g * 255), UInt8(r * 255))
                }
            }
        }
        return imageFrom(bytes, size: size)
    }

    /// Tightly packed straight CMYK bytes of a smooth test image (libjpeg's polarity: 0 = no ink).
    package static func cmykPhoto(_ size: PixelSize) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: size.pixelCount * 4)
        for y in 0..<size.height {
            for x in 0..<size.width {
                let fx = Double(x) / Double(size.width), fy = Double(y) / Double(size.height)
                let i = 4 * (y * size.width + x)
                bytes[i] = UInt8(255 * (0.5 + 0.45 * sin(5 * fx + 1)))
                bytes[i + 1] = UInt8(255 * (0.5 + 0.45 * cos(4 * fy)))
                bytes[i + 2] = UInt8(255 * (0.5 + 0.45 * sin(3 * fx * fy)))
                bytes[i + 3] = UInt8(255 * 0.3 * fy)
            }
        }
        return bytes
    }

    /// A CMYK JPEG of `cmyk` (TurboJPEG, quality 95, 4:4:4; libjpeg writes it with an Adobe
    /// APP14 marker, so readers take its values as inverted).
    package static func cmykJPEG(_ cmyk: [UInt8], size: PixelSize) -> [UInt8] {
        let handle = tjInitCompress()!
        defer { tjDestroy(handle) }
        var out: UnsafeMutablePointer<UInt8>?
        var count: UInt = 0
        let rc = cmyk.withUnsafeBufferPointer { p in
            tjCompress2(
                handle, p.baseAddress, Int32(size.width), Int32(size.width * 4), Int32(size.height), TJPF_CMYK.rawValue, &out, &count,
                Int32(TJSAMP_444.rawValue), 95, 0)
        }
        precondition(rc == 0, "tjCompress2 (CMYK) failed")
        defer { tjFree(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(count)))
    }

    /// The CMYK bytes a JPEG decodes to (TurboJPEG, TJPF_CMYK, full size).
    package static func decodeCMYK(_ jpeg: [UInt8], size: PixelSize) -> [UInt8] {
        let handle = tjInitDecompress()!
        defer { tjDestroy(handle) }
        var out = [UInt8](repeating: 0, count: size.pixelCount * 4)
        let rc = jpeg.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                tjDecompress2(
                    handle, src.baseAddress, UInt(src.count), dst.baseAddress, Int32(size.width), Int32(size.width * 4), Int32(size.height),
                    TJPF_CMYK.rawValue, 0)
            }
        }
        precondition(rc == 0, "tjDecompress2 (CMYK) failed")
        return out
    }

    /// A PNG of opaque `image` written by hand (zlib for IDAT and iCCP): RGB, or gray from the
    /// B channel when `gray`; 8 or 16 bits (each 8-bit value v written as v × 257); an `iCCP`
    /// chunk of `profile` when given; `chunks` (type and data) before IDAT.
    package static func png(
        _ image: PixelImage, sixteenBit: Bool = false, gray: Bool = false, profile: [UInt8]?,
        chunks: [(String, [UInt8])] = []
    ) -> [UInt8] {
        let packed = packedBytes(image)
        var raw: [UInt8] = []
        for y in 0..<image.height {
            raw.append(0)
            for x in 0..<image.width {
                let i = 4 * (y * image.width + x)
                for c in gray ? [packed[i]] : [packed[i + 2], packed[i + 1], packed[i]] { raw += sixteenBit ? [c, c] : [c] }
            }
        }
        var png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        let w = UInt32(image.width), h = UInt32(image.height)
        png += chunk("IHDR", be32(w) + be32(h) + [sixteenBit ? 16 : 8, gray ? 0 : 2, 0, 0, 0])
        for (type, data) in chunks { png += chunk(type, data) }
        if let profile { png += chunk("iCCP", Array("test".utf8) + [0, 0] + deflate(profile)) }
        png += chunk("IDAT", deflate(raw))
        png += chunk("IEND", [])
        return png
    }

    package static func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }

    private static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let typed = Array(type.utf8) + data
        let crc = typed.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, uInt($0.count))) }
        return be32(UInt32(data.count)) + typed + be32(crc)
    }

    package static func deflate(_ bytes: [UInt8]) -> [UInt8] {
        var count = compressBound(uLong(bytes.count))
        var out = [UInt8](repeating: 0, count: Int(count))
        let rc = out.withUnsafeMutableBufferPointer { o in
            bytes.withUnsafeBufferPointer { compress2(o.baseAddress, &count, $0.baseAddress, uLong($0.count), 6) }
        }
        precondition(rc == Z_OK)
        return Array(out[0..<Int(count)])
    }

    // MARK: PSNR

    /// Peak signal-to-noise ratio of the colour channels (B, G, R) of two images of one size,
    /// in dB (`.infinity` when equal).
    package static func psnr(_ a: PixelImage, _ b: PixelImage) -> Double {
        precondition(a.size == b.size, "psnr: \(a.size) against \(b.size)")
        let pa = packedBytes(a), pb = packedBytes(b)
        var sum = 0.0
        for i in 0..<pa.count where i % 4 != 3 {
            let d = Double(pa[i]) - Double(pb[i])
            sum += d * d
        }
        let mse = sum / Double(a.width * a.height * 3)
        return mse == 0 ? .infinity : 10 * log10(255 * 255 / mse)
    }
}
