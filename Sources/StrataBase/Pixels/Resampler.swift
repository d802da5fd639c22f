import CStrataSIMD
import Dispatch

/// Resizes ``PixelImage``s with a separable windowed-sinc (or cheaper) filter.
///
/// The filter is applied to the stored values; for ``PixelStyle/bgra32Premultiplied`` those
/// are premultiplied, which is what makes the result alpha-correct (no dark fringes around
/// transparent areas). All four channels of a 32-bit pixel are filtered alike; ``PixelStyle/bgrx32``
/// output keeps its fourth byte at 0xFF; ``PixelStyle/gray8`` is filtered as one channel;
/// ``PixelStyle/rgb565`` is expanded to BGRx, resampled and quantised back (rounded, not
/// dithered), so prefer resampling before converting to 565.
///
/// The work is separable and streams the source once, top to bottom: each source row the output
/// needs is filtered horizontally into a small ring of output-width float rows; each output row
/// is then a vertical blend of ring rows (a plain float loop the compiler vectorises), rounded
/// to bytes. For 4-channel styles the horizontal pass is fixed point: the row is expanded to
/// overlapping 16-bit pixel pairs and each pair of taps is one 16-bit multiply-add (`pmaddwd`,
/// eight products) with 16-bit weights; it moves a value by at most half a level before the
/// final rounding, and is used up to 64 taps (Lanczos-3 reductions up to about 10:1). Beyond
/// that, and for ``PixelStyle/gray8``, the row is widened to floats and filtered with
/// `SIMD4<Float>` (or scalar) multiply-adds. Only the source rows and columns the output needs
/// are read (a `fill` crop reads only its crop). Cost is about
/// `sourceRows × outputWidth × tapsX + outputRows × outputWidth × tapsY` multiply-adds per
/// channel, with `taps ≈ 6 × reduction` for Lanczos-3; the horizontal term runs at about eight
/// per instruction in fixed point, the vertical at four. On a CPU with AVX2 and FMA (checked
/// once, with `cpuid`) the fixed-point horizontal pass and the vertical blend run as the C
/// kernels of `CStrataSIMD` instead — 16 products per `vpmaddwd`, two source rows per pass
/// sharing the weights, pairs built from even pixels only, and the blend rounded to bytes in
/// registers — with the same integer sums and the blend within float rounding of the Swift one
/// (about half the time of a 2.5:1 reduction, 0.3× of a 10:1). Coefficient tables and scratch rows
/// are kept between calls, so a resampler reused for the same geometry allocates nothing but
/// the output.
///
/// A `Resampler` is a reusable scratch object: it is not thread-safe; use one per thread. It is
/// cheap to create (a few small allocations; the tables are built on first use).
public final class Resampler {
    /// The kernel this resampler convolves with.
    public let filter: ResamplingFilter

    package var horizontal: ResamplerTable?
    package var vertical: ResamplerTable?
    /// One source row widened to floats (`span × channels`; the float path).
    private var sourceRow = ScratchBuffer<Float>()
    /// One 4-channel source row as overlapping, channel-interleaved 16-bit pixel pairs
    /// (`span` elements; the fixed-point path).
    private var pairRow = ScratchBuffer<SIMD8<Int16>>()
    /// Horizontally filtered rows (`ringRows × outputWidth × channels`), indexed by source row
    /// modulo the ring size.
    private var ring = ScratchBuffer<Float>()
    /// Which source row each ring slot holds (−1: none).
    private var ringSourceRows = ScratchBuffer<Int>()
    /// The ring rows blended into the current output row.
    private var ringPointers = ScratchBuffer<UnsafePointer<Float>>()
    /// One output row of floats before rounding.
    private var outputRow = ScratchBuffer<Float>()
    /// The AVX2 kernels' pixel pairs starting at even pixels (8 values an element; the weights
    /// are aligned to them), for the two rows filtered together.
    private var evenPairs = ScratchBuffer<Int16>()
    private var evenPairs2 = ScratchBuffer<Int16>()

    /// Resamplers that run the other bands of a split resample (their scratch only).
    package var helpers: [Resampler] = []
    /// Where the other bands of a split resample, and the resample beside a decode, run
    /// (Dispatch's pool unless the owner says otherwise: the engine gives its pool).
    public var forkJoin: ForkJoin = .dispatch

