import Testing
@testable import Strata
import StrataTestSupport

/// GIF files written by ``GIFWriter`` (plain 9-bit LZW) and re-encoded, interlaced, merged or
/// moved by `gifsicle` at test time; the expected pixels are the palette's colours, exactly.
@Suite("GIF decoding")
struct GIFDecodingTests {
    /// A 16-colour global table: (16i, 255 − 16i, 8i).
    static let palette: [(UInt8, UInt8, UInt8)] = (0..<16).map { (i: Int) -> (UInt8, UInt8, UInt8) in
        (UInt8(16 * i), UInt8(255 - 16 * i), UInt8(8 * i))
    }
    static let other: [(UInt8, UInt8, UInt8)] = (0..<16).map { (i: Int) -> (UInt8, UInt8, UInt8) in
        (UInt8(255 - 15 * i), UInt8(7 * i), 200)
    }

    /// A `width × height` pattern of indices 0…15.
    static func pattern(_ width: Int, _ height: Int, seed: Int = 0) -> [UInt8] {
        (0..<(width * height)).map { UInt8(($0 % width / 3 + $0 / width / 2 + seed) % 16) }
    }

    static func gif(_ frames: [GIFWriter.Frame], screen: (Int, Int) = (40, 30), global: [(UInt8, UInt8, UInt8)]? = palette) -> [UInt8] {
        GIFWriter.encode(screenWidth: screen.0, screenHeight: screen.1, globalTable: global, frames: frames)
    }

    /// Whether `image` is `indices` in `table` at (`left`, `top`) (index `transparent`: 0) and
    /// transparent (all 0) elsewhere.
    static func check(
        _ image: PixelImage, indices: [UInt8], width: Int, height: Int, left: Int = 0, top: Int = 0,
        table: [(UInt8, UInt8, UInt8)] = palette, transparent: Int? = nil
    ) -> Int {
        var wrong = 0
        for y in 0..<image.height {
            for x in 0..<image.width {
                let fx = x - left, fy = y - top
                var expected: [UInt8] = [0, 0, 0, 0]
                if fx >= 0, fy >= 0, fx < width, fy < height {
                    let i = Int(indices[fy * width + fx])
                    if i != transparent { expected = [table[i].2, table[i].1, table[i].0, 255] }
                }
                if image.pixelBytes(x: x, y: y) != expected { wrong += 1 }
            }
        }
        return wrong
    }

    @Test("a full-screen frame decodes to its palette's colours, as written and as gifsicle -O2 re-encodes it")
    func plain() throws {
        let indices = Self.pattern(40, 30)
        let gif = Self.gif([.init(width: 40, height: 30, indices: indices)])
        for bytes in [gif, try FormatTools().gifsicle(gif, ["-O2"])] {
            let header = try ImageDecoder().readHeader(bytes)
            #expect(header.format == .gif && header.size == PixelSize(width: 40, height: 30))
            #expect(!header.hasAlpha && !header.isAnimated)
            #expect(Self.check(try ImageDecoder().decode(bytes), indices: indices, width: 40, height: 30) == 0)
        }
    }

    @Test("the transparent index is alpha 0")
    func transparency() throws {
        let indices = Self.pattern(40, 30)
        let gif = try FormatTools().gifsicle(Self.gif([.init(width: 40, height: 30, indices: indices, transparentIndex: 5)]), ["-O2"])
        #expect(try ImageDecoder().readHeader(gif).hasAlpha)
        let image = try ImageDecoder().decode(gif)
        #expect(Self.check(image, indices: indices, width: 40, height: 30, transparent: 5) == 0)
    }

    @Test("interlaced frames are de-interlaced (written so, and interlaced by gifsicle -i)")
    func interlaced() throws {
        let indices = Self.pattern(37, 29)
        let written = Self.gif([.init(width: 37, height: 29, indices: indices, interlaced: true)], screen: (37, 29))
        let plain = Self.gif([.init(width: 37, height: 29, indices: indices)], screen: (37, 29))
        #expect(written[13 + 768 + 9] & 0x40 != 0, "the frame is marked interlaced")
        for gif in [written, try FormatTools().gifsicle(plain, ["-i"])] {
            #expect(Self.check(try ImageDecoder().decode(gif), indices: indices, width: 37, height: 29) == 0)
        }
        for height in 1...17 {
            let rows = (0..<height).map { GIFCodec.interlacedRow($0, height: height) }
            #expect(Set(rows) == Set(0..<height), "height \(height): each row once")
        }
    }

