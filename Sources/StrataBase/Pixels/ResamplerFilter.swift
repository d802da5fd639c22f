#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The reconstruction kernel a ``Resampler`` convolves with.
///
/// When downscaling, every kernel is stretched by the reduction factor (its support grows with
/// it), so it also acts as the anti-aliasing low-pass filter; this is what Pillow and libvips
/// do, and what makes a resize comparable with theirs. Cost grows with the support: a
/// `.lanczos3` reduction by `f` reads about `6f` source pixels per output pixel and axis,
/// `.bilinear` `2f`, `.box` `f`.
public enum ResamplingFilter: Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The resizing kernels (``gaussian(sigma:)`` is a blur, not one of them).
    public static let allCases: [ResamplingFilter] = [.lanczos3, .bicubic, .bilinear, .box]

    /// Lanczos windowed sinc with 3 lobes (support 3): the sharpest, the default, and the one
    /// thumbnails are compared against.
    case lanczos3
    /// Catmull-Rom cubic (Keys, a = −0.5; support 2), as Pillow's `BICUBIC`.
    case bicubic
    /// Triangle (tent) filter (support 1): cheaper, slightly blurrier.
    case bilinear
    /// Area average (support ½): the cheapest antialiasing filter, for previews.
    case box
    /// A Gaussian of standard deviation `sigma` (support 3σ): applied at 1:1 it is a blur
    /// (``PixelImage/blurred(sigma:threads:forkJoin:)``), banded like any resample.
    case gaussian(sigma: Double)

    /// Half-width of the kernel, in output-pixel units (before stretching for reduction).
    public var support: Double {
        switch self {
        case .lanczos3: return 3
        case .bicubic: return 2
        case .bilinear: return 1
        case .box: return 0.5
        case .gaussian(let sigma): return 3 * sigma
        }
    }

    /// The kernel's value at distance `x` (in output-pixel units) from the sample centre.
    public func weight(at x: Double) -> Double {
        switch self {
        case .lanczos3:
            let ax = abs(x)
            guard ax < 3 else { return 0 }
            return Self.sinc(x) * Self.sinc(x / 3)
        case .bicubic:
            let a = -0.5, ax = abs(x)
            if ax < 1 { return ((a + 2) * ax - (a + 3)) * ax * ax + 1 }
            if ax < 2 { return (((ax - 5) * ax + 8) * ax - 4) * a }
            return 0
        case .bilinear:
            let ax = abs(x)
            return ax < 1 ? 1 - ax : 0
        case .box:
            // Half-open so that a pixel exactly on a boundary counts once; (−½, ½] as Pillow,
            // which matches the tap window (first tap ⌊centre − support + ½⌋).
            return x > -0.5 && x <= 0.5 ? 1 : 0
        case .gaussian(let sigma):
            guard abs(x) <= 3 * sigma else { return 0 }
            return exp(-x * x / (2 * sigma * sigma))
        }
    }

    private static func sinc(_ x: Double) -> Double {
        if x == 0 { return 1 }
        let px = Double.pi * x
        return sin(px) / px
    }

    public var description: String {
        switch self {
        case .lanczos3: return "lanczos3"
        case .bicubic: return "bicubic"
        case .bilinear: return "bilinear"
        case .box: return "box"
        case .gaussian(let sigma): return "gaussian(\(sigma))"
        }
    }
}

