import Foundation
import Strata

/// thumbor's `sharpen(AMOUNT, RADIUS, LUMINANCE_ONLY)`: Marco Rossini's wavelet sharpen (the GIMP
/// plugin thumbor ports): five levels of an à trous "hat" transform, the detail of level L
/// multiplied by `AMOUNT·exp(−(L − RADIUS)²/1.5) + 1`, on each of R, G and B, or on the luma (Y
/// of JPEG's YCbCr) alone. Single-precision like thumbor's C, so the pixels match it.
///
/// Cost: three float planes of the image and, per channel sharpened, ten passes over it.
extension ThumborPixels {
    static func waveletSharpened(_ image: PixelImage, amount: Double, radius: Double, luminanceOnly: Bool) -> PixelImage {
        let source = premultiplied(image)
        let (width, height) = (source.width, source.height)
        let area = width * height
        guard area > 0 else { return source }
        // The straight R, G and B as three planes of 0…1 (Y, Cb, Cr with `luminanceOnly`), row
        // by row (transparent pixels are black there, as their premultiplied bytes are).
        var planes = [[Float]](repeating: [Float](repeating: 0, count: area), count: 3)
        let stride = source.bytesPerRow
        source.withUnsafeBytes { raw in
            for y in 0..<height {
                for x in 0..<width {
                    let p = raw.baseAddress! + y * stride + 4 * x
                    let alpha = Float(p.load(fromByteOffset: 3, as: UInt8.self))
                    func straight(_ offset: Int) -> Float {
                        let value = Float(p.load(fromByteOffset: offset, as: UInt8.self))
                        return alpha == 255 || alpha == 0 ? value : min(255, (value * 255 / alpha).rounded())
                    }
                    var (r, g, b) = (straight(2), straight(1), straight(0))
                    if luminanceOnly {
                        (r, g, b) = (
                            0.2990 * r + 0.5870 * g + 0.1140 * b, -0.1687 * r - 0.3313 * g + 0.5000 * b + 128,
                            0.5000 * r - 0.4187 * g - 0.0813 * b + 128
                        )
                    }
                    let i = y * width + x
                    (planes[0][i], planes[1][i], planes[2][i]) = (r / 255, g / 255, b / 255)
                }
            }
        }
        for channel in 0..<(luminanceOnly ? 1 : 3) {
            sharpen(&planes[channel], width: width, height: height, amount: Float(amount), radius: Float(radius))
        }
        var result = source
        result.withUnsafeMutableBytes { raw in
            for y in 0..<height {
                for x in 0..<width {
                    let p = (raw.baseAddress! + y * stride + 4 * x).assumingMemoryBound(to: UInt8.self)
                    let alpha = Int(p[3])
                    guard alpha > 0 else { continue }
                    let i = y * width + x
                    var (r, g, b) = (planes[0][i] * 255, planes[1][i] * 255, planes[2][i] * 255)
                    if luminanceOnly {
                        (r, g, b) = (r + 1.40200 * (b - 128), r - 0.34414 * (g - 128) - 0.71414 * (b - 128), r + 1.77200 * (g - 128))
                    }
                    func stored(_ value: Float) -> UInt8 {
                        let byte = value > 255 ? 255 : value < 0 ? 0 : Int(value)
                        return alpha == 255 ? UInt8(byte) : UInt8((byte * alpha + 127) / 255)
                    }
                    (p[2], p[1], p[0]) = (stored(r), stored(g), stored(b))
                }
            }
        }
        return result
    }

    /// The wavelet sharpen of one plane, in place.
    private static func sharpen(_ plane: inout [Float], width: Int, height: Int, amount: Float, radius: Float) {
        let area = width * height
        var low = [[Float]](repeating: [Float](repeating: 0, count: area), count: 2)
        var temp = [Float](repeating: 0, count: max(width, height))
        var high = plane
        var last = 0
        for level in 0..<5 {
            let scale = 1 << level
            let pass = level & 1
            for row in 0..<height {
                hat(&temp, high, start: row * width, step: 1, size: width, scale: scale)
                for column in 0..<width { low[pass][row * width + column] = temp[column] * 0.25 }
            }
            for column in 0..<width {
                hat(&temp, low[pass], start: column, step: width, size: height, scale: scale)
                for row in 0..<height { low[pass][row * width + column] = temp[row] * 0.25 }
            }
            let gain = amount * Float(exp(Double(-(Float(level) - radius) * (Float(level) - radius) / 1.5))) + 1
            for i in 0..<area {
                let detail = (high[i] - low[pass][i]) * gain
                if level == 0 {
                    plane[i] = detail
                } else {
                    plane[i] += detail
                }
            }
            high = low[pass]
            last = pass
        }
        for i in 0..<area { plane[i] += low[last][i] }
    }

    /// One row or column of the à trous transform: 2·x[i] + x[i − s] + x[i + s], the
    /// neighbours mirrored at the ends.
    private static func hat(_ out: inout [Float], _ base: [Float], start: Int, step: Int, size: Int, scale: Int) {
        func mirrored(_ i: Int) -> Int {
            guard size > 1 else { return 0 }
            var i = i
            while i < 0 || i >= size { i = i < 0 ? -i : 2 * size - 2 - i }
            return i
        }
        for i in 0..<size {
            out[i] = 2 * base[start + step * i] + base[start + step * mirrored(i - scale)] + base[start + step * mirrored(i + scale)]
        }
    }
}