    /// How many threads one resample may use (default 1). With more, a resample of at least
    /// `parallelWork` multiply-adds a band is split into bands of output rows that run in
    /// parallel through ``forkJoin`` (this thread takes bands too), each band
    /// with scratch of its own. The result is the same bytes. It lowers one image's latency on
    /// a machine with idle cores; it cannot raise the throughput of a machine whose cores are
    /// all busy, and costs a little (each band filters the few source rows its first output row
    /// shares with the band before it).
    public var threads = 1 {
        didSet { threads = Swift.max(1, threads) }
    }

    /// The work a band must have, in multiply-adds (taps × output samples × channels, both
    /// passes), for a resample to be split: 4 M, a few tenths of a millisecond of the AVX2
    /// kernels, well above the cost of handing a band to another thread. A 640×400 → 256×160
    /// reduction (9 M) splits in two, as does 2560×1600 → 1024×640 (about 150 M); a 320×200 →
    /// 128×80 one stays on one thread.
    package var parallelWork = 4 << 20

    /// The multiply-adds a resample must have for a fill of its source to overlap it (see
    /// ``resample(filling:sourceSize:sourceStride:style:region:into:fill:)``): 32 M, a few
    /// milliseconds of a large photo's reduce (2560×1600 → 1024×640 is about 150 M). A smaller
    /// one saves less than the hand-over costs: a 640×400 → 256×160 reduce (9 M, 0.2 ms)
    /// measured 3 % slower overlapped (`strata-bench resample`). Tests lower it.
    package var overlapWork = 32 << 20

    /// The online cores, asked once (`sysconf` reads a file; resamplers are made per request).
    private static let onlineCores = Processors.online
    /// No resample is split into more bands than this: the online cores (tests set it).
    package var maximumBands = Resampler.onlineCores
    /// How many bands the last resample ran in (for tests).
    package var lastBandCount = 0

    /// Whether this CPU runs the AVX2 kernels (`CStrataSIMD`); checked once.
    package static let hasAVX2 = strata_simd_avx2() != 0
    /// Whether this resampler uses the AVX2 kernels (default: when the CPU has them). Tests turn
    /// it off to compare with the portable Swift kernels, which give the same horizontal sums
    /// and vertical blends within float rounding.
    package var usesAVX2 = Resampler.hasAVX2

    /// A resampler using `filter` (Lanczos-3 unless told otherwise).
    public init(filter: ResamplingFilter = .lanczos3) {
        self.filter = filter
    }

    deinit {
        sourceRow.free()
        pairRow.free()
        ring.free()
        ringSourceRows.free()
        ringPointers.free()
        outputRow.free()
        evenPairs.free()
        evenPairs2.free()
    }

    /// Resamples `region` of `source` (source pixel coordinates, fractional allowed) onto all
    /// of `destination`, whose size is the output size and whose style must be the source's.
    ///
    /// Pixels of `destination` are all overwritten (the row padding is left as it was); a
    /// destination over mapped memory (a table slot) is written in place when it is the only
    /// reference to its writable storage — otherwise copy-on-write gives it fresh heap rows. Taps
    /// that fall outside the source are dropped and the rest renormalised, so a region that
    /// touches the image border does not darken it.
    public func resample(_ source: PixelImage, region: SourceRect, into destination: inout PixelImage) {
        resample(source, region: region, into: &destination, finish: nil)
    }

    /// Work on finished output rows, run by the thread that wrote them, right after (a colour
    /// conversion while the rows are in cache, in the same bands): the first row, the size of
    /// the block of rows, the stride.
    package typealias RowsFinish = @Sendable (_ rows: UnsafeMutablePointer<UInt8>, _ size: PixelSize, _ stride: Int) -> Void