/// Precomputed convolution weights for one axis: for each output sample, the first source
/// index, the number of taps and their normalised weights (rows of `taps` floats, zero-padded).
package struct ResamplerTable {
    package struct Key: Hashable {
        package init(sourceLength: Int, regionStart: Double, regionLength: Double, destinationLength: Int, filter: ResamplingFilter) {
            self.sourceLength = sourceLength
            self.regionStart = regionStart
            self.regionLength = regionLength
            self.destinationLength = destinationLength
            self.filter = filter
        }

        package var sourceLength: Int
        package var regionStart: Double
        package var regionLength: Double
        package var destinationLength: Int
        package var filter: ResamplingFilter
    }

    package let key: Key
    /// Weights per output sample (the row stride of `weights`).
    package let taps: Int
    /// First source index of each output sample.
    package let starts: [Int]
    /// Number of taps of each output sample (≤ `taps`).
    package let counts: [Int]
    /// `destinationLength × taps` weights, zero past each sample's count.
    package let weights: [Float]
    /// The source indices any output reads: `spanStart ..< spanEnd`.
    package let spanStart: Int
    package let spanEnd: Int
    /// Whether output `i` is exactly source `starts[0] + i` (an integer-aligned 1:1 mapping).
    package let isShift: Bool
    /// The weights in fixed point for the 16-bit multiply-add pass, or `nil` when they do not
    /// fit it (see ``FixedPointWeights``); the float weights are used then.
    package let fixedPoint: FixedPointWeights?
    /// Elements of `fixedPoint.pairs` per output sample: `⌈taps / 2⌉`.
    package var pairs: Int { (taps + 1) / 2 }

    /// The weights as 16-bit integers (value × `scale`), two taps per element laid out for a
    /// 16-bit multiply-add over channel-interleaved pixel pairs: element `k` of output `i` (at
    /// `i × pairs + k`) is `(w₂ₖ, w₂ₖ₊₁)` repeated four times. Each output's weights are
    /// rounded so that they still sum to exactly `scale` (a flat image stays flat).
    ///
    /// `scale` is 2¹⁵ when every weight fits (reductions: no weight near 1), else 2¹⁴; a table
    /// is converted only while `taps × 255 / scale ≤ ½` (64 taps at 2¹⁵, 32 at 2¹⁴), which
    /// bounds how far the rounding of the weights moves a filtered value: at most half a
    /// level, before the final rounding.
    ///
    /// `aligned…` are the same weights for a pass that reads pairs starting at even pixels only
    /// (counted from `spanStart`; the AVX2 kernels, which then build half as many pairs): an
    /// output whose first tap is at an odd pixel starts one pixel earlier with a zero weight.
    package struct FixedPointWeights {
        package let pairs: [SIMD8<Int16>]
        /// The value of 1.
        package let scale: Int32
        /// First source index of each output sample, `spanStart` + an even number.
        package let alignedStarts: [Int]
        /// Taps of each output sample from its aligned start (one more where it moved).
        package let alignedCounts: [Int]
        /// Elements per output sample of `alignedPairs`: `⌈(taps + 1) / 2⌉`.
        package let alignedStride: Int
        package let alignedPairs: [SIMD8<Int16>]
    }

    /// Builds the table the way Pillow's and libvips' reducers do: output sample `i` is centred
    /// on source coordinate `regionStart + (i + ½) · scale`; the kernel is stretched by
    /// `max(scale, 1)`; taps outside `0 ..< sourceLength` are dropped and the rest renormalised
    /// (edge pixels are not extended).
    package init(_ key: Key) {
        precondition(key.sourceLength > 0 && key.destinationLength > 0)
        self.key = key
        let scale = key.regionLength / Double(key.destinationLength)
        let stretch = max(scale, 1)
        let support = key.filter.support * stretch
        let inverse = 1 / stretch
        let taps = max(1, Int((support * 2).rounded(.up)) + 1)
        var starts = [Int](repeating: 0, count: key.destinationLength)
        var counts = [Int](repeating: 0, count: key.destinationLength)
        var weights = [Float](repeating: 0, count: key.destinationLength * taps)
        var scratch = [Double](repeating: 0, count: taps)
        var spanStart = Int.max, spanEnd = Int.min
        for i in 0..<key.destinationLength {
            let centre = key.regionStart + (Double(i) + 0.5) * scale
            var first = Int((centre - support + 0.5).rounded(.down))
            var end = Int((centre + support + 0.5).rounded(.down))
            first = max(first, 0)
            end = min(end, key.sourceLength, first + taps)
            var total = 0.0
            var n = 0
            if first < end {
                for j in first..<end {
                    var w = key.filter.weight(at: (Double(j) - centre + 0.5) * inverse)
                    // sin(kπ) is ~1e-16, not 0: make the kernel's zeros exact so that they are
                    // trimmed (an integer-aligned 1:1 mapping becomes a single tap of weight 1).
                    if abs(w) < 1e-9 { w = 0 }
                    scratch[j - first] = w
                    total += w
                }
                n = end - first
            }
            if n == 0 || total == 0 {
                // Region outside the image (or a degenerate kernel): nearest clamped pixel.
                first = min(max(Int(centre.rounded(.down)), 0), key.sourceLength - 1)
                n = 1
                scratch[0] = 1
                total = 1
            }
            // Trim zero weights at both ends (keeps the inner loops short).
            var lo = 0, hi = n
            while hi - lo > 1 && scratch[lo] == 0 { lo += 1 }
            while hi - lo > 1 && scratch[hi - 1] == 0 { hi -= 1 }
            starts[i] = first + lo
            counts[i] = hi - lo
            for k in lo..<hi { weights[i * taps + k - lo] = Float(scratch[k] / total) }
            spanStart = min(spanStart, first + lo)
            spanEnd = max(spanEnd, first + hi)
        }
        self.taps = taps
        self.starts = starts
        self.counts = counts
        self.weights = weights
        self.spanStart = spanStart
        self.spanEnd = spanEnd
        // A pure shift: every output sample is one source sample with weight 1, in order.
        var shift = true
        for i in 0..<key.destinationLength where counts[i] != 1 || weights[i * taps] != 1 || starts[i] != starts[0] + i {
            shift = false
            break
        }
        self.isShift = shift
        self.fixedPoint =
            Self.fixedPoint(weights, starts: starts, counts: counts, span: spanStart, taps: taps, scale: 1 << 15)
            ?? Self.fixedPoint(weights, starts: starts, counts: counts, span: spanStart, taps: taps, scale: 1 << 14)
    }

    private static func fixedPoint(
        _ weights: [Float], starts: [Int], counts: [Int], span: Int, taps: Int, scale: Int32
    ) -> FixedPointWeights? {
        guard taps * 255 * 2 <= Int(scale) else { return nil }
        let one = Double(scale)
        let pairs = (taps + 1) / 2
        let alignedStride = (taps + 2) / 2
        var out = [SIMD8<Int16>](repeating: SIMD8(), count: counts.count * pairs)
        var aligned = [SIMD8<Int16>](repeating: SIMD8(), count: counts.count * alignedStride)
        var alignedStarts = starts, alignedCounts = counts
        var quantised = [Int](repeating: 0, count: pairs * 2)
        var shifted = [Int](repeating: 0, count: alignedStride * 2)
        for i in 0..<counts.count {
            var total = 0, largest = 0
            for k in 0..<pairs * 2 {
                let w = k < counts[i] ? Double(weights[i * taps + k]) : 0
                quantised[k] = Int((w * one).rounded())
                total += quantised[k]
                if abs(quantised[k]) > abs(quantised[largest]) { largest = k }
            }
            // Put the rounding residue on the largest weight, where it matters least.
            quantised[largest] += Int(scale) - total
            var magnitude = 0
            for k in 0..<pairs * 2 {
                if abs(quantised[k]) > Int(Int16.max) { return nil }
                magnitude += abs(quantised[k])
            }
            // The 32-bit accumulators must hold Σ|w| × 255.
            if magnitude * 255 > Int(Int32.max) { return nil }
            for k in 0..<pairs {
                let a = Int16(quantised[2 * k]), b = Int16(quantised[2 * k + 1])
                out[i * pairs + k] = SIMD8(a, b, a, b, a, b, a, b)
            }
            let odd = (starts[i] - span) & 1
            alignedStarts[i] -= odd
            alignedCounts[i] += odd
            for k in 0..<alignedStride * 2 {
                let j = k - odd
                shifted[k] = j >= 0 && j < pairs * 2 ? quantised[j] : 0
            }
            for k in 0..<alignedStride {
                let a = Int16(shifted[2 * k]), b = Int16(shifted[2 * k + 1])
                aligned[i * alignedStride + k] = SIMD8(a, b, a, b, a, b, a, b)
            }
        }
        return FixedPointWeights(
            pairs: out, scale: scale, alignedStarts: alignedStarts, alignedCounts: alignedCounts,
            alignedStride: alignedStride, alignedPairs: aligned)
    }
}