    @Test("a local colour table overrides the global one")
    func localTable() throws {
        let indices = Self.pattern(40, 30)
        let gif = Self.gif([.init(width: 40, height: 30, indices: indices, localTable: Self.other)])
        #expect(Self.check(try ImageDecoder().decode(gif), indices: indices, width: 40, height: 30, table: Self.other) == 0)
        // No global table at all: the local one is all there is.
        let onlyLocal = Self.gif([.init(width: 40, height: 30, indices: indices, localTable: Self.other)], global: nil)
        #expect(Self.check(try ImageDecoder().decode(onlyLocal), indices: indices, width: 40, height: 30, table: Self.other) == 0)
        // Neither: a typed error.
        let none = Self.gif([.init(width: 40, height: 30, indices: indices)], global: nil)
        #expect(decodingError { _ = try ImageDecoder().decode(none) }?.format == .gif)
    }

    @Test("a frame smaller than the screen is drawn at its offset on a transparent screen; beyond the screen it is clipped")
    func offsets() throws {
        let indices = Self.pattern(20, 10)
        let gif = Self.gif([.init(left: 5, top: 7, width: 20, height: 10, indices: indices)])
        let header = try ImageDecoder().readHeader(gif)
        #expect(header.hasAlpha, "the uncovered screen is transparent")
        #expect(Self.check(try ImageDecoder().decode(gif), indices: indices, width: 20, height: 10, left: 5, top: 7) == 0)
        // gifsicle's own placement of a frame on a larger logical screen.
        let small = Self.gif([.init(width: 20, height: 10, indices: indices)], screen: (20, 10))
        let moved = try FormatTools().gifsicle(small, ["--logical-screen", "40x30", "--position", "5,7"])
        #expect(Self.check(try ImageDecoder().decode(moved), indices: indices, width: 20, height: 10, left: 5, top: 7) == 0)
        // Partly off the screen, plain and interlaced.
        for interlaced in [false, true] {
            let off = Self.gif([.init(left: 30, top: 25, width: 20, height: 10, indices: indices, interlaced: interlaced)])
            #expect(Self.check(try ImageDecoder().decode(off), indices: indices, width: 20, height: 10, left: 30, top: 25) == 0)
        }
    }

    @Test("an animation decodes its first frame")
    func animated() throws {
        let tools = FormatTools()
        let first = Self.pattern(40, 30), second = Self.pattern(40, 30, seed: 7)
        let gif = try tools.gifsicle(
            merging: [Self.gif([.init(width: 40, height: 30, indices: first)]), Self.gif([.init(width: 40, height: 30, indices: second)])],
            ["-O2", "--loopcount"])
        let header = try ImageDecoder().readHeader(gif)
        #expect(header.isAnimated)
        #expect(Self.check(try ImageDecoder().decode(gif), indices: first, width: 40, height: 30) == 0)
    }

    @Test("truncated, damaged, oversized and extension-flooded files throw typed errors")
    func broken() throws {
        let gif = try FormatTools().gifsicle(Self.gif([.init(width: 40, height: 30, indices: Self.pattern(40, 30))]), ["-O2"])
        let decoder = ImageDecoder()
        #expect(decodingError { _ = try decoder.decode(Array(gif.prefix(gif.count - 6))) }?.reason == .truncated)
        #expect(decodingError { _ = try decoder.decode(Array(gif.prefix(8))) }?.format == .gif)
        var damaged = gif
        for i in stride(from: 800, to: gif.count - 2, by: 5) { damaged[i] ^= 0xA5 }
        _ = try? decoder.decode(damaged)  // pixels or a typed error; a crash fails the run
        // A 65535 × 65535 logical screen.
        var bomb = gif
        bomb.replaceSubrange(6..<10, with: [0xFF, 0xFF, 0xFF, 0xFF])
        #expect(decodingError { _ = try decoder.readHeader(bomb) }?.reason == .tooLarge(pixels: 65535 * 65535, limit: 100_000_000))
        // A small screen with a 60000 × 60000 frame.
        let huge = Self.gif([.init(width: 2, height: 1, indices: [1, 2])])
        var hugeFrame = huge
        let descriptor = 13 + 768 + 5
        hugeFrame.replaceSubrange(descriptor..<(descriptor + 4), with: [0x60, 0xEA, 0x60, 0xEA])
        #expect(
            decodingError { _ = try decoder.readHeader(hugeFrame) }?.reason == .tooLarge(pixels: 60000 * 60000, limit: 100_000_000))
        // More comment extensions before the first frame than are scanned.
        let flooded =
            Array(huge[0..<(13 + 768)]) + Array(repeating: [0x21, 0xFE, 1, 0x41, 0], count: GIFCodec.maxRecordsScanned + 1).flatMap { $0 }
            + Array(huge[(13 + 768)...])
        #expect(decodingError { _ = try decoder.readHeader(flooded) }?.format == .gif)
        #expect(
            try decoder.readHeader(Array(huge[0..<(13 + 768)]) + [0x21, 0xFE, 1, 0x41, 0] + Array(huge[(13 + 768)...])).size
                == PixelSize(width: 40, height: 30))
        #expect(try decoder.decode(gif).size == PixelSize(width: 40, height: 30))
    }
}
