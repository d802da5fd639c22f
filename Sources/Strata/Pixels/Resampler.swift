/// Resizes ``PixelImage``s with a separable windowed-sinc (or cheaper) filter.
///
/// The filter is applied to the stored values; for ``PixelStyle/bgra32Premultiplied`` those
/// are premultiplied, which is what makes the result alpha-correct (no dark fringes around
/// transparent areas). All four channels of a 32-bit pixel are filtered alike; ``PixelStyle/bgrx32``
/// output keeps its fourth byte at 0xFF; ``PixelStyle/gray8`` is filtered as one channel;
/// ``PixelStyle/rgb565`` is expanded to BGRx, resampled and quantised back (rounded, not
/// dithered), so prefer resampling before converting to 565.
///
/// The work is two passes per output row: a vertical pass that blends the contributing source
/// rows into one row of floats (SIMD over the row's bytes), then a horizontal pass over that row
/// (one `SIMD4<Float>` per BGRA pixel). Only the source columns the output needs are read (a
/// `fill` crop reads only its crop). Coefficient tables and the row buffer are kept between
/// calls, so a resampler reused for the same geometry allocates nothing but the output.
///
/// A `Resampler` is a reusable scratch object: it is not thread-safe; use one per thread (they
/// are cheap to create).
public final class Resampler {
    /// The kernel this resampler convolves with.
    public let filter: ResamplingFilter

    private var horizontal: ResamplerTable?
    private var vertical: ResamplerTable?
    /// One row of vertically blended samples (`span × channels` floats).
    private var row: UnsafeMutablePointer<Float>
    private var rowCapacity: Int
    /// Start of each source row blended into the current output row.
    private var rowPointers: UnsafeMutablePointer<UnsafePointer<UInt8>>
    private var rowPointerCapacity: Int

    /// A resampler using `filter` (Lanczos-3 unless told otherwise).
    public init(filter: ResamplingFilter = .lanczos3) {
        self.filter = filter
        rowCapacity = 0
        row = UnsafeMutablePointer<Float>.allocate(capacity: 1)
        rowPointerCapacity = 0
        rowPointers = UnsafeMutablePointer<UnsafePointer<UInt8>>.allocate(capacity: 1)
    }

    deinit {
        row.deallocate()
        rowPointers.deallocate()
    }

    /// Resamples `region` of `source` (source pixel coordinates, fractional allowed) onto all
    /// of `destination`, whose size is the output size and whose style must be the source's.
    ///
    /// Pixels of `destination` are all overwritten (the row padding is left as it was). Taps
    /// that fall outside the source are dropped and the rest renormalised, so a region that
    /// touches the image border does not darken it.
    public func resample(_ source: PixelImage, region: SourceRect, into destination: inout PixelImage) {
        precondition(source.style == destination.style,
                     "resample keeps the style: convert with PixelConversion first")
        precondition(region.width > 0 && region.height > 0 && region.x.isFinite && region.y.isFinite
                     && region.width.isFinite && region.height.isFinite,
                     "the source region must be finite and non-empty")
        if source.style == .rgb565 {
            // Filter in 8-bit BGRx and quantise once at the end.
            let wide = PixelConversion.convert(source, to: .bgrx32)
            var out = PixelImage(uninitializedWidth: destination.width, height: destination.height, style: .bgrx32)
            resample(wide, region: region, into: &out)
            PixelConversion.convert(out, into: &destination)
            return
        }
        let h = table(&horizontal, ResamplerTable.Key(
            sourceLength: source.width, regionStart: region.x, regionLength: region.width,
            destinationLength: destination.width, filter: filter))
        let v = table(&vertical, ResamplerTable.Key(
            sourceLength: source.height, regionStart: region.y, regionLength: region.height,
            destinationLength: destination.height, filter: filter))
        let channels = source.style.bytesPerPixel
        let spanValues = (h.spanEnd - h.spanStart) * channels
        reserve(rowValues: spanValues, rowPointers: v.taps)
        let row = self.row, rowPointers = self.rowPointers
        let style = source.style
        let sourceStride = source.bytesPerRow, destinationStride = destination.bytesPerRow
        let width = destination.width
        source.withUnsafeBytes { src in
            destination.withUnsafeMutableBytes { dst in
                let srcBase = UnsafePointer(src.baseAddress!.assumingMemoryBound(to: UInt8.self))
                    + h.spanStart * channels
                let dstBase = dst.baseAddress!.assumingMemoryBound(to: UInt8.self)
                h.weights.withUnsafeBufferPointer { hw in
                h.starts.withUnsafeBufferPointer { hs in
                h.counts.withUnsafeBufferPointer { hc in
                v.weights.withUnsafeBufferPointer { vw in
                    for y in 0..<v.starts.count {
                        let first = v.starts[y], n = v.counts[y]
                        for k in 0..<n { rowPointers[k] = srcBase + (first + k) * sourceStride }
                        Self.blendRows(rowPointers, weights: vw.baseAddress! + y * v.taps, count: n,
                                       values: spanValues, into: row)
                        let out = dstBase + y * destinationStride
                        switch style {
                        case .bgra32Premultiplied, .bgrx32:
                            Self.filterRow4(row, span: h.spanStart, starts: hs.baseAddress!, counts: hc.baseAddress!,
                                            weights: hw.baseAddress!, taps: h.taps, width: width,
                                            opaque: style == .bgrx32, into: out)
                        case .gray8:
                            Self.filterRow1(row, span: h.spanStart, starts: hs.baseAddress!, counts: hc.baseAddress!,
                                            weights: hw.baseAddress!, taps: h.taps, width: width, into: out)
                        case .rgb565:
                            preconditionFailure("handled above")
                        }
                    }
                }}}}
            }
        }
    }

