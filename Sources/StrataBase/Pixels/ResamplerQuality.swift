#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

extension PixelImage {
    /// Peak signal-to-noise ratio, in dB, of this image against `reference` (same size):
    /// `10 · log10(255² / MSE)` over the colour channels (B, G, R of the 32-bit styles — the
    /// alpha or padding byte is ignored — RGB565 widened to 8 bits, or the gray byte).
    /// `.infinity` when they are equal. Images of different styles are both compared as BGRx
    /// (unless both are gray). Cost: one pass over both images; a quality metric for tests and
    /// benchmarks, not a hot path.
    public func peakSignalToNoiseRatio(against reference: PixelImage) -> Double {
        precondition(width == reference.width && height == reference.height, "PSNR needs equal sizes")
        let common: PixelStyle =
            (style == .gray8 && reference.style == .gray8)
            ? .gray8
            : (style == reference.style && style != .rgb565 ? style : .bgrx32)
        let a = PixelConversion.convert(self, to: common)
        let b = PixelConversion.convert(reference, to: common)
        let channels = common == .gray8 ? 1 : 3
        let step = common.bytesPerPixel
        var squared: Double = 0
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                for y in 0..<height {
                    var rowSum = 0
                    let ra = y * a.bytesPerRow, rb = y * b.bytesPerRow
                    for x in 0..<width {
                        for c in 0..<channels {
                            let d = Int(pa[ra + x * step + c]) - Int(pb[rb + x * step + c])
                            rowSum += d * d
                        }
                    }
                    squared += Double(rowSum)
                }
            }
        }
        if squared == 0 { return .infinity }
        let mse = squared / Double(width * height * channels)
        return 10 * log10(255 * 255 / mse)
    }
}
