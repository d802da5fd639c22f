/// Converts images between the four ``PixelStyle``s.
///
/// Rules (each direction is one pass over the pixels, no allocation besides the output):
/// - **BGRA premultiplied → BGRx / RGB565 / gray8**: the alpha is dropped, which for
///   premultiplied colour *is* compositing over black.
/// - **→ BGRA premultiplied** from an opaque style: alpha 255 (BGRx's fourth byte is ignored).
/// - **→ RGB565**: each channel rounded to the nearest 5- or 6-bit level (no dithering).
/// - **RGB565 →**: 5- and 6-bit levels widened by bit replication (`r8 = r5 << 3 | r5 >> 2`),
///   so 0 and full scale map to 0 and 255 exactly.
/// - **→ gray8**: Rec.601 luma `Y = 0.299 R + 0.587 G + 0.114 B` (the weights of JPEG's YCbCr
///   and of Pillow's `convert("L")`), rounded; a gray pixel keeps its value exactly.
/// - **gray8 →**: B = G = R = Y, alpha 255.
///
/// Round trips: gray8 → BGRA/BGRx → gray8 is exact; BGRA → RGB565 → BGRA is within half a
/// quantisation step (≤ 4 for red and blue, ≤ 2 for green).
public enum PixelConversion {
    /// `image` in `style`: the image itself (no copy) when it already is, else a new heap image.
    public static func convert(_ image: PixelImage, to style: PixelStyle) -> PixelImage {
        if image.style == style { return image }
        var out = PixelImage(uninitializedWidth: image.width, height: image.height, style: style)
        convert(image, into: &out)
        return out
    }

    /// Converts `image` into `destination`'s style, overwriting every pixel of `destination`
    /// (which must have the same size; its row padding is left as it was).
    public static func convert(_ image: PixelImage, into destination: inout PixelImage) {
        precondition(
            image.width == destination.width && image.height == destination.height,
            "conversion keeps the size: resample first")
        let from = image.style, to = destination.style
        let width = image.width
        let srcStride = image.bytesPerRow, dstStride = destination.bytesPerRow
        // Rows that go through neither end as BGRA are staged in one BGRA row.
        let staging: UnsafeMutablePointer<UInt8>? =
            (from != .bgra32Premultiplied && from != .bgrx32 && to != .bgra32Premultiplied && to != .bgrx32)
            ? .allocate(capacity: width * 4) : nil
        defer { staging?.deallocate() }
        image.withUnsafeBytes { src in
            destination.withUnsafeMutableBytes { dst in
                let s0 = src.baseAddress!.assumingMemoryBound(to: UInt8.self)
                let d0 = dst.baseAddress!.assumingMemoryBound(to: UInt8.self)
                for y in 0..<image.height {
                    let s = s0 + y * srcStride, d = d0 + y * dstStride
                    switch (from, to) {
                    case (.bgra32Premultiplied, .bgra32Premultiplied), (.bgrx32, .bgrx32),
                        (.rgb565, .rgb565), (.gray8, .gray8):
                        d.update(from: s, count: width * from.bytesPerPixel)
                    case (.bgra32Premultiplied, _), (.bgrx32, _):
                        fromBGRA(s, to: to, count: width, into: d)
                    case (_, .bgra32Premultiplied), (_, .bgrx32):
                        toBGRA(s, from: from, count: width, into: d)
                    default:
                        toBGRA(s, from: from, count: width, into: staging!)
                        fromBGRA(staging!, to: to, count: width, into: d)
                    }
                }
            }
        }
    }

    /// Writes `count` BGRA pixels with alpha 255 (for either 4-byte target) from `style`.
    private static func toBGRA(
        _ s: UnsafePointer<UInt8>, from style: PixelStyle, count: Int,
        into d: UnsafeMutablePointer<UInt8>
    ) {
        switch style {
        case .bgra32Premultiplied, .bgrx32:
            for i in 0..<count {
                d[4 * i] = s[4 * i]
                d[4 * i + 1] = s[4 * i + 1]
                d[4 * i + 2] = s[4 * i + 2]
                d[4 * i + 3] = 255
            }
        case .rgb565:
            let raw = UnsafeRawPointer(s)
            for i in 0..<count {
                let p = UInt16(littleEndian: raw.loadUnaligned(fromByteOffset: 2 * i, as: UInt16.self))
                let r = UInt8(truncatingIfNeeded: p >> 11), g = UInt8(truncatingIfNeeded: (p >> 5) & 0x3F)
                let b = UInt8(truncatingIfNeeded: p & 0x1F)
                d[4 * i] = b << 3 | b >> 2
                d[4 * i + 1] = g << 2 | g >> 4
                d[4 * i + 2] = r << 3 | r >> 2
                d[4 * i + 3] = 255
            }
        case .gray8:
            for i in 0..<count {
                let v = s[i]
                d[4 * i] = v
                d[4 * i + 1] = v
                d[4 * i + 2] = v
                d[4 * i + 3] = 255
            }
        }
    }

    /// Writes `count` pixels of `style` from BGRA (alpha dropped: premultiplied over black).
    private static func fromBGRA(
        _ s: UnsafePointer<UInt8>, to style: PixelStyle, count: Int,
        into d: UnsafeMutablePointer<UInt8>
    ) {
        switch style {
        case .bgra32Premultiplied, .bgrx32:
            // Either 4-byte style from the other: both are opaque-or-premultiplied BGR + 0xFF.
            toBGRA(s, from: .bgrx32, count: count, into: d)
        case .rgb565:
            let raw = UnsafeMutableRawPointer(d)
            for i in 0..<count {
                let b = UInt32(s[4 * i]), g = UInt32(s[4 * i + 1]), r = UInt32(s[4 * i + 2])
                // Nearest level: (v · max + 127) / 255 (the compiler turns the division into a multiply).
                let r5 = (r * 31 + 127) / 255, g6 = (g * 63 + 127) / 255, b5 = (b * 31 + 127) / 255
                let p = UInt16(truncatingIfNeeded: r5 << 11 | g6 << 5 | b5)
                raw.storeBytes(of: p.littleEndian, toByteOffset: 2 * i, as: UInt16.self)
            }
        case .gray8:
            for i in 0..<count {
                let b = UInt32(s[4 * i]), g = UInt32(s[4 * i + 1]), r = UInt32(s[4 * i + 2])
                // 0.299, 0.587, 0.114 in 16-bit fixed point (sum 65536), rounded.
                d[i] = UInt8(truncatingIfNeeded: (19595 * r + 38470 * g + 7471 * b + 32768) >> 16)
            }
        }
    }
}