    /// Resamples `region` of `source` into a new heap image of `size` (same style).
    public func resample(_ source: PixelImage, region: SourceRect, to size: PixelSize) -> PixelImage {
        var out = PixelImage(uninitializedWidth: size.width, height: size.height, style: source.style)
        resample(source, region: region, into: &out)
        return out
    }

    /// Sizes `source` into `box` as ``SizingPlan`` plans it (`fit`: aspect kept, inside the box;
    /// `fill`: exactly the box, centre-cropped) and resamples. A source smaller than the box is
    /// not enlarged unless `allowUpscale` is set. Returns `source` itself (no copy) when the
    /// plan is the whole source at its own size.
    public func resize(_ source: PixelImage, box: PixelSize, mode: ContentMode, allowUpscale: Bool = false) -> PixelImage {
        let plan = SizingPlan(source: source.size, box: box, mode: mode, allowUpscale: allowUpscale)
        let whole = SourceRect(x: 0, y: 0, width: Double(source.width), height: Double(source.height))
        if plan.output == source.size && plan.sourceRect == whole { return source }
        return resample(source, region: plan.sourceRect, to: plan.output)
    }

    // MARK: - Internals

    private func table(_ cache: inout ResamplerTable?, _ key: ResamplerTable.Key) -> ResamplerTable {
        if let cached = cache, cached.key == key { return cached }
        let fresh = ResamplerTable(key)
        cache = fresh
        return fresh
    }

    private func reserve(rowValues: Int, rowPointers count: Int) {
        // Slack of 64 values so that the SIMD loops may store whole vectors past the end.
        if rowValues + 64 > rowCapacity {
            row.deallocate()
            rowCapacity = rowValues + 64
            row = UnsafeMutablePointer<Float>.allocate(capacity: rowCapacity)
        }
        if count > rowPointerCapacity {
            rowPointers.deallocate()
            rowPointerCapacity = count
            rowPointers = UnsafeMutablePointer<UnsafePointer<UInt8>>.allocate(capacity: count)
        }
    }

