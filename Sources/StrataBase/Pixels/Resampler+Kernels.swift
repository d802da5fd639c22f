/// The portable (Swift SIMD) kernels of ``Resampler``: the horizontal passes, the vertical blend
/// and the rounding to bytes. They run where the CPU lacks AVX2, and on every CPU for
/// one-channel images and for reductions beyond the fixed-point taps; the tests hold the AVX2
/// kernels of `CStrataSIMD` to them. Each works on one row; the resampler owns the memory.
extension Resampler {
    /// `out[j] = Float(row[j])` for `j < count` (vectorised widening).
    @inline(__always)
    package static func widen(_ row: UnsafePointer<UInt8>, count: Int, into out: UnsafeMutablePointer<Float>) {
        for j in 0..<count { out[j] = Float(row[j]) }
    }

    /// `out[j] = Σₖ weights[k] · rows[k][j]` for `j < values`.
    ///
    /// Taps are taken four at a time over the whole row: plain counted loops that the compiler
    /// vectorises, with the output row staying in L1 between groups.
    @inline(__always)
    package static func blendRows(
        _ rows: UnsafeMutablePointer<UnsafePointer<Float>>, weights w: UnsafePointer<Float>, count n: Int,
        values: Int, into out: UnsafeMutablePointer<Float>
    ) {
        var k = 0
        // The first group initialises the row.
        switch n {
        case 1:
            let a = rows[0], wa = w[0]
            for j in 0..<values { out[j] = a[j] * wa }
            return
        case 2:
            let a = rows[0], b = rows[1], wa = w[0], wb = w[1]
            for j in 0..<values { out[j] = a[j] * wa + b[j] * wb }
            return
        case 3:
            let a = rows[0], b = rows[1], c = rows[2], wa = w[0], wb = w[1], wc = w[2]
            for j in 0..<values { out[j] = a[j] * wa + b[j] * wb + c[j] * wc }
            return
        default:
            let a = rows[0], b = rows[1], c = rows[2], d = rows[3]
            let wa = w[0], wb = w[1], wc = w[2], wd = w[3]
            for j in 0..<values { out[j] = (a[j] * wa + b[j] * wb) + (c[j] * wc + d[j] * wd) }
            k = 4
        }
        while n - k >= 4 {
            let a = rows[k], b = rows[k + 1], c = rows[k + 2], d = rows[k + 3]
            let wa = w[k], wb = w[k + 1], wc = w[k + 2], wd = w[k + 3]
            for j in 0..<values { out[j] += (a[j] * wa + b[j] * wb) + (c[j] * wc + d[j] * wd) }
            k += 4
        }
        switch n - k {
        case 1:
            let a = rows[k], wa = w[k]
            for j in 0..<values { out[j] += a[j] * wa }
        case 2:
            let a = rows[k], b = rows[k + 1], wa = w[k], wb = w[k + 1]
            for j in 0..<values { out[j] += a[j] * wa + b[j] * wb }
        case 3:
            let a = rows[k], b = rows[k + 1], c = rows[k + 2], wa = w[k], wb = w[k + 1], wc = w[k + 2]
            for j in 0..<values { out[j] += a[j] * wa + b[j] * wb + c[j] * wc }
        default:
            break
        }
    }

