import CGIF
import StrataBase

/// giflib calls over bytes in memory (`DGifOpen` with a read callback; no files): the header and
/// the first frame composed on the logical screen, as premultiplied BGRA.
///
/// - **Composition**: the logical screen starts transparent (alpha 0; the background colour
///   is ignored, as browsers do); the first frame is drawn at its offset, clipped to the
///   screen, with its local colour table or else the global one; its graphic control
///   extension's transparent index is alpha 0; indices beyond the table are opaque black.
///   Interlaced frames are de-interlaced.
/// - **Animation**: the first frame only; ``Features/isAnimated`` says whether a second frame
///   follows (the header read skips the first frame's data to look, without decoding it).
/// - **Limits**: the logical screen is the image's size (checked against
///   ``DecodingLimits`` by the caller); the first frame's own area is held to the same limit
///   (a huge frame on a small screen would cost its whole LZW decode); at most
///   ``maxRecordsScanned`` records (extensions, frames) are read before the first frame and,
///   for the animation check, after it. A non-interlaced frame stops decoding at the screen's
///   last row.
package enum GIFCodec {
    package struct Features {
        package var size: PixelSize
        package var hasAlpha: Bool
        package var isAnimated: Bool
    }

    /// Records read before the first frame (or between it and a second one) at most.
    package static let maxRecordsScanned = 4096

    struct Cursor {
        var base: UnsafePointer<UInt8>
        var count: Int
        var position = 0
    }

    struct Frame {
        var left: Int, top: Int, width: Int, height: Int
        var interlaced: Bool
        var transparentIndex: Int?
        var colours: UnsafeMutablePointer<ColorMapObject>?
    }

    /// An open giflib decoder over bytes (which must outlive it).
    final class Reader {
        let gif: UnsafeMutablePointer<GifFileType>
        let cursor: UnsafeMutablePointer<Cursor>

        init(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) {
            cursor = .allocate(capacity: 1)
            cursor.initialize(to: Cursor(base: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), count: bytes.count))
            var code: Int32 = 0
            guard let gif = DGifOpen(cursor, GIFCodec.read, &code) else {
                cursor.deallocate()
                throw GIFCodec.error(code, while: "reading the screen descriptor")
            }
            self.gif = gif
        }

        deinit {
            DGifCloseFile(gif, nil)
            cursor.deallocate()
        }

        var screen: PixelSize { PixelSize(width: Int(gif.pointee.SWidth), height: Int(gif.pointee.SHeight)) }

        func failure(while action: String) -> ImageDecodingError { GIFCodec.error(gif.pointee.Error, while: action) }

        /// Reads records up to the first image descriptor, keeping the last graphic control
        /// extension's transparent index.
        func firstFrame() throws(ImageDecodingError) -> Frame {
            var transparent: Int?
            for _ in 0..<maxRecordsScanned {
                var type = UNDEFINED_RECORD_TYPE
                guard DGifGetRecordType(gif, &type) == GIF_OK else { throw failure(while: "reading a record") }
                switch type {
                case IMAGE_DESC_RECORD_TYPE:
                    guard DGifGetImageDesc(gif) == GIF_OK else { throw failure(while: "reading the image descriptor") }
                    let d = gif.pointee.Image
                    return Frame(
                        left: Int(d.Left), top: Int(d.Top), width: Int(d.Width), height: Int(d.Height),
                        interlaced: d.Interlace, transparentIndex: transparent, colours: d.ColorMap ?? gif.pointee.SColorMap)
                case EXTENSION_RECORD_TYPE:
                    var code: Int32 = 0
                    var block: UnsafeMutablePointer<GifByteType>?
                    guard DGifGetExtension(gif, &code, &block) == GIF_OK else { throw failure(while: "reading an extension") }
                    if code == GRAPHICS_EXT_FUNC_CODE, let block, block[0] >= 4 {
                        transparent = block[1] & 1 != 0 ? Int(block[4]) : nil
                    }
                    while block != nil {
                        guard DGifGetExtensionNext(gif, &block) == GIF_OK else { throw failure(while: "reading an extension") }
                    }
                case TERMINATE_RECORD_TYPE:
                    throw ImageDecodingError(.corrupt("the file ends before its first image"), format: .gif)
                default:
                    throw ImageDecodingError(.corrupt("unknown record type"), format: .gif)
                }
            }
            throw ImageDecodingError(.corrupt("more than \(maxRecordsScanned) records before the first image"), format: .gif)
        }

        /// After ``firstFrame()``: skips its data and says whether another frame follows
        /// (false on any error or after ``maxRecordsScanned`` records).
        func hasSecondFrame() -> Bool {
            var codeSize: Int32 = 0
            var block: UnsafeMutablePointer<GifByteType>?
            guard DGifGetCode(gif, &codeSize, &block) == GIF_OK else { return false }
            while block != nil {
                guard DGifGetCodeNext(gif, &block) == GIF_OK else { return false }
            }
            for _ in 0..<maxRecordsScanned {
                var type = UNDEFINED_RECORD_TYPE
                guard DGifGetRecordType(gif, &type) == GIF_OK else { return false }
                switch type {
                case IMAGE_DESC_RECORD_TYPE: return true
                case EXTENSION_RECORD_TYPE:
                    var code: Int32 = 0
                    var block: UnsafeMutablePointer<GifByteType>?
                    guard DGifGetExtension(gif, &code, &block) == GIF_OK else { return false }
                    while block != nil {
                        guard DGifGetExtensionNext(gif, &block) == GIF_OK else { return false }
                    }
                default: return false
                }
            }
            return false
        }
    }

    /// giflib's input function: copies from the cursor in `UserData`.
    static let read: InputFunc = { gif, buffer, length in
        guard let gif, let buffer, length > 0, let user = gif.pointee.UserData else { return 0 }
        let cursor = user.assumingMemoryBound(to: Cursor.self)
        let n = min(Int(length), cursor.pointee.count - cursor.pointee.position)
        guard n > 0 else { return 0 }
        buffer.update(from: cursor.pointee.base + cursor.pointee.position, count: n)
        cursor.pointee.position += n
        return Int32(n)
    }

    package static func features(_ bytes: UnsafeRawBufferPointer, maxPixels: Int) throws(ImageDecodingError) -> Features {
        let reader = try Reader(bytes)
        let screen = reader.screen
        let frame = try reader.firstFrame()
        try check(frame, maxPixels: maxPixels)
        let covers =
            frame.left == 0 && frame.top == 0 && frame.width >= screen.width && frame.height >= screen.height
        return Features(
            size: screen, hasAlpha: frame.transparentIndex != nil || !covers, isAnimated: reader.hasSecondFrame())
    }

    private static func check(_ frame: Frame, maxPixels: Int) throws(ImageDecodingError) {
        if frame.width * frame.height > maxPixels {
            throw ImageDecodingError(.tooLarge(pixels: frame.width * frame.height, limit: maxPixels), format: .gif)
        }
    }

    /// Decodes the first frame onto the logical screen of `size` (the header's), premultiplied
    /// BGRA, into `destination` (rows `stride` bytes apart).
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, size: PixelSize, maxPixels: Int,
        into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        let reader = try Reader(bytes)
        guard reader.screen == size else {
            throw ImageDecodingError(.corrupt("the screen is \(reader.screen), the header says \(size)"), format: .gif)
        }
        let frame = try reader.firstFrame()
        try check(frame, maxPixels: maxPixels)
        guard let colours = frame.colours else {
            throw ImageDecodingError(.corrupt("the first image has no colour table"), format: .gif)
        }
        let palette = self.palette(colours.pointee, transparent: frame.transparentIndex)
        for y in 0..<size.height { (destination + y * stride).initializeMemory(as: UInt8.self, repeating: 0, count: size.width * 4) }
        guard frame.width > 0, frame.height > 0 else { return }
        var line = [GifPixelType](repeating: 0, count: frame.width)
        let visibleWidth = max(0, min(frame.width, size.width - frame.left))
        for row in 0..<frame.height {
            let y = frame.interlaced ? interlacedRow(row, height: frame.height) : row
            let screenY = frame.top + y
            // Rows below the screen are never shown: a plain frame stops there.
            if !frame.interlaced && screenY >= size.height { break }
            let read = line.withUnsafeMutableBufferPointer { DGifGetLine(reader.gif, $0.baseAddress, Int32(frame.width)) }
            guard read == GIF_OK else { throw reader.failure(while: "decoding row \(row)") }
            guard screenY < size.height, visibleWidth > 0 else { continue }
            let out = (destination + screenY * stride).assumingMemoryBound(to: UInt32.self) + frame.left
            palette.withUnsafeBufferPointer { p in
                for x in 0..<visibleWidth { out[x] = p[Int(line[x])] }
            }
        }
    }

    /// The row that the `row`-th stored row of an interlaced frame of `height` rows is:
    /// every 8th from 0, every 8th from 4, every 4th from 2, every 2nd from 1.
    package static func interlacedRow(_ row: Int, height: Int) -> Int {
        let pass1 = (height + 7) / 8, pass2 = (height + 3) / 8, pass3 = (height + 1) / 4
        if row < pass1 { return row * 8 }
        if row < pass1 + pass2 { return (row - pass1) * 8 + 4 }
        if row < pass1 + pass2 + pass3 { return (row - pass1 - pass2) * 4 + 2 }
        return (row - pass1 - pass2 - pass3) * 2 + 1
    }

    /// 256 premultiplied BGRA words (little-endian B, G, R, A): the table's colours, opaque
    /// black past its end, 0 for the transparent index.
    static func palette(_ map: ColorMapObject, transparent: Int?) -> [UInt32] {
        var words = [UInt32](repeating: 0xFF00_0000, count: 256)
        let count = min(256, max(0, Int(map.ColorCount)))
        if let colours = map.Colors {
            for i in 0..<count {
                let c = colours[i]
                words[i] = 0xFF00_0000 | UInt32(c.Red) << 16 | UInt32(c.Green) << 8 | UInt32(c.Blue)
            }
        }
        if let transparent, transparent < 256 { words[transparent] = 0 }
        return words
    }

    static func error(_ code: Int32, while action: String) -> ImageDecodingError {
        switch code {
        case D_GIF_ERR_READ_FAILED, D_GIF_ERR_EOF_TOO_SOON:
            return ImageDecodingError(.truncated, format: .gif)
        default:
            let text = GifErrorString(code).map { String(cString: $0) } ?? "giflib error \(code)"
            return ImageDecodingError(.corrupt("giflib: \(text) while \(action)"), format: .gif)
        }
    }
}
