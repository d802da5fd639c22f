#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Pixel loops the codecs need: orientation copies, CMYK conversion, (un)premultiplication.
/// Internal; every pointer stays inside the caller that owns it.
enum PixelOps {
    /// Copies a 32-bit image of `codedSize` (rows `sourceStride` bytes apart) into `destination`,
    /// applying EXIF `orientation` (1...8). The destination has the displayed size.
    static func orient32(
        from source: UnsafeRawPointer, codedSize: PixelSize, sourceStride: Int,
        to destination: UnsafeMutableRawPointer, destinationStride: Int, orientation: Int
    ) {
        let w = codedSize.width, h = codedSize.height, s = sourceStride
        let rowBytes = w * 4
        switch orientation {
        case 1:
            for y in 0..<h { (destination + y * destinationStride).copyMemory(from: source + y * s, byteCount: rowBytes) }
            return
        case 4:
            for y in 0..<h { (destination + y * destinationStride).copyMemory(from: source + (h - 1 - y) * s, byteCount: rowBytes) }
            return
        default:
            break
        }
        // dst(x, y) = source + origin + x * stepX + y * stepY (bytes).
        let origin: Int, stepX: Int, stepY: Int
        switch orientation {
        case 2: (origin, stepX, stepY) = ((w - 1) * 4, -4, s)
        case 3: (origin, stepX, stepY) = ((h - 1) * s + (w - 1) * 4, -4, -s)
        case 5: (origin, stepX, stepY) = (0, s, 4)
        case 6: (origin, stepX, stepY) = ((h - 1) * s, -s, 4)
        case 7: (origin, stepX, stepY) = ((h - 1) * s + (w - 1) * 4, -s, -4)
        default: (origin, stepX, stepY) = ((w - 1) * 4, s, -4)  // 8
        }
        let dw = orientation >= 5 ? h : w, dh = orientation >= 5 ? w : h
        let tile = 32
        var ty = 0
        while ty < dh {
            let yEnd = min(ty + tile, dh)
            var tx = 0
            while tx < dw {
                let xEnd = min(tx + tile, dw)
                for y in ty..<yEnd {
                    let dRow = (destination + y * destinationStride).assumingMemoryBound(to: UInt32.self)
                    var src = source + origin + tx * stepX + y * stepY
                    for x in tx..<xEnd {
                        dRow[x] = src.loadUnaligned(as: UInt32.self)
                        src += stepX
                    }
                }
                tx = xEnd
            }
            ty = yEnd
        }
    }

    /// x × y / 255, rounded.
    @inline(__always)
    static func mul255(_ x: UInt32, _ y: UInt32) -> UInt32 {
        let t = x &* y &+ 128
        return (t &+ (t >> 8)) >> 8
    }

    /// Converts CMYK pixels (as libjpeg outputs them) to opaque BGRA, in place. `inverted` is
    /// the Adobe polarity (stored values are 255 − ink), which every Adobe-marked file uses.
    static func cmykToBGRA(_ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int, inverted: Bool) {
        for y in 0..<size.height {
            let p = (base + y * stride).assumingMemoryBound(to: UInt8.self)
            for x in 0..<size.width {
                let q = p + 4 * x
                var c = UInt32(q[0]), m = UInt32(q[1]), ye = UInt32(q[2]), k = UInt32(q[3])
                if !inverted { c = 255 - c; m = 255 - m; ye = 255 - ye; k = 255 - k }
                // Now c, m, ye, k are 255 − ink: R = (255 − C)(255 − K) / 255.
                q[0] = UInt8(mul255(ye, k))
                q[1] = UInt8(mul255(m, k))
                q[2] = UInt8(mul255(c, k))
                q[3] = 255
            }
        }
    }

    /// Premultiplies BGRA rows in place.
    static func premultiply(_ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int) {
        for y in 0..<size.height {
            let p = (base + y * stride).assumingMemoryBound(to: UInt8.self)
            for x in 0..<size.width {
                let q = p + 4 * x
                let a = UInt32(q[3])
                if a == 255 { continue }
                q[0] = UInt8(mul255(UInt32(q[0]), a))
                q[1] = UInt8(mul255(UInt32(q[1]), a))
                q[2] = UInt8(mul255(UInt32(q[2]), a))
            }
        }
    }

    /// Converts any ``PixelStyle`` image to tightly packed, straight (un-premultiplied) BGRA.
    /// Returns the bytes and whether any pixel is not opaque.
    static func straightBGRA(_ image: PixelImage) -> (bytes: [UInt8], hasAlpha: Bool) {
        let w = image.width, h = image.height
        var hasAlpha = false
        let out = [UInt8](unsafeUninitializedCapacity: w * h * 4) { buffer, count in
            image.withUnsafeBytes { src in
                let base = src.baseAddress!
                for y in 0..<h {
                    let row = base + y * image.bytesPerRow
                    let d = buffer.baseAddress! + y * w * 4
                    for x in 0..<w {
                        var b: UInt8 = 0, g: UInt8 = 0, r: UInt8 = 0, a: UInt8 = 255
                        switch image.style {
                        case .bgra32Premultiplied:
                            let p = row.advanced(by: x * 4).assumingMemoryBound(to: UInt8.self)
                            a = p[3]
                            if a == 255 { (b, g, r) = (p[0], p[1], p[2]) } else if a == 0 { (b, g, r) = (0, 0, 0) } else {
                                hasAlpha = true
                                let half = UInt32(a) / 2
                                b = UInt8(min(255, (UInt32(p[0]) * 255 + half) / UInt32(a)))
                                g = UInt8(min(255, (UInt32(p[1]) * 255 + half) / UInt32(a)))
                                r = UInt8(min(255, (UInt32(p[2]) * 255 + half) / UInt32(a)))
                            }
                            if a == 0 { hasAlpha = true }
                        case .bgrx32:
                            let p = row.advanced(by: x * 4).assumingMemoryBound(to: UInt8.self)
                            (b, g, r) = (p[0], p[1], p[2])
                        case .rgb565:
                            let v = UInt32(row.loadUnaligned(fromByteOffset: x * 2, as: UInt16.self).littleEndian)
                            let r5 = (v >> 11) & 31, g6 = (v >> 5) & 63, b5 = v & 31
                            r = UInt8((r5 * 527 + 23) >> 6); g = UInt8((g6 * 259 + 33) >> 6); b = UInt8((b5 * 527 + 23) >> 6)
                        case .gray8:
                            let v = row.load(fromByteOffset: x, as: UInt8.self)
                            (b, g, r) = (v, v, v)
                        }
                        d[4 * x] = b; d[4 * x + 1] = g; d[4 * x + 2] = r; d[4 * x + 3] = a
                    }
                }
            }
            count = w * h * 4
        }
        return (out, hasAlpha)
    }
}