    /// Horizontal pass for 4-channel pixels: one `SIMD4<Float>` per output pixel, with four
    /// independent accumulators so that the adds overlap.
    @inline(__always)
    package static func filterRow4(
        _ row: UnsafeMutablePointer<Float>, span: Int, starts: UnsafePointer<Int>, counts: UnsafePointer<Int>,
        weights: UnsafePointer<Float>, taps: Int, width: Int, into out: UnsafeMutablePointer<Float>
    ) {
        let pixels = UnsafeRawPointer(row)
        let output = UnsafeMutableRawPointer(out)
        for x in 0..<width {
            let n = counts[x]
            let w = weights + x * taps
            let p = pixels + (starts[x] - span) * 16
            var a0 = SIMD4<Float>(), a1 = SIMD4<Float>(), a2 = SIMD4<Float>(), a3 = SIMD4<Float>()
            var k = 0
            while k + 4 <= n {
                a0 += p.loadUnaligned(fromByteOffset: k * 16, as: SIMD4<Float>.self) * w[k]
                a1 += p.loadUnaligned(fromByteOffset: k * 16 + 16, as: SIMD4<Float>.self) * w[k + 1]
                a2 += p.loadUnaligned(fromByteOffset: k * 16 + 32, as: SIMD4<Float>.self) * w[k + 2]
                a3 += p.loadUnaligned(fromByteOffset: k * 16 + 48, as: SIMD4<Float>.self) * w[k + 3]
                k += 4
            }
            while k < n {
                a0 += p.loadUnaligned(fromByteOffset: k * 16, as: SIMD4<Float>.self) * w[k]
                k += 1
            }
            output.storeBytes(of: (a0 + a1) + (a2 + a3), toByteOffset: x * 16, as: SIMD4<Float>.self)
        }
    }

    /// `out[j]` = source pixels `j` and `j + 1` with their channels interleaved and widened to
    /// 16 bits, `(b₀, b₁, g₀, g₁, r₀, r₁, a₀, a₁)`, for `j < pixels` (pixel `pixels` reads as 0).
    /// Every pixel lands in two elements, so a window of taps starting at any pixel is a run
    /// of whole elements.
    @inline(__always)
    package static func interleavePairs(
        _ row: UnsafePointer<UInt8>, pixels: Int,
        into out: UnsafeMutablePointer<SIMD8<Int16>>
    ) {
        let raw = UnsafeRawPointer(row)
        var j = 0
        // Four elements at a time: the bytes of pixels j… and j+1… interleaved (two byte
        // unpacks), then zero-extended to 16 bits (four more), with no other shuffles.
        while j + 5 <= pixels {
            let a = raw.loadUnaligned(fromByteOffset: j * 4, as: SIMD16<UInt8>.self)
            let b = raw.loadUnaligned(fromByteOffset: j * 4 + 4, as: SIMD16<UInt8>.self)
            let low = SIMD16<UInt8>(
                a[0], b[0], a[1], b[1], a[2], b[2], a[3], b[3],
                a[4], b[4], a[5], b[5], a[6], b[6], a[7], b[7])
            let high = SIMD16<UInt8>(
                a[8], b[8], a[9], b[9], a[10], b[10], a[11], b[11],
                a[12], b[12], a[13], b[13], a[14], b[14], a[15], b[15])
            out[j] = SIMD8<Int16>(truncatingIfNeeded: low.lowHalf)
            out[j + 1] = SIMD8<Int16>(truncatingIfNeeded: low.highHalf)
            out[j + 2] = SIMD8<Int16>(truncatingIfNeeded: high.lowHalf)
            out[j + 3] = SIMD8<Int16>(truncatingIfNeeded: high.highHalf)
            j += 4
        }
        @inline(__always) func pair(_ v: SIMD8<UInt8>) -> SIMD8<Int16> {
            SIMD8<Int16>(truncatingIfNeeded: SIMD8<UInt8>(v[0], v[4], v[1], v[5], v[2], v[6], v[3], v[7]))
        }
        while j < pixels - 1 {
            out[j] = pair(raw.loadUnaligned(fromByteOffset: j * 4, as: SIMD8<UInt8>.self))
            j += 1
        }
        let last = raw.loadUnaligned(fromByteOffset: (pixels - 1) * 4, as: SIMD4<UInt8>.self)
        out[pixels - 1] = pair(SIMD8(lowHalf: last, highHalf: SIMD4()))
    }