    /// ``resample(_:region:into:)``, then `finish` on each band's rows as the band ends.
    package func resample(_ source: PixelImage, region: SourceRect, into destination: inout PixelImage, finish: RowsFinish?) {
        precondition(
            source.style == destination.style,
            "resample keeps the style: convert with PixelConversion first")
        precondition(
            region.width > 0 && region.height > 0 && region.x.isFinite && region.y.isFinite
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
        let (h, v) = tables(sourceSize: source.size, region: region, destinationSize: destination.size)
        let channels = source.style.bytesPerPixel
        if h.isShift && v.isShift {
            // Integer-aligned 1:1 (e.g. a source no larger than the box): a plain row copy.
            copy(source, x: h.starts[0], y: v.starts[0], into: &destination)
            if let finish {
                let stride = destination.bytesPerRow, size = destination.size
                destination.withUnsafeMutableBytes { finish($0.baseAddress!.assumingMemoryBound(to: UInt8.self), size, stride) }
            }
            return
        }
        let bands = bandCount(h, v, channels: channels)
        lastBandCount = bands
        let sourceStride = source.bytesPerRow, destinationStride = destination.bytesPerRow
        let width = destination.width, outputRows = destination.height, style = source.style
        source.withUnsafeBytes { src in
            destination.withUnsafeMutableBytes { dst in
                let srcBase = UnsafePointer(src.baseAddress!.assumingMemoryBound(to: UInt8.self))
                let dstBase = dst.baseAddress!.assumingMemoryBound(to: UInt8.self)
                guard bands > 1 else {
                    run(
                        h, v, style: style, rows: 0..<outputRows, source: srcBase, sourceStride: sourceStride,
                        into: dstBase, destinationStride: destinationStride, width: width)
                    finish?(dstBase, PixelSize(width: width, height: outputRows), destinationStride)
                    return
                }
                // Bands of output rows through `forkJoin`, each with its own scratch (this
                // resampler and its helpers); the tables are shared, read-only. Every output row
                // is computed exactly as in one band: the result is the same bytes.
                while helpers.count < bands - 1 { helpers.append(Resampler(filter: filter)) }
                let split = Bands(
                    workers: [self] + helpers.prefix(bands - 1), source: srcBase, destination: dstBase)
                for worker in split.workers { worker.usesAVX2 = usesAVX2 }
                forkJoin.forEach(bands) { band in
                    let rows = outputRows * band / bands..<outputRows * (band + 1) / bands
                    split.workers[band].run(
                        h, v, style: style, rows: rows, source: split.source, sourceStride: sourceStride,
                        into: split.destination, destinationStride: destinationStride, width: width)
                    finish?(
                        split.destination + rows.lowerBound * destinationStride, PixelSize(width: width, height: rows.count),
                        destinationStride)
                }
            }
        }
    }

    /// How many bands one resample is split into: 1 unless ``threads`` allows more and the work
    /// (multiply-adds, all channels) is at least `parallelWork` a band; never more bands than
    /// output rows.
    package func bandCount(_ h: ResamplerTable, _ v: ResamplerTable, channels: Int) -> Int {
        let threads = Swift.min(self.threads, maximumBands)
        guard threads > 1 else { return 1 }
        return max(1, min(threads, v.starts.count, work(h, v, channels: channels) / max(1, parallelWork)))
    }

    /// A resample's multiply-adds: taps × output samples × channels, both passes.
    package func work(_ h: ResamplerTable, _ v: ResamplerTable, channels: Int) -> Int {
        ((v.spanEnd - v.spanStart) * h.starts.count * h.taps + v.starts.count * h.starts.count * v.taps) * channels
    }

    /// Output rows `rows` of the resample: the horizontal pass of the source rows they need
    /// into this resampler's ring, the vertical blend, the rounding. Uses only this resampler's
    /// scratch, so bands on different resamplers run in parallel. With `keepingRing`, the ring
    /// rows a previous call of the same resample filtered are reused (the source rows and the
    /// tables must be the same).
    package func run(
        _ h: ResamplerTable, _ v: ResamplerTable, style: PixelStyle, rows: Range<Int>, source: UnsafePointer<UInt8>,
        sourceStride: Int, into dstBase: UnsafeMutablePointer<UInt8>, destinationStride: Int, width: Int,
        keepingRing: Bool = false
    ) {
        let channels = style.bytesPerPixel
        let spanValues = (h.spanEnd - h.spanStart) * channels
        let outValues = width * channels
        // Ring rows padded to an odd number of 64-byte lines (16 floats), so that the rows an
        // output row blends do not all fall in one L1 set; one slot more than the most taps an
        // output row uses, so a row's window never evicts a row of the same window.
        let ringStride = (((outValues + 15) >> 4) | 1) << 4
        let ringRows = v.taps + 1
        let fixedPoint = channels == 4 ? h.fixedPoint : nil
        let avx2 = usesAVX2
        let pairElements = ((h.spanEnd - h.spanStart) + 1) / 2 + 1
        let sourceRow = self.sourceRow.reserve(fixedPoint == nil ? spanValues : 0)
        let pairRow = self.pairRow.reserve(fixedPoint == nil || avx2 ? 0 : h.spanEnd - h.spanStart)
        let evenPairs = self.evenPairs.reserve(fixedPoint != nil && avx2 ? pairElements * 8 : 0)
        let evenPairs2 = self.evenPairs2.reserve(fixedPoint != nil && avx2 ? pairElements * 8 : 0)
        let ring = self.ring.reserve(ringRows * ringStride)
        let ringSourceRows = self.ringSourceRows.reserve(ringRows)
        let ringPointers = self.ringPointers.reserve(v.taps)
        // The AVX2 4-channel path blends straight to bytes, without a float output row.
        let outputRow = self.outputRow.reserve(avx2 && channels == 4 ? 0 : outValues)
        if !keepingRing { ringSourceRows.initialize(repeating: -1, count: ringRows) }
        let srcBase = source + h.spanStart * channels
        h.weights.withUnsafeBufferPointer { hw in
            h.starts.withUnsafeBufferPointer { hs in
                h.counts.withUnsafeBufferPointer { hc in
                    v.weights.withUnsafeBufferPointer { vw in
                        (fixedPoint?.pairs ?? []).withUnsafeBufferPointer { hf in
                            (fixedPoint?.alignedPairs ?? []).withUnsafeBufferPointer { af in
                                for y in rows {
                                    let first = v.starts[y], n = v.counts[y]
                                    for k in 0..<n {
                                        let r = first + k
                                        let slot = r % ringRows
                                        let ringRow = ring + slot * ringStride
                                        if ringSourceRows[slot] != r {
                                            let sourceLine = srcBase + r * sourceStride
                                            if let fixedPoint, avx2 {
                                                // Pairs from even pixels only, with the aligned weights.
                                                let pixels = h.spanEnd - h.spanStart
                                                let next = r + 1, nextSlot = next % ringRows
                                                strata_pairs_avx2(sourceLine, pixels, evenPairs)
                                                if next < v.spanEnd {
                                                    // Two rows at once, sharing the coefficient loads: the
                                                    // next row is needed by this output row or a later one
                                                    // (at a band's end, perhaps only by the next band's), and
                                                    // its slot holds a row older than this window.
                                                    strata_pairs_avx2(sourceLine + sourceStride, pixels, evenPairs2)
                                                    strata_filter_rows4x2_avx2(
                                                        evenPairs, evenPairs2, h.spanStart,
                                                        fixedPoint.alignedStarts, fixedPoint.alignedCounts,
                                                        UnsafeRawPointer(af.baseAddress!).assumingMemoryBound(to: Int16.self),
                                                        fixedPoint.alignedStride, 1 / Float(fixedPoint.scale), width, ringRow,
                                                        ring + nextSlot * ringStride)
                                                    ringSourceRows[nextSlot] = next
                                                } else {
                                                    strata_filter_row4_avx2(
                                                        evenPairs, h.spanStart,
                                                        fixedPoint.alignedStarts, fixedPoint.alignedCounts,
                                                        UnsafeRawPointer(af.baseAddress!).assumingMemoryBound(to: Int16.self),
                                                        fixedPoint.alignedStride, 1 / Float(fixedPoint.scale), width, ringRow)
                                                }
                                            } else if let fixedPoint {
                                                Self.interleavePairs(sourceLine, pixels: h.spanEnd - h.spanStart, into: pairRow)
                                                Self.filterRow4Fixed(
                                                    pairRow, span: h.spanStart, starts: hs.baseAddress!,
                                                    counts: hc.baseAddress!, coefficients: hf.baseAddress!,
                                                    pairs: h.pairs, scale: fixedPoint.scale, width: width,
                                                    into: ringRow)
                                            } else if channels == 4 {
                                                Self.widen(sourceLine, count: spanValues, into: sourceRow)
                                                Self.filterRow4(
                                                    sourceRow, span: h.spanStart, starts: hs.baseAddress!,
                                                    counts: hc.baseAddress!, weights: hw.baseAddress!, taps: h.taps,
                                                    width: width, into: ringRow)
                                            } else {
                                                Self.widen(sourceLine, count: spanValues, into: sourceRow)
                                                Self.filterRow1(
                                                    sourceRow, span: h.spanStart, starts: hs.baseAddress!,
                                                    counts: hc.baseAddress!, weights: hw.baseAddress!, taps: h.taps,
                                                    width: width, into: ringRow)
                                            }
                                            ringSourceRows[slot] = r
                                        }
                                        ringPointers[k] = UnsafePointer(ringRow)
                                    }
                                    let out = dstBase + y * destinationStride
                                    let rows = UnsafeRawPointer(ringPointers).assumingMemoryBound(
                                        to: UnsafePointer<Float>?.self)
                                    if avx2 && channels == 4 {
                                        // Blend and round in registers, straight to bytes.
                                        strata_blend_store4_avx2(
                                            rows, vw.baseAddress! + y * v.taps, n, width, style == .bgrx32 ? 1 : 0, out)
                                        continue
                                    }
                                    if avx2 {
                                        strata_blend_rows_avx2(rows, vw.baseAddress! + y * v.taps, n, outValues, outputRow)
                                    } else {
                                        Self.blendRows(
                                            ringPointers, weights: vw.baseAddress! + y * v.taps, count: n,
                                            values: outValues, into: outputRow)
                                    }
                                    switch style {
                                    case .bgra32Premultiplied: Self.store4(outputRow, width: width, opaque: false, into: out)
                                    case .bgrx32: Self.store4(outputRow, width: width, opaque: true, into: out)
                                    case .gray8: Self.store1(outputRow, width: width, into: out)
                                    case .rgb565: preconditionFailure("handled above")
                                    }
                                }
                            }
                        }
                    }
                }
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

    private func copy(_ source: PixelImage, x: Int, y: Int, into destination: inout PixelImage) {
        let bpp = source.style.bytesPerPixel
        let rowBytes = destination.width * bpp
        let sourceStride = source.bytesPerRow, destinationStride = destination.bytesPerRow
        let height = destination.height
        source.withUnsafeBytes { src in
            destination.withUnsafeMutableBytes { dst in
                for row in 0..<height {
                    (dst.baseAddress! + row * destinationStride)
                        .copyMemory(from: src.baseAddress! + (y + row) * sourceStride + x * bpp, byteCount: rowBytes)
                }
            }
        }
    }

    package func table(_ cache: inout ResamplerTable?, _ key: ResamplerTable.Key) -> ResamplerTable {
        if let cached = cache, cached.key == key { return cached }
        let fresh = ResamplerTable(key)
        cache = fresh
        return fresh
    }
}

/// What the bands of one split resample share. Unchecked: `ForkJoin.forEach` returns only when
/// every band has finished, band `i` uses only `workers[i]` (its own scratch) and writes only
/// its own output rows, and the source is only read.
private struct Bands: @unchecked Sendable {
    let workers: [Resampler]
    let source: UnsafePointer<UInt8>
    let destination: UnsafeMutablePointer<UInt8>
}

/// A growable, uninitialised scratch allocation owned by one ``Resampler`` (freed by its deinit).
private struct ScratchBuffer<Element> {
    private(set) var pointer: UnsafeMutablePointer<Element>?
    private(set) var capacity = 0

    /// At least `count` elements (contents unspecified after growing).
    mutating func reserve(_ count: Int) -> UnsafeMutablePointer<Element> {
        if let pointer, capacity >= count { return pointer }
        pointer?.deallocate()
        let fresh = UnsafeMutablePointer<Element>.allocate(capacity: Swift.max(count, 1))
        pointer = fresh
        capacity = Swift.max(count, 1)
        return fresh
    }

    mutating func free() {
        pointer?.deallocate()
        pointer = nil
        capacity = 0
    }
}
