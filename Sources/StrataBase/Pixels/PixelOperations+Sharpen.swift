#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An unsharp mask on CIE lightness (`sharpen=`), as libvips' `sharpen` makes it with its
/// defaults: the difference between L* and L* blurred by a Gaussian of `sigma` (cut where it
/// falls below a tenth of its peak) goes through a curve — nothing below 2 L*, three times the
/// rest, at most +10 and −20 L* — and is added to L*, a* and b* kept.
extension PixelImage {
    /// The image sharpened on its lightness (see the extension). Colour channels are taken as
    /// sRGB; translucent pixels are sharpened on their straight colour and premultiplied again;
    /// alpha is kept. Only pixels whose curve gives a change are converted back from L*a*b*.
    /// Cost: a lightness plane of floats, a separable blur of it (about 4σ + 1 taps a pass),
    /// one pass back.
    public func sharpened(sigma: Double, threads: Int = 1, forkJoin: ForkJoin = .dispatch) -> PixelImage {
        precondition(style.bytesPerPixel == 4, "sharpening works on 4-byte pixels")
        let (w, h, stride) = (width, height, bytesPerRow)
        let premultiplied = style == .bgra32Premultiplied
        let tables = LabTables.shared
        let weights = Self.lightnessMask(sigma: sigma)
        let radius = weights.count / 2
        var result = self
        // Three float planes: L*, L* blurred across, L* blurred both ways (the last reuses the
        // first's neighbours, so it has its own).
        let lightness = UnsafeMutablePointer<Float>.allocate(capacity: w * h)
        let across = UnsafeMutablePointer<Float>.allocate(capacity: w * h)
        defer {
            lightness.deallocate()
            across.deallocate()
        }
        let bands = Swift.max(1, Swift.min(threads, h / 64))
        result.withUnsafeMutableBytes { raw in
            let planes = SharpenPlanes(pixels: raw.baseAddress!, lightness: lightness, across: across)
            // Pass 1, by bands of rows: L* of each pixel, then blurred along its row.
            forkJoin.forEach(bands) { band in
                let rows = (h * band / bands)..<(h * (band + 1) / bands)
                for y in rows {
                    let row = (planes.pixels + y * stride).assumingMemoryBound(to: SIMD4<UInt8>.self)
                    let l = planes.lightness + y * w
                    for x in 0..<w { l[x] = tables.lightness(of: row[x], premultiplied: premultiplied) }
                    Self.convolve(l, count: w, step: 1, weights: weights, radius: radius, into: planes.across + y * w)
                }
            }
            // Pass 2, by bands: blurred down the columns, the curve, and the changed pixels back.
            forkJoin.forEach(bands) { band in
                let rows = (h * band / bands)..<(h * (band + 1) / bands)
                var blurred = [Float](repeating: 0, count: w)
                for y in rows {
                    blurred.withUnsafeMutableBufferPointer { out in
                        out.update(repeating: 0)
                        for k in -radius...radius {
                            let from = planes.across + Swift.min(h - 1, Swift.max(0, y + k)) * w
                            let weight = weights[k + radius]
                            for x in 0..<w { out[x] += weight * from[x] }
                        }
                    }
                    let row = (planes.pixels + y * stride).assumingMemoryBound(to: SIMD4<UInt8>.self)
                    let l = planes.lightness + y * w
                    for x in 0..<w {
                        let change = Self.sharpenCurve(l[x] - blurred[x])
                        guard change != 0 else { continue }
                        row[x] = tables.withLightness(
                            row[x], from: l[x], to: Swift.min(100, Swift.max(0, l[x] + change)), premultiplied: premultiplied)
                    }
                }
            }
        }
        return result
    }

    /// The normalised Gaussian mask of the sharpen, cut where it falls below 0.1 of its peak (as
    /// libvips' sharpen cuts its own).
    static func lightnessMask(sigma: Double) -> [Float] {
        var radius = 0
        while exp(-Double((radius + 1) * (radius + 1)) / (2 * sigma * sigma)) >= 0.1 { radius += 1 }
        let weights = (-radius...radius).map { exp(-Double($0 * $0) / (2 * sigma * sigma)) }
        let total = weights.reduce(0, +)
        return weights.map { Float($0 / total) }
    }

    /// `source[0..<count]` (elements `step` apart) convolved with `weights`, edges repeated.
    static func convolve(
        _ source: UnsafePointer<Float>, count: Int, step: Int, weights: [Float], radius: Int, into out: UnsafeMutablePointer<Float>
    ) {
        weights.withUnsafeBufferPointer { wts in
            for x in 0..<count {
                var sum: Float = 0
                if x >= radius && x + radius < count {
                    for k in 0..<wts.count { sum += wts[k] * source[(x - radius + k) * step] }
                } else {
                    for k in 0..<wts.count { sum += wts[k] * source[Swift.min(count - 1, Swift.max(0, x - radius + k)) * step] }
                }
                out[x * step] = sum
            }
        }
    }

    /// libvips' default curve (x1 = 2, m1 = 0, m2 = 3, y2 = 10, y3 = 20), in L* units.
    @inline(__always)
    static func sharpenCurve(_ d: Float) -> Float {
        let x1: Float = 2, m2: Float = 3
        if d > x1 { return Swift.min(10, (d - x1) * m2) }
        if d < -x1 { return Swift.max(-20, (d + x1) * m2) }
        return 0
    }
}

