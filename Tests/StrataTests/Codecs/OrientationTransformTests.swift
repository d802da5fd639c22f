import Testing
@testable import Strata

@Suite("Orientation transforms")
struct OrientationTransformTests {
    /// Displayed (x, y) → stored (sx, sy) for EXIF orientation `n`, straight from the definition
    /// of the tag (where the stored row 0 / column 0 end up).
    static func storedCoordinate(_ x: Int, _ y: Int, orientation n: Int, stored w: Int, _ h: Int) -> (Int, Int) {
        switch n {
        case 1: return (x, y)
        case 2: return (w - 1 - x, y)  // mirrored horizontally
        case 3: return (w - 1 - x, h - 1 - y)  // rotated 180°
        case 4: return (x, h - 1 - y)  // mirrored vertically
        case 5: return (y, x)  // transposed
        case 6: return (y, h - 1 - x)  // stored rotated 90° CCW: display turns it CW
        case 7: return (w - 1 - y, h - 1 - x)  // transversed
        default: return (w - 1 - y, x)  // 8: stored rotated 90° CW
        }
    }

    @Test(
        "every orientation, BGRA and gray, on sizes that are not multiples of the 4×4 blocks",
        arguments: [(13, 7), (5, 9), (4, 4), (3, 3), (1, 6), (33, 70), (67, 5)])
    func matchesDefinition(size: (Int, Int)) {
        let (w, h) = size
        for gray in [false, true] {
            let bpp = gray ? 1 : 4
            let stride = w * bpp + 12
            var source = [UInt8](repeating: 0, count: stride * h)
            for y in 0..<h {
                for x in 0..<w {
                    for c in 0..<bpp {
                        source[y * stride + x * bpp + c] = UInt8(truncatingIfNeeded: (x * 7 + y * 13) * 4 + c + y * x)
                    }
                }
            }
            for n in 1...8 {
                let dw = n >= 5 ? h : w, dh = n >= 5 ? w : h
                let dstride = dw * 4 + 8
                var out = [UInt8](repeating: 0xEE, count: dstride * dh)
                source.withUnsafeBytes { src in
                    out.withUnsafeMutableBytes { dst in
                        PixelOps.orient(
                            from: src.baseAddress!, codedSize: PixelSize(width: w, height: h), sourceStride: stride,
                            gray: gray, to: dst.baseAddress!, destinationStride: dstride, orientation: n)
                    }
                }
                var mismatches = 0
                for y in 0..<dh {
                    for x in 0..<dw {
                        let (sx, sy) = Self.storedCoordinate(x, y, orientation: n, stored: w, h)
                        for c in 0..<4 {
                            let expected: UInt8 = gray ? (c == 3 ? 255 : source[sy * stride + sx]) : source[sy * stride + sx * 4 + c]
                            if out[y * dstride + x * 4 + c] != expected { mismatches += 1 }
                        }
                    }
                    for pad in (dw * 4)..<dstride where out[y * dstride + pad] != 0xEE { mismatches += 1 }
                }
                #expect(mismatches == 0, "\(w)x\(h) orientation \(n) gray \(gray)")
            }
        }
    }
}
