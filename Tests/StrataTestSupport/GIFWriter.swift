/// Writes small GIF files for the decoder's tests: a logical screen, a global colour table and
/// frames with their own offset, optional local colour table, transparent index and interlacing.
/// The LZW data is "uncompressed" (9-bit literal codes, a clear code every 250 pixels), which
/// every decoder reads; `gifsicle` re-encodes such files with real LZW compression.
package enum GIFWriter {
    package struct Frame {
        package var left = 0, top = 0, width: Int, height: Int
        /// Palette indices, row by row (`width × height`).
        package var indices: [UInt8]
        /// RGB triples; `nil` uses the global table.
        package var localTable: [(UInt8, UInt8, UInt8)]?
        package var transparentIndex: Int?
        package var interlaced = false
        /// Centiseconds (a graphic control extension is written when this or `disposal` is set).
        package var delay: Int?
        /// 1 keep, 2 clear to the background, 3 restore the previous canvas.
        package var disposal: Int?

        package init(
            left: Int = 0, top: Int = 0, width: Int, height: Int, indices: [UInt8],
            localTable: [(UInt8, UInt8, UInt8)]? = nil, transparentIndex: Int? = nil, interlaced: Bool = false,
            delay: Int? = nil, disposal: Int? = nil
        ) {
            self.delay = delay
            self.disposal = disposal
            precondition(indices.count == width * height)
            self.left = left
            self.top = top
            self.width = width
            self.height = height
            self.indices = indices
            self.localTable = localTable
            self.transparentIndex = transparentIndex
            self.interlaced = interlaced
        }
    }

    /// `loopCount`: a NETSCAPE2.0 extension with that count (0: forever); `nil`: none.
    package static func encode(
        screenWidth: Int, screenHeight: Int, globalTable: [(UInt8, UInt8, UInt8)]?, frames: [Frame], loopCount: Int? = nil
    ) -> [UInt8] {
        var out = Array("GIF89a".utf8)
        out += le16(screenWidth) + le16(screenHeight)
        out += [globalTable == nil ? 0x00 : 0xF7, 0, 0]  // global table of 256 entries
        if let globalTable { out += table(globalTable) }
        if let loopCount { out += [0x21, 0xFF, 11] + Array("NETSCAPE2.0".utf8) + [3, 1] + le16(loopCount) + [0] }
        for frame in frames {
            if frame.transparentIndex != nil || frame.delay != nil || frame.disposal != nil {
                let flags = UInt8((frame.disposal ?? 0) << 2) | (frame.transparentIndex != nil ? 1 : 0)
                out += [0x21, 0xF9, 4, flags] + le16(frame.delay ?? 10) + [UInt8(frame.transparentIndex ?? 0), 0]
            }
            out += [0x2C] + le16(frame.left) + le16(frame.top) + le16(frame.width) + le16(frame.height)
            out += [(frame.localTable == nil ? 0 : 0x87) | (frame.interlaced ? 0x40 : 0)]
            if let local = frame.localTable { out += table(local) }
            var rows: [Int] = Array(0..<frame.height)
            if frame.interlaced {
                rows =
                    Array(Swift.stride(from: 0, to: frame.height, by: 8)) + Array(Swift.stride(from: 4, to: frame.height, by: 8))
                    + Array(Swift.stride(from: 2, to: frame.height, by: 4)) + Array(Swift.stride(from: 1, to: frame.height, by: 2))
            }
            let pixels = rows.flatMap { frame.indices[($0 * frame.width)..<(($0 + 1) * frame.width)] }
            out += [8] + subBlocks(lzw(pixels)) + [0]
        }
        out.append(0x3B)
        return out
    }

    private static func le16(_ v: Int) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8 & 0xFF)] }

    private static func table(_ colours: [(UInt8, UInt8, UInt8)]) -> [UInt8] {
        (0..<256).flatMap { i -> [UInt8] in
            i < colours.count ? [colours[i].0, colours[i].1, colours[i].2] : [0, 0, 0]
        }
    }

    /// 9-bit codes: clear, up to 250 literals, clear, …, end of information.
    private static func lzw(_ pixels: [UInt8]) -> [UInt8] {
        var bytes: [UInt8] = []
        var buffer = 0, bits = 0
        func put(_ code: Int) {
            buffer |= code << bits
            bits += 9
            while bits >= 8 {
                bytes.append(UInt8(buffer & 0xFF))
                buffer >>= 8
                bits -= 8
            }
        }
        for (i, p) in pixels.enumerated() {
            if i % 250 == 0 { put(256) }
            put(Int(p))
        }
        put(257)
        if bits > 0 { bytes.append(UInt8(buffer & 0xFF)) }
        return bytes
    }

    private static func subBlocks(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var i = 0
        while i < data.count {
            let n = min(255, data.count - i)
            out.append(UInt8(n))
            out += data[i..<(i + n)]
            i += n
        }
        return out
    }
}
