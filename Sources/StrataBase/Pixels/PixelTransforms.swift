/// Lossless geometric and colour transforms of a whole ``PixelImage``: quarter-turn
/// rotations, a left–right mirror, and conversion to gray or to black and white (bitonal).
///
/// Use them after a resample, on the small output image (an IIIF tile), not on large
/// originals. Each returns a new heap image in the same style; cost: one pass over the
/// pixels, one allocation (gray and bitonal modify a copy-on-write copy in place).
extension PixelImage {
    /// The image turned clockwise by `quarterTurns` × 90° (any integer; taken modulo 4).
    /// Returns `self` for a multiple of four.
    public func rotated(clockwiseQuarterTurns quarterTurns: Int) -> PixelImage {
        let turns = ((quarterTurns % 4) + 4) % 4
        guard turns != 0 else { return self }
        let outWidth = turns == 2 ? width : height
        let outHeight = turns == 2 ? height : width
        var result = PixelImage(uninitializedWidth: outWidth, height: outHeight, style: style)
        let bpp = style.bytesPerPixel
        let (w, h, srcStride, dstStride) = (width, height, bytesPerRow, result.bytesPerRow)
        if bpp == 4 {
            withUnsafeBytes { src in
                result.withUnsafeMutableBytes { dst in
                    Self.turn32(src.baseAddress!, srcStride, w, h, into: dst.baseAddress!, dstStride, turns: turns)
                }
            }
            return result
        }
        withUnsafeBytes { src in
            result.withUnsafeMutableBytes { dst in
                for y in 0..<outHeight {
                    for x in 0..<outWidth {
                        // The source pixel that lands on (x, y) after the clockwise turn.
                        let (sx, sy): (Int, Int)
                        switch turns {
                        case 1: (sx, sy) = (y, h - 1 - x)
                        case 2: (sx, sy) = (w - 1 - x, h - 1 - y)
                        default: (sx, sy) = (w - 1 - y, x)
                        }
                        let from = sy * srcStride + sx * bpp
                        let to = y * dstStride + x * bpp
                        for c in 0..<bpp { dst[to + c] = src[from + c] }
                    }
                }
            }
        }
        return result
    }

    /// 4-byte pixels turned clockwise by `turns` (1…3) quarter turns, in blocks of 32×32 so that
    /// the source's columns are read from cache.
    private static func turn32(
        _ src: UnsafeRawPointer, _ srcStride: Int, _ w: Int, _ h: Int, into dst: UnsafeMutableRawPointer, _ dstStride: Int,
        turns: Int
    ) {
        if turns == 2 {
            // A half turn: each row reversed, the rows in reverse order.
            for y in 0..<h {
                let from = (src + (h - 1 - y) * srcStride).assumingMemoryBound(to: UInt32.self)
                let out = (dst + y * dstStride).assumingMemoryBound(to: UInt32.self)
                for x in 0..<w { out[x] = from[w - 1 - x] }
            }
            return
        }
        // A quarter turn: output (x, y) is source (y, h − 1 − x) clockwise, (w − 1 − y, x) the
        // other way; down a block's row the source pointer steps a whole source row.
        let outWidth = h, outHeight = w
        let block = 32
        let step = turns == 1 ? -srcStride : srcStride
        for by in Swift.stride(from: 0, to: outHeight, by: block) {
            for bx in Swift.stride(from: 0, to: outWidth, by: block) {
                let xe = Swift.min(bx + block, outWidth)
                for y in by..<Swift.min(by + block, outHeight) {
                    let out = (dst + y * dstStride).assumingMemoryBound(to: UInt32.self)
                    var from = turns == 1 ? src + (h - 1 - bx) * srcStride + 4 * y : src + bx * srcStride + 4 * (w - 1 - y)
                    for x in bx..<xe {
                        out[x] = from.load(as: UInt32.self)
                        from += step
                    }
                }
            }
        }
    }

    /// The image mirrored left to right (the vertical axis).
    public func mirrored() -> PixelImage {
        var result = PixelImage(uninitializedWidth: width, height: height, style: style)
        let bpp = style.bytesPerPixel
        let (w, srcStride, dstStride) = (width, bytesPerRow, result.bytesPerRow)
        if bpp == 4 {
            let h = height
            withUnsafeBytes { src in
                result.withUnsafeMutableBytes { dst in
                    for y in 0..<h {
                        let from = (src.baseAddress! + y * srcStride).assumingMemoryBound(to: UInt32.self)
                        let to = (dst.baseAddress! + y * dstStride).assumingMemoryBound(to: UInt32.self)
                        for x in 0..<w { to[x] = from[w - 1 - x] }
                    }
                }
            }
            return result
        }
        withUnsafeBytes { src in
            result.withUnsafeMutableBytes { dst in
                for y in 0..<height {
                    for x in 0..<w {
                        let from = y * srcStride + (w - 1 - x) * bpp
                        let to = y * dstStride + x * bpp
                        for c in 0..<bpp { dst[to + c] = src[from + c] }
                    }
                }
            }
        }
        return result
    }

    /// The image in shades of gray, in the same style: each pixel's colour channels become its
    /// luma (BT.601 weights, `(77 R + 150 G + 29 B + 128) >> 8`); alpha is kept. With
    /// `threshold`, each luma becomes 0 below it and 255 at or above it (bitonal; premultiplied
    /// pixels are compared against `threshold × alpha / 255` and set to 0 or their alpha).
    public func grayscale(threshold: UInt8? = nil) -> PixelImage {
        var result = self
        let style = self.style
        let (w, h, stride) = (width, height, bytesPerRow)
        result.withUnsafeMutableBytes { raw in
            for y in 0..<h {
                let row = y * stride
                for x in 0..<w {
                    switch style {
                    case .bgra32Premultiplied, .bgrx32:
                        let p = row + x * 4
                        let b = Int(raw[p]), g = Int(raw[p + 1]), r = Int(raw[p + 2])
                        var luma = (77 * r + 150 * g + 29 * b + 128) >> 8
                        if let threshold {
                            let alpha = style == .bgrx32 ? 255 : Int(raw[p + 3])
                            luma = luma * 255 >= Int(threshold) * alpha ? alpha : 0
                        }
                        let value = UInt8(luma)
                        raw[p] = value
                        raw[p + 1] = value
                        raw[p + 2] = value
                    case .rgb565:
                        let p = row + x * 2
                        let v = Int(raw[p]) | Int(raw[p + 1]) << 8
                        let r = ((v >> 11) & 31) * 255 / 31, g = ((v >> 5) & 63) * 255 / 63, b = (v & 31) * 255 / 31
                        var luma = (77 * r + 150 * g + 29 * b + 128) >> 8
                        if let threshold { luma = luma >= Int(threshold) ? 255 : 0 }
                        let packed = (luma >> 3) << 11 | (luma >> 2) << 5 | (luma >> 3)
                        raw[p] = UInt8(packed & 0xFF)
                        raw[p + 1] = UInt8(packed >> 8)
                    case .gray8:
                        if let threshold { raw[row + x] = raw[row + x] >= threshold ? 255 : 0 }
                    }
                }
            }
        }
        return result
    }
}
