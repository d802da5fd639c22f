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
    @inline(__always)
    private static func blendRows(
        _ rows: UnsafeMutablePointer<UnsafePointer<UInt8>>, weights: UnsafePointer<Float>, count n: Int,
        values: Int, into out: UnsafeMutablePointer<Float>
    ) {
        var j = 0
        let raw = UnsafeMutableRawPointer(out)
        while j + 16 <= values {
            var acc = SIMD16<Float>()
            for k in 0..<n {
                let bytes = UnsafeRawPointer(rows[k] + j).loadUnaligned(as: SIMD16<UInt8>.self)
                acc += SIMD16<Float>(bytes) * weights[k]
            }
            raw.storeBytes(of: acc, toByteOffset: j * 4, as: SIMD16<Float>.self)
            j += 16
        }
        while j < values {
            var acc: Float = 0
            for k in 0..<n { acc += Float(rows[k][j]) * weights[k] }
            out[j] = acc
            j += 1
        }
    }

    /// Horizontal pass for 4-byte pixels: one `SIMD4<Float>` per pixel, rounded and clamped;
    /// premultiplied colour is clamped to its alpha, BGRx gets an opaque fourth byte.
    @inline(__always)
    private static func filterRow4(
        _ row: UnsafeMutablePointer<Float>, span: Int, starts: UnsafePointer<Int>, counts: UnsafePointer<Int>,
        weights: UnsafePointer<Float>, taps: Int, width: Int, opaque: Bool, into out: UnsafeMutablePointer<UInt8>
    ) {
        let pixels = UnsafeRawPointer(row)
        let limit = SIMD4<Float>(repeating: 255)
        for x in 0..<width {
            let first = starts[x] - span, n = counts[x]
            let w = weights + x * taps
            var acc = SIMD4<Float>()
            for k in 0..<n {
                acc += pixels.loadUnaligned(fromByteOffset: (first + k) * 16, as: SIMD4<Float>.self) * w[k]
            }
            var v = (acc + 0.5).rounded(.down)
            v = pointwiseMin(pointwiseMax(v, .zero), limit)
            // Premultiplied: colour never exceeds alpha (Lanczos ringing can push it over).
            v = pointwiseMin(v, SIMD4(repeating: opaque ? 255 : v[3]))
            if opaque { v[3] = 255 }
            let bytes = SIMD4<UInt8>(truncatingIfNeeded: SIMD4<Int32>(v))
            UnsafeMutableRawPointer(out + x * 4).storeBytes(of: bytes, as: SIMD4<UInt8>.self)
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
            let v = min(max((acc + 0.5).rounded(.down), 0), 255)
            out[x] = UInt8(v)
        }
    }
}
