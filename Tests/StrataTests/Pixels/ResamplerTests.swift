import Foundation
import Testing
@testable import Strata

@Suite("Resampler")
struct ResamplerTests {
    // MARK: - Helpers

    /// An image of `style` whose channel bytes come from `value(x, y, channel)`.
    static func image(
        _ width: Int, _ height: Int, _ style: PixelStyle,
        _ value: (Int, Int, Int) -> UInt8
    ) -> PixelImage {
        var image = PixelImage(width: width, height: height, style: style)
        let stride = image.bytesPerRow, bpp = style.bytesPerPixel
        image.withUnsafeMutableBytes { raw in
            for y in 0..<height {
                for x in 0..<width {
                    for c in 0..<bpp { raw[y * stride + x * bpp + c] = value(x, y, c) }
                }
            }
        }
        return image
    }

    /// Seeded noise that is valid for `style`: opaque for BGRx, colour ≤ alpha when
    /// premultiplied, one channel for gray.
    static func noise(_ width: Int, _ height: Int, _ style: PixelStyle, seed: UInt64) -> PixelImage {
        var rng = SplitMix64(seed: seed)
        let raw = image(width, height, style) { _, _, _ in UInt8(truncatingIfNeeded: rng.next()) }
        return image(width, height, style) { x, y, c in
            let p = raw.pixelBytes(x: x, y: y)
            if style == .gray8 { return p[0] }
            if style == .bgrx32 { return c == 3 ? 255 : p[c] }
            return c == 3 ? p[3] : min(p[c], p[3])
        }
    }

    /// A smooth-plus-detail test pattern with premultiplied-valid BGRA (colour ≤ alpha).
    static func pattern(_ width: Int, _ height: Int, _ style: PixelStyle) -> PixelImage {
        image(width, height, style) { x, y, c in
            let alpha = 128 + 127 * sin(Double(x + 2 * y) * 0.05)
            if style == .bgra32Premultiplied && c == 3 { return UInt8(alpha.rounded()) }
            let v =
                0.5 + 0.3 * sin(Double(x) * (0.11 + 0.07 * Double(c)) + Double(y) * 0.23)
                + 0.2 * cos(Double(x * y) * 0.013)
            let scaled = min(max(v, 0), 1) * (style == .bgra32Premultiplied ? alpha : 255)
            return style == .bgrx32 && c == 3 ? 255 : UInt8(scaled.rounded(.down))
        }
    }

    /// Straightforward double-precision separable resampling, written independently of the
    /// Resampler's tables: the expected result of Lanczos-3 with Pillow's geometry.
    static func naiveLanczos(_ source: PixelImage, region: SourceRect, size: PixelSize) -> [[Double]] {
        func lanczos(_ x: Double) -> Double {
            if x == 0 { return 1 }
            if abs(x) >= 3 { return 0 }
            let p = Double.pi * x
            return 3 * sin(p) * sin(p / 3) / (p * p)
        }
        func weights(_ n: Int, _ start: Double, _ length: Double, _ count: Int) -> [[Double]] {
            let scale = length / Double(count), stretch = max(scale, 1)
            return (0..<count).map { i in
                let centre = start + (Double(i) + 0.5) * scale
                var w = (0..<n).map { lanczos((Double($0) + 0.5 - centre) / stretch) }
                let total = w.reduce(0, +)
                w = w.map { $0 / total }
                return w
            }
        }
        let wx = weights(source.width, region.x, region.width, size.width)
        let wy = weights(source.height, region.y, region.height, size.height)
        let bpp = source.style.bytesPerPixel
        var out = [[Double]](repeating: [], count: size.width * size.height)
        source.withUnsafeBytes { raw in
            for oy in 0..<size.height {
                for ox in 0..<size.width {
                    var acc = [Double](repeating: 0, count: bpp)
                    for sy in 0..<source.height where wy[oy][sy] != 0 {
                        for sx in 0..<source.width where wx[ox][sx] != 0 {
                            let w = wy[oy][sy] * wx[ox][sx]
                            for c in 0..<bpp { acc[c] += w * Double(raw[sy * source.bytesPerRow + sx * bpp + c]) }
                        }
                    }
                    out[oy * size.width + ox] = acc
                }
            }
        }
        return out
    }

