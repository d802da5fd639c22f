import CStrataPNG
import StrataBase

/// Owns a libpng row reader (through `CStrataPNG`) over a PNG in memory, for decodes that hand
/// over their rows as they go: a tile pyramid's streaming pass over a PNG larger than a whole
/// decode may hold. The rows are premultiplied BGRA in sRGB's encoding, the same bytes
/// ``PNGCodec``'s whole decode makes (palette, gray, 16 bits and `gAMA` handled as libpng's
/// simplified API handles them). Non-interlaced files only (an Adam7 file's rows come in seven
/// passes): ``isInterlaced`` says so before any row is read. Not thread-safe.
package final class PNGRowReader {
    private let reader: OpaquePointer
    package let size: PixelSize
    package let hasAlpha: Bool
    package let isInterlaced: Bool
    private var rowsRead = 0

    /// Opens `bytes` (which must outlive the reader) and reads its header and the chunks
    /// before the pixels.
    package init(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) {
        var info = strata_png_info()
        var message = [CChar](repeating: 0, count: 256)
        guard let base = bytes.baseAddress, let reader = strata_png_rows_open(base, bytes.count, &info, &message, message.count)
        else {
            throw Self.error(message)
        }
        self.reader = reader
        size = PixelSize(width: Int(info.width), height: Int(info.height))
        hasAlpha = info.has_alpha != 0
        isInterlaced = info.interlaced != 0
    }

    deinit { strata_png_rows_destroy(reader) }

    /// Bytes of the file libpng has taken so far: it never reads the ones before again (a
    /// caller may release their pages).
    package var consumedBytes: Int { strata_png_rows_consumed(reader) }

    /// The next `count` rows (fewer at the end of the image; at least one must remain) into
    /// `destination`, rows `stride` bytes apart; the number read.
    package func read(into destination: UnsafeMutableRawPointer, stride: Int, count: Int) throws(ImageDecodingError) -> Int {
        precondition(!isInterlaced, "PNGRowReader: an interlaced PNG is not read in rows")
        let rows = min(count, size.height - rowsRead)
        guard rows > 0 else { throw ImageDecodingError(.corrupt("no rows left to read"), format: .png) }
        var message = [CChar](repeating: 0, count: 256)
        guard
            strata_png_rows_read(reader, destination.assumingMemoryBound(to: UInt8.self), stride, UInt32(rows), &message, message.count)
                == 0
        else {
            throw Self.error(message)
        }
        if hasAlpha { PixelOps.premultiply(destination, size: PixelSize(width: size.width, height: rows), stride: stride) }
        rowsRead += rows
        return rows
    }

    /// The C reader's message (NUL-ended in `buffer`) as ``PNGCodec``'s typed error.
    private static func error(_ buffer: [CChar]) -> ImageDecodingError {
        PNGCodec.error(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
}