/// The sharpen's planes, shared by its bands (each band writes its own rows).
private struct SharpenPlanes: @unchecked Sendable {
    let pixels: UnsafeMutableRawPointer
    let lightness: UnsafeMutablePointer<Float>
    let across: UnsafeMutablePointer<Float>
}

/// sRGB ⇄ CIE L*a*b* (D65) for the sharpen: tables for the sRGB transfer and the cube root.
final class LabTables: Sendable {
    static let shared = LabTables()

    /// sRGB level → linear light.
    let toLinear: [Float]
    /// Linear light in 1/4095 steps → sRGB level (interpolated for the fraction).
    let fromLinear: [Float]
    /// `f(t)` of CIE Lab on 0…1 in 1/4096 steps (interpolated).
    let labF: [Float]
    /// Each sRGB level's share of the luminance Y, per channel (R, G, B).
    let luminance: [SIMD4<Float>]

    private init() {
        toLinear = (0..<256).map { i in
            let c = Double(i) / 255
            return Float(c <= 0.04045 ? c / 12.92 : pow((c + 0.055) / 1.055, 2.4))
        }
        fromLinear = (0...4096).map { i in
            let l = Double(i) / 4096
            return Float(255 * (l <= 0.0031308 ? 12.92 * l : 1.055 * pow(l, 1 / 2.4) - 0.055))
        }
        labF = (0...4096).map { i in Float(Self.f(Double(i) / 4096)) }
        luminance = toLinear.map { SIMD4(0.2126 * $0, 0.7152 * $0, 0.0722 * $0, 0) }
    }

    /// L* of a BGRA pixel.
    @inline(__always)
    func lightness(of p: SIMD4<UInt8>, premultiplied: Bool) -> Float {
        var p = p
        if premultiplied && p[3] != 255 && p[3] != 0 { p = Self.straight(p) }
        let y = luminance[Int(p[2])][0] + luminance[Int(p[1])][1] + luminance[Int(p[0])][2]
        return 116 * Self.interpolate(labF, y) - 16
    }

    /// The straight colour of a translucent premultiplied pixel.
    @inline(__always)
    static func straight(_ p: SIMD4<UInt8>) -> SIMD4<UInt8> {
        var p = p
        let a = Int(p[3])
        for c in 0..<3 { p[c] = UInt8(Swift.min(255, (Int(p[c]) * 255 + a / 2) / a)) }
        return p
    }

    static func f(_ t: Double) -> Double { t > 216.0 / 24389 ? cbrt(t) : (24389.0 / 27 * t + 16) / 116 }

    @inline(__always)
    static func inverseF(_ f: Float) -> Float { f > 6.0 / 29 ? f * f * f : (116 * f - 16) * 27 / 24389 }

    @inline(__always)
    static func interpolate(_ table: [Float], _ t: Float) -> Float {
        let scaled = Swift.min(4096, Swift.max(0, t * 4096))
        let i = Swift.min(4095, Int(scaled))
        let fraction = scaled - Float(i)
        return table[i] + (table[i + 1] - table[i]) * fraction
    }

    /// The linear R, G, B of a BGRA pixel (straight colour when premultiplied).
    @inline(__always)
    func linear(_ p: SIMD4<UInt8>, premultiplied: Bool) -> (Float, Float, Float) {
        var p = p
        if premultiplied && p[3] != 255 && p[3] != 0 { p = Self.straight(p) }
        return (toLinear[Int(p[2])], toLinear[Int(p[1])], toLinear[Int(p[0])])
    }

    /// `p` with its L* moved from `from` to `to`, a* and b* kept.
    @inline(__always)
    func withLightness(_ p: SIMD4<UInt8>, from: Float, to: Float, premultiplied: Bool) -> SIMD4<UInt8> {
        let (r, g, b) = linear(p, premultiplied: premultiplied)
        let xn: Float = 0.95047, zn: Float = 1.08883
        let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / xn
        let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / zn
        let shift = (to - from) / 116
        let fy = (to + 16) / 116
        let fx = Self.interpolate(labF, x) + shift, fz = Self.interpolate(labF, z) + shift
        let x2 = Self.inverseF(fx) * xn, y2 = Self.inverseF(fy), z2 = Self.inverseF(fz) * zn
        let r2 = 3.2406 * x2 - 1.5372 * y2 - 0.4986 * z2
        let g2 = -0.9689 * x2 + 1.8758 * y2 + 0.0415 * z2
        let b2 = 0.0557 * x2 - 0.2040 * y2 + 1.0570 * z2
        func level(_ l: Float) -> Float { Self.interpolate(fromLinear, l) }
        var out = SIMD4<Float>(level(b2), level(g2), level(r2), 255)
        let alpha = Float(p[3])
        if premultiplied && p[3] != 255 { out = out * (alpha / 255) }
        out[3] = alpha
        return SIMD4<UInt8>(out.rounded(.toNearestOrAwayFromZero).clamped(lowerBound: .zero, upperBound: SIMD4(repeating: 255)))
    }
}
