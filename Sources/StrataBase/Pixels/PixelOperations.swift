/// The pixel work of ``ImageOperations`` on premultiplied BGRA images (the renderer's output
/// before its style conversion): a Gaussian blur, a vertical flip, padding to a box, flattening
/// over a colour and finding a trim box. Each returns a new image (or a box) and leaves `self`
/// alone; cost: one pass over the pixels, except the blur (a separable convolution of about
/// 6σ taps a pass, banded like a resample).
extension PixelImage {
    /// The image blurred by a Gaussian of standard deviation `sigma` (in pixels), separable, with
    /// the ``Resampler``'s banded passes (``ResamplingFilter/gaussian(sigma:)`` at 1:1). Taps
    /// beyond the edges are dropped and the rest renormalised.
    public func blurred(sigma: Double, threads: Int = 1, forkJoin: ForkJoin = .dispatch) -> PixelImage {
        let resampler = Resampler(filter: .gaussian(sigma: sigma))
        resampler.threads = threads
        resampler.forkJoin = forkJoin
        var output = PixelImage(uninitializedWidth: width, height: height, style: style)
        resampler.resample(
            self, region: SourceRect(x: 0, y: 0, width: Double(width), height: Double(height)), into: &output)
        return output
    }

    /// The image mirrored top to bottom (one row copy per row).
    public func flippedVertically() -> PixelImage {
        var result = PixelImage(uninitializedWidth: width, height: height, style: style)
        let rowBytes = width * style.bytesPerPixel
        let (h, srcStride, dstStride) = (height, bytesPerRow, result.bytesPerRow)
        withUnsafeBytes { src in
            result.withUnsafeMutableBytes { dst in
                for y in 0..<h {
                    UnsafeMutableRawBufferPointer(rebasing: dst[(y * dstStride)..<(y * dstStride + rowBytes)])
                        .copyMemory(
                            from: UnsafeRawBufferPointer(rebasing: src[((h - 1 - y) * srcStride)..<((h - 1 - y) * srcStride + rowBytes)]))
                }
            }
        }
        return result
    }

    /// The image placed in a `box`-sized canvas (`mode=pad`), at `focus` (0…1 each way: the
    /// centre by default, `(0, 0)` the top-left corner; offsets rounded down, as libvips'
    /// `gravity` does), the rest filled by `extend`: `background` (premultiplied BGRA),
    /// the edge pixels repeated, or the image mirrored at its edges. A side larger than the
    /// box's is kept (the canvas grows). 4-byte styles only.
    public func padded(
        to box: PixelSize, focus: CropFocus = .center, extend: ImageOperations.PadExtension = .background,
        background: SIMD4<UInt8> = .zero
    ) -> PixelImage {
        precondition(style.bytesPerPixel == 4, "padding works on 4-byte pixels")
        let outW = Swift.max(box.width, width), outH = Swift.max(box.height, height)
        if outW == width && outH == height { return self }
        let left = Int((Double(outW - width) * focus.x).rounded(.down))
        let top = Int((Double(outH - height) * focus.y).rounded(.down))
        let fill = UInt32(background[0]) | UInt32(background[1]) << 8 | UInt32(background[2]) << 16 | UInt32(background[3]) << 24
        // A transparent padding is the zeroed canvas as allocated (fresh pages are zero: the
        // padding is never written).
        let zeroPadding = extend == .background && fill == 0
        var result =
            zeroPadding
            ? PixelImage(width: outW, height: outH, style: style) : PixelImage(uninitializedWidth: outW, height: outH, style: style)
        let (w, h, srcStride, dstStride) = (width, height, bytesPerRow, result.bytesPerRow)
        /// The source index a canvas index maps to, or -1 for the background.
        func source(_ i: Int, offset: Int, length: Int) -> Int {
            let s = i - offset
            if s >= 0 && s < length { return s }
            switch extend {
            case .background: return -1
            case .copy: return Swift.min(length - 1, Swift.max(0, s))
            case .mirror:
                // Reflected with the edge pixel repeated (libvips' mirror: …2 1 0 | 0 1 2…).
                let period = 2 * length
                var m = s % period
                if m < 0 { m += period }
                return m < length ? m : period - 1 - m
            }
        }
        let columns = (0..<outW).map { source($0, offset: left, length: w) }
        withUnsafeBytes { src in
            result.withUnsafeMutableBytes { dst in
                for y in 0..<outH {
                    let row = (dst.baseAddress! + y * dstStride).assumingMemoryBound(to: UInt32.self)
                    let sy = source(y, offset: top, length: h)
                    guard sy >= 0 else {
                        if !zeroPadding { row.update(repeating: fill, count: outW) }
                        continue
                    }
                    let from = (src.baseAddress! + sy * srcStride).assumingMemoryBound(to: UInt32.self)
                    // The image's own columns in one copy; the sides by their extension.
                    (row + left).update(from: from, count: w)
                    if zeroPadding { continue }
                    if extend == .background {
                        row.update(repeating: fill, count: left)
                        (row + left + w).update(repeating: fill, count: outW - left - w)
                    } else {
                        for x in 0..<left { row[x] = from[columns[x]] }
                        for x in (left + w)..<outW { row[x] = from[columns[x]] }
                    }
                }
            }
        }
        return result
    }

    /// The image composited over `background` (premultiplied BGRA, opaque for a JPEG answer):
    /// each pixel becomes `p + background × (1 − α)`. Returns `self` when it is opaque.
    public func flattened(over background: SIMD4<UInt8>) -> PixelImage {
        precondition(style.bytesPerPixel == 4, "flattening works on 4-byte pixels")
        guard style == .bgra32Premultiplied else { return self }
        var result = self
        let (w, h, stride) = (width, height, bytesPerRow)
        let bg = SIMD4<UInt32>(truncatingIfNeeded: background)
        result.withUnsafeMutableBytes { raw in
            for y in 0..<h {
                let row = (raw.baseAddress! + y * stride).assumingMemoryBound(to: SIMD4<UInt8>.self)
                for x in 0..<w where row[x][3] != 255 {
                    let p = SIMD4<UInt32>(truncatingIfNeeded: row[x])
                    let inverse = 255 - p[3]
                    row[x] = SIMD4<UInt8>(truncatingIfNeeded: p &+ (bg &* inverse &+ 127) / 255)
                }
            }
        }
        return result
    }
}
