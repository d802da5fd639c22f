import Foundation
import Strata

/// The structural similarity (SSIM) of two images of the same size, for the codec figures
/// (`strata-bench codecs --avif`): Wang et al. 2004 on luma (BT.601 weights of straight R, G, B,
/// 0…255), an 11×11 Gaussian window with σ = 1.5, K1 = 0.01, K2 = 0.03, population
/// covariances, averaged over the window positions that lie wholly inside the image — what
/// scikit-image's `structural_similarity(gaussian_weights=True, sigma=1.5,
/// use_sample_covariance=False, data_range=255)` computes on the same luma.
///
/// Cost: five separable 11-tap filters over the image (floats); a 1024×640 pair takes tens of
/// milliseconds in a release build.
enum SSIM {
    static func of(_ a: PixelImage, _ b: PixelImage) -> Double {
        precondition(a.size == b.size, "SSIM compares images of one size")
        let x = luma(a), y = luma(b)
        let w = a.width, h = a.height
        let radius = 5
        guard w > 2 * radius, h > 2 * radius else { return x == y ? 1 : 0 }
        let kernel = gaussian(radius: radius, sigma: 1.5)
        let n = w * h
        var xx = [Float](repeating: 0, count: n), yy = xx, xy = xx
        for i in 0..<n {
            xx[i] = x[i] * x[i]
            yy[i] = y[i] * y[i]
            xy[i] = x[i] * y[i]
        }
        let mx = filter(x, w, h, kernel), my = filter(y, w, h, kernel)
        let sxx = filter(xx, w, h, kernel), syy = filter(yy, w, h, kernel), sxy = filter(xy, w, h, kernel)
        let c1 = Double(0.01 * 255) * Double(0.01 * 255), c2 = Double(0.03 * 255) * Double(0.03 * 255)
        var sum = 0.0
        var count = 0
        for row in radius..<(h - radius) {
            for column in radius..<(w - radius) {
                let i = row * w + column
                let ux = Double(mx[i]), uy = Double(my[i])
                let vx = Double(sxx[i]) - ux * ux, vy = Double(syy[i]) - uy * uy, cov = Double(sxy[i]) - ux * uy
                sum += ((2 * ux * uy + c1) * (2 * cov + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
                count += 1
            }
        }
        return sum / Double(count)
    }

    /// Luma of straight (un-premultiplied) colour, row-major.
    static func luma(_ image: PixelImage) -> [Float] {
        let converted = PixelConversion.convert(image, to: .bgra32Premultiplied)
        var out = [Float](repeating: 0, count: image.width * image.height)
        converted.withUnsafeBytes { raw in
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let p = y * converted.bytesPerRow + x * 4
                    let alpha = Float(raw[p + 3])
                    let scale: Float = alpha > 0 ? 255 / alpha : 0
                    let b = Float(raw[p]) * scale, g = Float(raw[p + 1]) * scale, r = Float(raw[p + 2]) * scale
                    out[y * image.width + x] = 0.299 * r + 0.587 * g + 0.114 * b
                }
            }
        }
        return out
    }

    /// The normalised Gaussian of `2 × radius + 1` taps.
    static func gaussian(radius: Int, sigma: Double) -> [Float] {
        let taps = (-radius...radius).map { exp(-Double($0 * $0) / (2 * sigma * sigma)) }
        let total = taps.reduce(0, +)
        return taps.map { Float($0 / total) }
    }

    /// `values` filtered by `kernel` along rows, then columns; the borders (within the radius)
    /// are left 0: SSIM averages only the inner positions.
    static func filter(_ values: [Float], _ w: Int, _ h: Int, _ kernel: [Float]) -> [Float] {
        let radius = kernel.count / 2
        var horizontal = [Float](repeating: 0, count: w * h)
        for y in 0..<h {
            for x in radius..<(w - radius) {
                var sum: Float = 0
                for k in 0..<kernel.count { sum += kernel[k] * values[y * w + x - radius + k] }
                horizontal[y * w + x] = sum
            }
        }
        var out = [Float](repeating: 0, count: w * h)
        for y in radius..<(h - radius) {
            for x in radius..<(w - radius) {
                var sum: Float = 0
                for k in 0..<kernel.count { sum += kernel[k] * horizontal[(y - radius + k) * w + x] }
                out[y * w + x] = sum
            }
        }
        return out
    }
}