    /// `out[j] = Σₖ weights[k] · rows[k][j]` for `j < values`.
    ///
    /// Taps are taken four at a time over the whole row: plain counted loops over bytes that
    /// the compiler vectorises (byte → float widening and multiply-adds), with the row of
    /// floats staying in L1/L2 between groups.
    @inline(__always)
    private static func blendRows(
        _ rows: UnsafeMutablePointer<UnsafePointer<UInt8>>, weights w: UnsafePointer<Float>, count n: Int,
        values: Int, into out: UnsafeMutablePointer<Float>
    ) {
        var k = 0
        // First group initialises the row.
        switch n {
        case 1:
            let a = rows[0], wa = w[0]
            for j in 0..<values { out[j] = Float(a[j]) * wa }
            return
        case 2:
            let a = rows[0], b = rows[1], wa = w[0], wb = w[1]
            for j in 0..<values { out[j] = Float(a[j]) * wa + Float(b[j]) * wb }
            return
        case 3:
            let a = rows[0], b = rows[1], c = rows[2], wa = w[0], wb = w[1], wc = w[2]
            for j in 0..<values { out[j] = Float(a[j]) * wa + Float(b[j]) * wb + Float(c[j]) * wc }
            return
        default:
            let a = rows[0], b = rows[1], c = rows[2], d = rows[3]
            let wa = w[0], wb = w[1], wc = w[2], wd = w[3]
            for j in 0..<values {
                out[j] = (Float(a[j]) * wa + Float(b[j]) * wb) + (Float(c[j]) * wc + Float(d[j]) * wd)
            }
            k = 4
        }
        while n - k >= 4 {
            let a = rows[k], b = rows[k + 1], c = rows[k + 2], d = rows[k + 3]
            let wa = w[k], wb = w[k + 1], wc = w[k + 2], wd = w[k + 3]
            for j in 0..<values {
                out[j] += (Float(a[j]) * wa + Float(b[j]) * wb) + (Float(c[j]) * wc + Float(d[j]) * wd)
            }
            k += 4
        }
        switch n - k {
        case 1:
            let a = rows[k], wa = w[k]
            for j in 0..<values { out[j] += Float(a[j]) * wa }
        case 2:
            let a = rows[k], b = rows[k + 1], wa = w[k], wb = w[k + 1]
            for j in 0..<values { out[j] += Float(a[j]) * wa + Float(b[j]) * wb }
        case 3:
            let a = rows[k], b = rows[k + 1], c = rows[k + 2], wa = w[k], wb = w[k + 1], wc = w[k + 2]
            for j in 0..<values { out[j] += Float(a[j]) * wa + Float(b[j]) * wb + Float(c[j]) * wc }
        default:
            break
        }
    }

    /// Rounds a filtered sample to a byte value: clamped to 0…255, half up.
    @inline(__always)
    private static func byte(_ v: Float) -> UInt32 {
        // Truncation of a value in [0.5, 255.5] rounds half up; no libm call, no trap.
        UInt32(Swift.min(Swift.max(v + 0.5, 0), 255))
    }

    /// Horizontal pass for 4-byte pixels: one `SIMD4<Float>` per pixel, rounded and clamped;
    /// premultiplied colour is clamped to its alpha, BGRx gets an opaque fourth byte.
    @inline(__always)
    private static func filterRow4(
        _ row: UnsafeMutablePointer<Float>, span: Int, starts: UnsafePointer<Int>, counts: UnsafePointer<Int>,
        weights: UnsafePointer<Float>, taps: Int, width: Int, opaque: Bool, into out: UnsafeMutablePointer<UInt8>
    ) {
        let pixels = UnsafeRawPointer(row)
        let output = UnsafeMutableRawPointer(out)
        for x in 0..<width {
            let first = starts[x] - span, n = counts[x]
            let w = weights + x * taps
            var acc = SIMD4<Float>()
            let p = pixels + first * 16
            for k in 0..<n {
                acc += p.loadUnaligned(fromByteOffset: k * 16, as: SIMD4<Float>.self) * w[k]
            }
            var b = byte(acc[0]), g = byte(acc[1]), r = byte(acc[2])
            let a: UInt32
            if opaque {
                a = 255
            } else {
                // Premultiplied: colour never exceeds alpha (Lanczos ringing can push it over).
                a = byte(acc[3])
                b = Swift.min(b, a); g = Swift.min(g, a); r = Swift.min(r, a)
            }
            output.storeBytes(of: (b | g << 8 | r << 16 | a << 24).littleEndian, toByteOffset: x * 4, as: UInt32.self)
        }
    }

    /// Horizontal pass for one-byte pixels.
    @inline(__always)
    private static func filterRow1(
        _ row: UnsafeMutablePointer<Float>, span: Int, starts: UnsafePointer<Int>, counts: UnsafePointer<Int>,
        weights: UnsafePointer<Float>, taps: Int, width: Int, into out: UnsafeMutablePointer<UInt8>
    ) {
        for x in 0..<width {
            let first = starts[x] - span, n = counts[x]
            let w = weights + x * taps
            var acc: Float = 0
            for k in 0..<n { acc += row[first + k] * w[k] }
            out[x] = UInt8(truncatingIfNeeded: byte(acc))
        }
    }
}