    /// Horizontal pass for 4-channel pixels in fixed point: per output pixel, one 16-bit
    /// multiply-add (`pmaddwd`: two taps × four channels) per pair of taps into 32-bit sums,
    /// converted to floats for the vertical pass.
    @inline(__always)
    package static func filterRow4Fixed(
        _ pairs: UnsafeMutablePointer<SIMD8<Int16>>, span: Int, starts: UnsafePointer<Int>, counts: UnsafePointer<Int>,
        coefficients: UnsafePointer<SIMD8<Int16>>, pairs perOutput: Int, scale: Int32, width: Int,
        into out: UnsafeMutablePointer<Float>
    ) {
        // Wrapping arithmetic and running pointers: the indices come from the table and are in
        // range, and the overflow checks would cost about as much as the taps.
        var output = UnsafeMutableRawPointer(out)
        var c = coefficients
        let unit = 1 / Float(scale)
        for x in 0..<width {
            let n = (counts[x] &+ 1) &>> 1
            let p = pairs + (starts[x] &- span)
            var sum = SIMD4<Int32>()
            var k = 0
            while k < n {
                let product = SIMD8<Int32>(truncatingIfNeeded: p[k &* 2]) &* SIMD8<Int32>(truncatingIfNeeded: c[k])
                sum &+= product.evenHalf &+ product.oddHalf
                k &+= 1
            }
            output.storeBytes(of: SIMD4<Float>(sum) * unit, as: SIMD4<Float>.self)
            output += 16
            c += perOutput
        }
    }

    /// Horizontal pass for one-channel pixels.
    @inline(__always)
    package static func filterRow1(
        _ row: UnsafeMutablePointer<Float>, span: Int, starts: UnsafePointer<Int>, counts: UnsafePointer<Int>,
        weights: UnsafePointer<Float>, taps: Int, width: Int, into out: UnsafeMutablePointer<Float>
    ) {
        for x in 0..<width {
            let first = starts[x] - span, n = counts[x]
            let w = weights + x * taps
            var a0: Float = 0, a1: Float = 0
            var k = 0
            while k + 2 <= n {
                a0 += row[first + k] * w[k]
                a1 += row[first + k + 1] * w[k + 1]
                k += 2
            }
            if k < n { a0 += row[first + k] * w[k] }
            out[x] = a0 + a1
        }
    }

    /// Rounds a filtered sample to a byte value: clamped to 0…255, then rounded to nearest
    /// (ties to even) by adding 2²³, whose float spacing is 1 — no libm call, no trap check.
    @inline(__always)
    package static func byte(_ v: Float) -> UInt32 {
        (Swift.min(Swift.max(v, 0), 255) + 8_388_608).bitPattern & 0xFF
    }

    /// Rounds a row of 4-channel samples to bytes. Premultiplied colour is clamped to its alpha
    /// (Lanczos ringing can push it over); BGRx gets an opaque fourth byte.
    @inline(__always)
    package static func store4(
        _ row: UnsafeMutablePointer<Float>, width: Int, opaque: Bool,
        into out: UnsafeMutablePointer<UInt8>
    ) {
        let output = UnsafeMutableRawPointer(out)
        for x in 0..<width {
            let p = row + 4 * x
            var b = byte(p[0]), g = byte(p[1]), r = byte(p[2])
            let a: UInt32
            if opaque {
                a = 255
            } else {
                a = byte(p[3])
                b = Swift.min(b, a)
                g = Swift.min(g, a)
                r = Swift.min(r, a)
            }
            output.storeBytes(of: (b | g << 8 | r << 16 | a << 24).littleEndian, toByteOffset: x * 4, as: UInt32.self)
        }
    }

    /// Rounds a row of one-channel samples to bytes.
    @inline(__always)
    package static func store1(_ row: UnsafeMutablePointer<Float>, width: Int, into out: UnsafeMutablePointer<UInt8>) {
        for x in 0..<width { out[x] = UInt8(truncatingIfNeeded: byte(row[x])) }
    }
}
