/// A deterministic image per (entity number, version), used by the table tests and the hidden
/// `strata table-writer` child process to check that every image served is exactly the one
/// written (never torn, never another entity's).
package enum TableTestPattern {
    package static func entityID(_ n: Int) -> ImageEntityID { ImageEntityID(high: 0x7465_7374, low: UInt64(n)) }

    /// Writes the pattern of (`n`, `version`) into `image`, one row at a time.
    package static func draw(_ image: inout PixelImage, n: Int, version: UInt64, afterRow: (() -> Void)? = nil) {
        let (w, h, bpp, stride) = (image.width, image.height, image.style.bytesPerPixel, image.bytesPerRow)
        image.withUnsafeMutableBytes { raw in
            for y in 0..<h {
                for x in 0..<w * bpp {
                    raw[y * stride + x] = byte(n: n, version: version, x: x, y: y)
                }
                afterRow?()
            }
        }
    }

    /// Whether `image` holds exactly the pattern of (`n`, `version`) at its size.
    package static func matches(_ image: PixelImage, n: Int, version: UInt64) -> Bool {
        let (w, h, bpp, stride) = (image.width, image.height, image.style.bytesPerPixel, image.bytesPerRow)
        return image.withUnsafeBytes { raw in
            for y in 0..<h {
                for x in 0..<w * bpp where raw[y * stride + x] != byte(n: n, version: version, x: x, y: y) { return false }
            }
            return true
        }
    }

    @inline(__always)
    static func byte(n: Int, version: UInt64, x: Int, y: Int) -> UInt8 {
        var v = UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9 &+ version &* 0x85EB_CA6B
        v = v &+ UInt64(truncatingIfNeeded: x &* 131 &+ y &* 7919)
        v ^= v >> 13
        v = v &* 0xC2B2_AE35
        return UInt8(truncatingIfNeeded: v ^ (v >> 16))
    }
}
