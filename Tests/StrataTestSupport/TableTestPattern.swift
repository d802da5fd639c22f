import Strata

/// A deterministic image per (entity number, version), used by the table tests and the
/// `strata-test-helper table-writer` child process to check that every image served is exactly the one
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
    package static func byte(n: Int, version: UInt64, x: Int, y: Int) -> UInt8 {
        var v = UInt64(truncatingIfNeeded: n) &* 0x9E37_79B9 &+ version &* 0x85EB_CA6B
        v = v &+ UInt64(truncatingIfNeeded: x &* 131 &+ y &* 7919)
        v ^= v >> 13
        v = v &* 0xC2B2_AE35
        return UInt8(truncatingIfNeeded: v ^ (v >> 16))
    }
}

/// What the `strata-test-helper table-writer --progress-file` child was doing last: four
/// little-endian UInt64 at offset 0 of the file (phase, entity number, version, rows drawn),
/// rewritten once the table is open, when a draw starts, after each drawn row and after each
/// store. A test that kills the child reads it to know whether the kill landed inside a draw.
package struct TableWriterProgress: Sendable, Hashable {
    package enum Phase: UInt64, Sendable {
        /// Inside the draw of `entity` at `version`, `rows` rows complete.
        case drawing = 1
        /// The store of `entity` at `version` returned.
        case stored = 2
        /// The table is open; no store has started yet.
        case ready = 3
    }

    package var phase: Phase
    package var entity: Int
    package var version: UInt64
    package var rows: Int

    package init(phase: Phase, entity: Int, version: UInt64, rows: Int) {
        self.phase = phase
        self.entity = entity
        self.version = version
        self.rows = rows
    }

    package static let length = 32

    package var encoded: [UInt8] {
        [phase.rawValue, UInt64(entity), version, UInt64(rows)].flatMap { value in
            (0..<8).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
        }
    }

    /// The record in `bytes`, if they hold one.
    package init?(decoding bytes: [UInt8]) {
        guard bytes.count >= Self.length else { return nil }
        let words = (0..<4).map { i in (0..<8).reduce(UInt64(0)) { $0 | UInt64(bytes[i * 8 + $1]) << (8 * $1) } }
        guard let phase = Phase(rawValue: words[0]) else { return nil }
        self.init(phase: phase, entity: Int(words[1]), version: words[2], rows: Int(words[3]))
    }
}