    /// Largest difference between `image` and the naive result (rounded, clamped).
    static func worstDifference(_ image: PixelImage, _ expected: [[Double]]) -> Int {
        var worst = 0
        for y in 0..<image.height {
            for x in 0..<image.width {
                let got = image.pixelBytes(x: x, y: y)
                for c in 0..<got.count {
                    var e = min(max(expected[y * image.width + x][c], 0), 255)
                    if image.style == .bgra32Premultiplied && c < 3 {
                        e = min(e, min(max(expected[y * image.width + x][3], 0), 255))
                    }
                    if image.style == .bgrx32 && c == 3 { e = 255 }
                    worst = max(worst, abs(Int(got[c]) - Int(e.rounded())))
                }
            }
        }
        return worst
    }

    // MARK: - Correctness against an independent implementation

    @Test(arguments: [PixelStyle.bgra32Premultiplied, .bgrx32, .gray8])
    func matchesNaiveLanczosWhenDownscaling(style: PixelStyle) {
        // Odd sizes exercise the SIMD tails; a fractional region exercises the crop geometry.
        let source = Self.pattern(83, 47, style)
        let region = SourceRect(x: 3.25, y: 1.5, width: 71.5, height: 43)
        let size = PixelSize(width: 23, height: 13)
        let out = Resampler().resample(source, region: region, to: size)
        #expect(out.size == size && out.style == style)
        let worst = Self.worstDifference(out, Self.naiveLanczos(source, region: region, size: size))
        #expect(worst <= 1, "worst difference \(worst)")
    }

    @Test func matchesNaiveLanczosWhenUpscaling() {
        let source = Self.pattern(13, 9, .bgra32Premultiplied)
        let region = SourceRect(x: 0, y: 0, width: 13, height: 9)
        let size = PixelSize(width: 31, height: 20)
        let out = Resampler().resample(source, region: region, to: size)
        let worst = Self.worstDifference(out, Self.naiveLanczos(source, region: region, size: size))
        #expect(worst <= 1, "worst difference \(worst)")
    }

