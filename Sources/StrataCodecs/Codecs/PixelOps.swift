import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Pixel loops the codecs need: orientation copies, CMYK conversion, (un)premultiplication.
/// Internal; every pointer stays inside the caller that owns it.
package enum PixelOps {
    /// Copies a 32-bit BGRA image (or, with `gray`, an 8-bit gray image expanded to opaque
    /// BGRA) of `codedSize` (rows `sourceStride` bytes apart) into `destination`, applying EXIF
    /// `orientation` (1...8). The destination has the displayed size.
    package static func orient(
        from source: UnsafeRawPointer, codedSize: PixelSize, sourceStride: Int, gray: Bool = false,
        to destination: UnsafeMutableRawPointer, destinationStride: Int, orientation: Int
    ) {
        let w = codedSize.width, h = codedSize.height, s = sourceStride
        let bpp = gray ? 1 : 4
        if orientation == 1 || orientation == 4 {
            for y in 0..<h {
                let src = source + (orientation == 1 ? y : h - 1 - y) * s
                let dst = destination + y * destinationStride
                if gray {
                    expandGrayRow(src.assumingMemoryBound(to: UInt8.self), dst.assumingMemoryBound(to: UInt32.self), w)
                } else {
                    dst.copyMemory(from: src, byteCount: w * 4)
                }
            }
            return
        }
        // dst(x, y) = source + origin + x * stepX + y * stepY (bytes).
        let origin: Int, stepX: Int, stepY: Int
        switch orientation {
        case 2: (origin, stepX, stepY) = ((w - 1) * bpp, -bpp, s)
        case 3: (origin, stepX, stepY) = ((h - 1) * s + (w - 1) * bpp, -bpp, -s)
        case 5: (origin, stepX, stepY) = (0, s, bpp)
        case 6: (origin, stepX, stepY) = ((h - 1) * s, -s, bpp)
        case 7: (origin, stepX, stepY) = ((h - 1) * s + (w - 1) * bpp, -s, -bpp)
        default: (origin, stepX, stepY) = ((w - 1) * bpp, s, -bpp)  // 8
        }
        let dw = orientation >= 5 ? h : w, dh = orientation >= 5 ? w : h
        var scalarFrom = 0  // first destination row the scalar loop below must still write
        if orientation >= 5 && !gray && dw >= 4 && dh >= 4 {
            transpose32(
                from: source, codedSize: codedSize, sourceStride: s, to: destination,
                destinationStride: destinationStride, orientation: orientation)
            // 4×4 blocks covered everything but the right strip (dw % 4) and bottom rows (dh % 4).
            let rightStrip = dw & ~3
            if rightStrip < dw {
                for y in 0..<(dh & ~3) {
                    let dRow = (destination + y * destinationStride).assumingMemoryBound(to: UInt32.self)
                    for x in rightStrip..<dw {
                        dRow[x] = (source + origin + x * stepX + y * stepY).loadUnaligned(as: UInt32.self)
                    }
                }
            }
            scalarFrom = dh & ~3
        }
        let tile = 32
        var ty = scalarFrom
        while ty < dh {
            let yEnd = min(ty + tile, dh)
            var tx = 0
            while tx < dw {
                let xEnd = min(tx + tile, dw)
                for y in ty..<yEnd {
                    let dRow = (destination + y * destinationStride).assumingMemoryBound(to: UInt32.self)
                    var src = source + origin + tx * stepX + y * stepY
                    if gray {
                        for x in tx..<xEnd {
                            dRow[x] = 0xFF00_0000 | UInt32(src.load(as: UInt8.self)) &* 0x01_0101
                            src += stepX
                        }
                    } else {
                        for x in tx..<xEnd {
                            dRow[x] = src.loadUnaligned(as: UInt32.self)
                            src += stepX
                        }
                    }
                }
                tx = xEnd
            }
            ty = yEnd
        }
    }

    /// Orientations 5–8 of 32-bit pixels in 4×4 blocks: four 16-byte source row loads, a
    /// register transpose, four 16-byte stores. Writes the destination's whole 4×4 blocks
    /// (width and height rounded down to multiples of 4); the caller finishes the edges.
    package static func transpose32(
        from source: UnsafeRawPointer, codedSize: PixelSize, sourceStride s: Int,
        to destination: UnsafeMutableRawPointer, destinationStride: Int, orientation: Int
    ) {
        let w = codedSize.width, h = codedSize.height
        let dw = h, dh = w  // destination size
        let reverseColumns = orientation == 7 || orientation == 8  // source column = W−1−y
        let reverseRows = orientation == 6 || orientation == 7  // source row = H−1−x
        let tile = 64
        var ty = 0
        while ty + 4 <= dh {
            let yEnd = min(ty + tile, dh & ~3)
            var tx = 0
            while tx + 4 <= dw {
                let xEnd = min(tx + tile, dw & ~3)
                var y0 = ty
                while y0 < yEnd {
                    let column = reverseColumns ? w - 4 - y0 : y0
                    var x0 = tx
                    while x0 < xEnd {
                        @inline(__always) func row(_ i: Int) -> SIMD4<UInt32> {
                            let sy = reverseRows ? h - 1 - (x0 + i) : x0 + i
                            var v = (source + sy * s + column * 4).loadUnaligned(as: SIMD4<UInt32>.self)
                            if reverseColumns { v = SIMD4(v[3], v[2], v[1], v[0]) }
                            return v
                        }
                        let r0 = row(0), r1 = row(1), r2 = row(2), r3 = row(3)
                        let d = destination + y0 * destinationStride + x0 * 4
                        d.storeBytes(of: SIMD4(r0[0], r1[0], r2[0], r3[0]), as: SIMD4<UInt32>.self)
                        (d + destinationStride).storeBytes(of: SIMD4(r0[1], r1[1], r2[1], r3[1]), as: SIMD4<UInt32>.self)
                        (d + 2 * destinationStride).storeBytes(of: SIMD4(r0[2], r1[2], r2[2], r3[2]), as: SIMD4<UInt32>.self)
                        (d + 3 * destinationStride).storeBytes(of: SIMD4(r0[3], r1[3], r2[3], r3[3]), as: SIMD4<UInt32>.self)
                        x0 += 4
                    }
                    y0 += 4
                }
                tx = xEnd
            }
            ty = yEnd
        }
    }

    /// Gray bytes to opaque BGRA words (little-endian: B = G = R = gray, A = 255).
    @inline(__always)
    package static func expandGrayRow(_ src: UnsafePointer<UInt8>, _ dst: UnsafeMutablePointer<UInt32>, _ count: Int) {
        for x in 0..<count { dst[x] = 0xFF00_0000 | UInt32(src[x]) &* 0x01_0101 }
    }

    /// One row of `count` RGB (`channels` 3) or RGBA (`channels` 4) pixels to BGRA: opaque
    /// without `alpha`, else premultiplied when `premultiply` (the source's colour is straight)
    /// or copied as it is (already premultiplied).
    @inline(__always)
    package static func rgbRowToBGRA(
        _ s: UnsafePointer<UInt8>, channels: Int, alpha: Bool, premultiply: Bool, _ d: UnsafeMutablePointer<UInt8>, _ count: Int
    ) {
        for x in 0..<count {
            let i = x * channels, o = 4 * x
            let a = alpha ? UInt32(s[i + 3]) : 255
            if premultiply && a != 255 {
                d[o] = UInt8(mul255(UInt32(s[i + 2]), a))
                d[o + 1] = UInt8(mul255(UInt32(s[i + 1]), a))
                d[o + 2] = UInt8(mul255(UInt32(s[i]), a))
            } else {
                d[o] = s[i + 2]
                d[o + 1] = s[i + 1]
                d[o + 2] = s[i]
            }
            d[o + 3] = UInt8(a)
        }
    }

    /// x × y / 255, rounded.
    @inline(__always)
    package static func mul255(_ x: UInt32, _ y: UInt32) -> UInt32 {
        let t = x &* y &+ 128
        return (t &+ (t >> 8)) >> 8
    }

    /// Converts CMYK pixels (as libjpeg outputs them) to opaque BGRA, in place. `inverted` is
    /// the Adobe polarity (stored values are 255 − ink), which every Adobe-marked file uses.
    package static func cmykToBGRA(_ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int, inverted: Bool) {
        for y in 0..<size.height {
            let p = (base + y * stride).assumingMemoryBound(to: UInt8.self)
            for x in 0..<size.width {
                let q = p + 4 * x
                var c = UInt32(q[0]), m = UInt32(q[1]), ye = UInt32(q[2]), k = UInt32(q[3])
                if !inverted {
                    c = 255 - c
                    m = 255 - m
                    ye = 255 - ye
                    k = 255 - k
                }
                // Now c, m, ye, k are 255 − ink: R = (255 − C)(255 − K) / 255.
                q[0] = UInt8(mul255(ye, k))
                q[1] = UInt8(mul255(m, k))
                q[2] = UInt8(mul255(c, k))
                q[3] = 255
            }
        }
    }

    /// Premultiplies BGRA rows in place.
    package static func premultiply(_ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int) {
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

    /// Un-premultiplies BGRA rows in place (alpha 0 leaves zeros), so that a colour transform
    /// sees straight colour.
    package static func unpremultiply(_ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int) {
        for y in 0..<size.height {
            let p = (base + y * stride).assumingMemoryBound(to: UInt8.self)
            for x in 0..<size.width {
                let q = p + 4 * x
                let a = UInt32(q[3])
                if a == 255 || a == 0 { continue }
                let half = a / 2
                q[0] = UInt8(min(255, (UInt32(q[0]) * 255 + half) / a))
                q[1] = UInt8(min(255, (UInt32(q[1]) * 255 + half) / a))
                q[2] = UInt8(min(255, (UInt32(q[2]) * 255 + half) / a))
            }
        }
    }

    /// Sets every alpha byte of BGRA rows to 255.
    package static func setOpaque(_ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int) {
        for y in 0..<size.height {
            let p = (base + y * stride).assumingMemoryBound(to: UInt8.self)
            for x in 0..<size.width { p[4 * x + 3] = 255 }
        }
    }

    /// Converts any ``PixelStyle`` image to tightly packed, straight (un-premultiplied) BGRA.
    /// Returns the bytes and whether any pixel is not opaque.
    package static func straightBGRA(_ image: PixelImage) -> (bytes: [UInt8], hasAlpha: Bool) {
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
                            if a == 255 {
                                (b, g, r) = (p[0], p[1], p[2])
                            } else if a == 0 {
                                (b, g, r) = (0, 0, 0)
                            } else {
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
                            r = UInt8((r5 * 527 + 23) >> 6)
                            g = UInt8((g6 * 259 + 33) >> 6)
                            b = UInt8((b5 * 527 + 23) >> 6)
                        case .gray8:
                            let v = row.load(fromByteOffset: x, as: UInt8.self)
                            (b, g, r) = (v, v, v)
                        }
                        d[4 * x] = b
                        d[4 * x + 1] = g
                        d[4 * x + 2] = r
                        d[4 * x + 3] = a
                    }
                }
            }
            count = w * h * 4
        }
        return (out, hasAlpha)
    }
}