    /// The source tier's geometries (a DCT-scaled decode reduced 2:1 and 2.5:1, BGRA
    /// premultiplied), which take the fixed-point horizontal pass.
    @Test(arguments: [(96, 60), (120, 75)])
    func matchesNaiveLanczosOnTheThumbnailReductions(width: Int, height: Int) {
        let source = Self.pattern(width, height, .bgra32Premultiplied)
        let region = SourceRect(x: 0, y: 0, width: Double(width), height: Double(height))
        let size = PixelSize(width: 48, height: 30)
        #expect(
            ResamplerTable(
                ResamplerTable.Key(
                    sourceLength: width, regionStart: 0, regionLength: Double(width),
                    destinationLength: 48, filter: .lanczos3)
            ).fixedPoint != nil)
        let out = Resampler().resample(source, region: region, to: size)
        let worst = Self.worstDifference(out, Self.naiveLanczos(source, region: region, size: size))
        #expect(worst <= 1, "worst difference \(worst)")
    }

    /// Noise, the worst case for overshoot and rounding, at the largest reduction the
    /// fixed-point tables take and at the thumbnail ratio, with an odd output width.
    @Test(arguments: [PixelStyle.bgra32Premultiplied, .bgrx32], [(200, 120, 20, 12), (250, 160, 101, 64)])
    func noiseStaysWithinOneOfTheReferenceAtFixedPointReductions(style: PixelStyle, geometry: (Int, Int, Int, Int)) {
        let (w, h, ow, oh) = geometry
        let valid = Self.noise(w, h, style, seed: UInt64(w * 1000 + ow))
        let region = SourceRect(x: 0, y: 0, width: Double(w), height: Double(h))
        for (length, out) in [(w, ow), (h, oh)] {
            let table = ResamplerTable(
                ResamplerTable.Key(
                    sourceLength: length, regionStart: 0, regionLength: Double(length), destinationLength: out,
                    filter: .lanczos3))
            #expect(table.fixedPoint != nil, "\(length) → \(out) takes the float pass")
        }
        let size = PixelSize(width: ow, height: oh)
        let result = Resampler().resample(valid, region: region, to: size)
        let worst = Self.worstDifference(result, Self.naiveLanczos(valid, region: region, size: size))
        #expect(worst <= 1, "worst difference \(worst)")
        if style == .bgrx32 {
            for y in 0..<oh { for x in 0..<ow { #expect(result.pixelBytes(x: x, y: y)[3] == 255) } }
        }
    }

    /// The AVX2 kernels (`CStrataSIMD`, taken when the CPU has AVX2) and the portable Swift
    /// kernels: each within one level of the double-precision reference, on noise and on a
    /// pattern, at the thumbnail reductions, a fractional crop, an upscale, a reduction beyond
    /// the fixed-point taps and odd widths (the kernels' tails); and within one level of each
    /// other (the same integer horizontal sums; the vertical blend differs only by FMA rounding).
    @Test(arguments: [PixelStyle.bgra32Premultiplied, .bgrx32, .gray8])
    func theAVX2AndPortableKernelsAgree(style: PixelStyle) {
        let valid = Self.noise(257, 163, style, seed: 0xA5A2)
        let cases: [(SourceRect, PixelSize)] = [
            (SourceRect(x: 0, y: 0, width: 257, height: 163), PixelSize(width: 103, height: 65)),
            (SourceRect(x: 0, y: 0, width: 257, height: 163), PixelSize(width: 33, height: 21)),
            (SourceRect(x: 3.25, y: 1.5, width: 201.5, height: 150), PixelSize(width: 67, height: 49)),
            (SourceRect(x: 0, y: 0, width: 257, height: 163), PixelSize(width: 19, height: 12)),
            (SourceRect(x: 10, y: 20, width: 31, height: 17), PixelSize(width: 77, height: 41)),
        ]
        let fast = Resampler(), portable = Resampler()
        portable.usesAVX2 = false
        #expect(fast.usesAVX2 == Resampler.hasAVX2)
        for source in [valid, Self.pattern(257, 163, style)] {
            for (region, size) in cases {
                let reference = Self.naiveLanczos(source, region: region, size: size)
                let a = fast.resample(source, region: region, to: size)
                let b = portable.resample(source, region: region, to: size)
                #expect(Self.worstDifference(a, reference) <= 1, "AVX2 kernels, \(region) → \(size)")
                #expect(Self.worstDifference(b, reference) <= 1, "portable kernels, \(region) → \(size)")
                var worst = 0
                for y in 0..<size.height {
                    for x in 0..<size.width {
                        let p = a.pixelBytes(x: x, y: y), q = b.pixelBytes(x: x, y: y)
                        for c in 0..<style.bytesPerPixel { worst = max(worst, abs(Int(p[c]) - Int(q[c]))) }
                    }
                }
                #expect(worst <= 1, "AVX2 vs portable, \(region) → \(size)")
            }
        }
    }

    /// A resample split into bands of output rows (``Resampler/threads``) gives the same bytes
    /// as one thread: reductions, a fractional crop, an upscale, uneven bands, the float pass
    /// (gray) and the AVX2 kernels; a resample with fewer output rows than threads uses no more
    /// bands than rows, and a small one stays on one thread at the default threshold.
    @Test(arguments: [PixelStyle.bgra32Premultiplied, .bgrx32, .gray8])
    func bandsOnSeveralThreadsGiveTheSameBytes(style: PixelStyle) {
        let valid = Self.noise(257, 163, style, seed: 0xBA4D)
        let cases: [(SourceRect, PixelSize, bands: Int)] = [
            (SourceRect(x: 0, y: 0, width: 257, height: 163), PixelSize(width: 103, height: 65), 3),
            (SourceRect(x: 0, y: 0, width: 257, height: 163), PixelSize(width: 33, height: 21), 3),
            (SourceRect(x: 3.25, y: 1.5, width: 201.5, height: 150), PixelSize(width: 67, height: 49), 3),
            (SourceRect(x: 10, y: 20, width: 31, height: 17), PixelSize(width: 77, height: 41), 3),
            (SourceRect(x: 0, y: 0, width: 257, height: 163), PixelSize(width: 40, height: 2), 2),
        ]
        let single = Resampler()
        for avx2 in Resampler.hasAVX2 ? [true, false] : [false] {
            let split = Resampler()
            split.threads = 3
            split.maximumBands = 3
            split.parallelWork = 0
            split.usesAVX2 = avx2
            single.usesAVX2 = avx2
            for (region, size, bands) in cases {
                let one = single.resample(valid, region: region, to: size)
                let many = split.resample(valid, region: region, to: size)
                #expect(single.lastBandCount == 1)
                #expect(split.lastBandCount == bands, "\(region) → \(size)")
                var differing = 0
                for y in 0..<size.height {
                    for x in 0..<size.width where one.pixelBytes(x: x, y: y) != many.pixelBytes(x: x, y: y) { differing += 1 }
                }
                #expect(differing == 0, "\(region) → \(size), AVX2 \(avx2): \(differing) pixels differ")
            }
        }
        let small = Resampler()
        small.threads = 2
        small.maximumBands = 2
        _ = small.resample(valid, region: SourceRect(x: 0, y: 0, width: 257, height: 163), to: PixelSize(width: 103, height: 65))
        #expect(small.lastBandCount == 1, "below the default work threshold")
    }

    @Test func matchesNaiveLanczosBeyondTheFixedPointTaps() {
        // A 12:1 reduction has more taps than the fixed-point pass takes: the float pass runs.
        let source = Self.pattern(120, 36, .bgra32Premultiplied)
        let region = SourceRect(x: 0, y: 0, width: 120, height: 36)
        let size = PixelSize(width: 10, height: 3)
        #expect(
            ResamplerTable(
                ResamplerTable.Key(
                    sourceLength: 120, regionStart: 0, regionLength: 120,
                    destinationLength: 10, filter: .lanczos3)
            ).fixedPoint == nil)
        let out = Resampler().resample(source, region: region, to: size)
        let worst = Self.worstDifference(out, Self.naiveLanczos(source, region: region, size: size))
        #expect(worst <= 1, "worst difference \(worst)")
    }

    @Test(arguments: ResamplingFilter.allCases)
    func fixedPointWeightsSumToExactlyOne(filter: ResamplingFilter) throws {
        // 2:1, 2.5:1, 8:1 (49 Lanczos taps: only at scale 2¹⁵), a fractional crop, an enlargement.
        for (length, start, count) in [(512, 0.0, 256), (640, 0.0, 256), (2048, 0.0, 256), (83, 3.25, 23), (13, 0.0, 31)] {
            let table = ResamplerTable(
                ResamplerTable.Key(
                    sourceLength: length, regionStart: start,
                    regionLength: Double(length) - start,
                    destinationLength: count, filter: filter))
            let fixed = try #require(table.fixedPoint)
            let pairs = fixed.pairs
            #expect(table.taps * 255 * 2 <= Int(fixed.scale))
            for i in 0..<count {
                var total: Int32 = 0
                for k in 0..<table.pairs {
                    let pair = pairs[i * table.pairs + k]
                    #expect(pair == SIMD8(pair[0], pair[1], pair[0], pair[1], pair[0], pair[1], pair[0], pair[1]))
                    // Taps past the output's count are zero.
                    if 2 * k >= table.counts[i] { #expect(pair[0] == 0) }
                    if 2 * k + 1 >= table.counts[i] { #expect(pair[1] == 0) }
                    total += Int32(pair[0]) + Int32(pair[1])
                }
                #expect(total == fixed.scale, "output \(i)")
            }
        }
    }

    @Test func aResamplerIsReusableAcrossGeometries() {
        let resampler = Resampler()
        let a = Self.pattern(64, 40, .bgra32Premultiplied)
        let b = Self.pattern(50, 90, .gray8)
        let first = resampler.resample(a, region: SourceRect(x: 0, y: 0, width: 64, height: 40), to: PixelSize(width: 16, height: 10))
        _ = resampler.resample(b, region: SourceRect(x: 0, y: 0, width: 50, height: 90), to: PixelSize(width: 7, height: 30))
        let again = resampler.resample(a, region: SourceRect(x: 0, y: 0, width: 64, height: 40), to: PixelSize(width: 16, height: 10))
        #expect(again.hasSamePixels(as: first))
        #expect(
            first.hasSamePixels(
                as: Resampler().resample(
                    a, region: SourceRect(x: 0, y: 0, width: 64, height: 40),
                    to: PixelSize(width: 16, height: 10))))
    }

    // MARK: - Filtering properties

    @Test(arguments: ResamplingFilter.allCases)
    func aFlatImageStaysFlat(filter: ResamplingFilter) {
        let source = Self.image(101, 67, .bgra32Premultiplied) { _, _, c in [40, 90, 120, 200][c] }
        let out = Resampler(filter: filter).resample(
            source, region: SourceRect(x: 0, y: 0, width: 101, height: 67),
            to: PixelSize(width: 17, height: 29))
        for y in 0..<out.height {
            for x in 0..<out.width { #expect(out.pixelBytes(x: x, y: y) == [40, 90, 120, 200]) }
        }
    }

    @Test(arguments: ResamplingFilter.allCases)
    func downscalingAntialiases(filter: ResamplingFilter) {
        // A one-pixel checkerboard has no representable frequency at ¼ size: it must become
        // mid-gray, where point sampling would give black or white.
        let source = Self.image(128, 96, .gray8) { x, y, _ in (x + y) % 2 == 0 ? 255 : 0 }
        let out = Resampler(filter: filter).resample(
            source, region: SourceRect(x: 0, y: 0, width: 128, height: 96),
            to: PixelSize(width: 32, height: 24))
        for y in 0..<out.height {
            for x in 0..<out.width {
                let v = Int(out.pixelBytes(x: x, y: y)[0])
                #expect(abs(v - 128) <= 3, "(\(x), \(y)) = \(v)")
            }
        }
    }

    @Test func premultipliedEdgesHaveNoDarkFringe() {
        // Left half transparent, right half opaque red; the edge pixels get partial alpha and
        // their colour, un-premultiplied, must still be pure red.
        let source = Self.image(64, 8, .bgra32Premultiplied) { x, _, c in
            x < 32 ? 0 : [0, 0, 255, 255][c]
        }
        let out = Resampler().resample(
            source, region: SourceRect(x: 0, y: 0, width: 64, height: 8),
            to: PixelSize(width: 13, height: 2))
        var sawPartial = false
        for x in 0..<out.width {
            let p = out.pixelBytes(x: x, y: 0)
            #expect(p[0] == 0 && p[1] == 0, "no blue or green at \(x): \(p)")
            #expect(p[2] <= p[3], "colour within alpha at \(x): \(p)")
            if p[3] > 10 && p[3] < 245 {
                sawPartial = true
                #expect(Int(p[3]) - Int(p[2]) <= 1, "un-premultiplied red stays 255 at \(x): \(p)")
            }
        }
        #expect(sawPartial)
    }

    @Test func bgrxOutputIsOpaque() {
        let source = Self.image(40, 40, .bgrx32) { x, _, c in c == 3 ? 255 : (x % 3 == 0 ? 255 : 0) }
        let out = Resampler().resample(
            source, region: SourceRect(x: 0, y: 0, width: 40, height: 40),
            to: PixelSize(width: 9, height: 9))
        for y in 0..<9 { for x in 0..<9 { #expect(out.pixelBytes(x: x, y: y)[3] == 255) } }
    }

    @Test func rgb565IsResampledThroughBGRx() {
        let wide = Self.pattern(60, 44, .bgrx32)
        let narrow = PixelConversion.convert(wide, to: .rgb565)
        let region = SourceRect(x: 0, y: 0, width: 60, height: 44)
        let size = PixelSize(width: 21, height: 15)
        let out = Resampler().resample(narrow, region: region, to: size)
        #expect(out.style == .rgb565)
        let expected = PixelConversion.convert(
            Resampler().resample(PixelConversion.convert(narrow, to: .bgrx32), region: region, to: size), to: .rgb565)
        #expect(out.hasSamePixels(as: expected))
    }

    @Test func resampleIntoAnyStrideLeavesPaddingAlone() {
        let source = Self.pattern(50, 30, .bgra32Premultiplied)
        let stride = 192
        var destination = PixelImage(
            width: 20, height: 12, bytesPerRow: stride, style: .bgra32Premultiplied,
            storage: PixelStorage(zeroedByteCount: stride * 12), offset: 0)
        destination.withUnsafeMutableBytes { raw in for y in 0..<12 { raw[y * stride + 20 * 4] = 0x5A } }
        let region = SourceRect(x: 0, y: 0, width: 50, height: 30)
        Resampler().resample(source, region: region, into: &destination)
        destination.withUnsafeBytes { raw in for y in 0..<12 { #expect(raw[y * stride + 20 * 4] == 0x5A) } }
        #expect(destination.hasSamePixels(as: Resampler().resample(source, region: region, to: destination.size)))
    }

    @Test func sameSizeWholeRegionIsAnExactCopy() {
        let source = Self.pattern(37, 21, .bgra32Premultiplied)
        let out = Resampler().resample(source, region: SourceRect(x: 0, y: 0, width: 37, height: 21), to: source.size)
        #expect(out.hasSamePixels(as: source))
    }

    @Test(arguments: ResamplingFilter.allCases)
    func anIntegerAlignedSameSizeRegionIsAnExactCrop(filter: ResamplingFilter) {
        let source = Self.pattern(40, 30, .bgra32Premultiplied)
        let out = Resampler(filter: filter).resample(
            source, region: SourceRect(x: 5, y: 3, width: 20, height: 12),
            to: PixelSize(width: 20, height: 12))
        let expected = Self.image(20, 12, .bgra32Premultiplied) { x, y, c in source.pixelBytes(x: x + 5, y: y + 3)[c] }
        #expect(out.hasSamePixels(as: expected))
        // Half a pixel off is a real interpolation, not a copy.
        let shifted = Resampler(filter: filter).resample(
            source, region: SourceRect(x: 5.5, y: 3, width: 20, height: 12),
            to: PixelSize(width: 20, height: 12))
        #expect(!shifted.hasSamePixels(as: expected))
    }

    @Test(arguments: ResamplingFilter.allCases)
    func tablesRecogniseAPureShift(filter: ResamplingFilter) {
        func table(_ start: Double, _ length: Double, _ count: Int) -> ResamplerTable {
            ResamplerTable(
                .init(
                    sourceLength: 50, regionStart: start, regionLength: length,
                    destinationLength: count, filter: filter))
        }
        let aligned = table(7, 30, 30)
        #expect(aligned.isShift && aligned.starts.first == 7 && aligned.counts.allSatisfy { $0 == 1 })
        // Half a pixel off interpolates, except for the box filter, which then picks one neighbour.
        #expect(table(7.5, 30, 30).isShift == (filter == .box))
        #expect(!table(0, 50, 25).isShift)
    }

    // MARK: - fit and fill

    @Test func fitKeepsAspectInsideTheBox() {
        let source = Self.pattern(320, 200, .bgra32Premultiplied)
        let out = Resampler().resize(source, box: PixelSize(width: 100, height: 100), mode: .fit)
        #expect(out.size == PixelSize(width: 100, height: 63))
        // Whole image kept: the left edge of the output looks like the left edge of the source.
        let whole = Resampler().resample(source, region: SourceRect(x: 0, y: 0, width: 320, height: 200), to: out.size)
        #expect(out.hasSamePixels(as: whole))
    }

    @Test func fillCropsTheCentreToExactlyTheBox() {
        // Three vertical bands; a square fill keeps only the middle (green) one.
        let source = Self.image(300, 100, .bgra32Premultiplied) { x, _, c in
            let band = x / 100
            return c == 3 ? 255 : (c == [2, 1, 0][band] ? 255 : 0)
        }
        let out = Resampler().resize(source, box: PixelSize(width: 50, height: 50), mode: .fill)
        #expect(out.size == PixelSize(width: 50, height: 50))
        // Away from the crop edges (where the kernel reaches the neighbouring bands) it is pure green.
        for y in 0..<50 {
            for x in 4..<46 { #expect(out.pixelBytes(x: x, y: y) == [0, 255, 0, 255], "(\(x), \(y))") }
        }
        // A wide box on a tall source crops top and bottom instead.
        let tall = Self.image(100, 300, .gray8) { _, y, _ in y < 100 || y >= 200 ? 0 : 200 }
        let wide = Resampler().resize(tall, box: PixelSize(width: 40, height: 40), mode: .fill)
        #expect(wide.size == PixelSize(width: 40, height: 40))
        #expect(wide.pixelBytes(x: 20, y: 20) == [200] && wide.pixelBytes(x: 3, y: 5) == [200])
    }

    @Test func smallSourcesAreNotEnlargedUnlessAsked() {
        let source = Self.pattern(60, 40, .bgra32Premultiplied)
        let resampler = Resampler()
        let fit = resampler.resize(source, box: PixelSize(width: 300, height: 300), mode: .fit)
        #expect(fit.storage === source.storage, "returned unchanged, without a copy")
        let fill = resampler.resize(source, box: PixelSize(width: 90, height: 60), mode: .fill)
        #expect(fill.storage === source.storage, "same aspect at 1:1: the whole source")
        let cropped = resampler.resize(source, box: PixelSize(width: 200, height: 200), mode: .fill)
        #expect(cropped.size == PixelSize(width: 40, height: 40))
        let enlarged = resampler.resize(source, box: PixelSize(width: 300, height: 300), mode: .fit, allowUpscale: true)
        #expect(enlarged.size == PixelSize(width: 300, height: 200))
        let enlargedFill = resampler.resize(source, box: PixelSize(width: 120, height: 120), mode: .fill, allowUpscale: true)
        #expect(enlargedFill.size == PixelSize(width: 120, height: 120))
    }

    // MARK: - PSNR

    @Test func psnrMeasuresColourChannelsOnly() throws {
        let a = Self.pattern(40, 30, .bgrx32)
        #expect(a.peakSignalToNoiseRatio(against: a) == .infinity)
        // Every colour byte off by exactly 1: MSE 1, PSNR 20·log10(255).
        let b = Self.image(40, 30, .bgrx32) { x, y, c in
            let v = a.pixelBytes(x: x, y: y)[c]
            return c == 3 ? 0 : (v == 255 ? 254 : v + 1)
        }
        #expect(abs(b.peakSignalToNoiseRatio(against: a) - 20 * log10(255)) < 1e-9)
    }
}
