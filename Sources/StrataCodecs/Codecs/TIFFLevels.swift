import CStrataTIFF
import CTIFF
import StrataBase

extension TIFFCodec {
    /// One image of a TIFF file (its first image, a following page or one of the first image's
    /// SubIFDs): its size, the blocks it is decoded in (a tile, or a strip: the whole width),
    /// and where its directory is.
    package struct Level: Sendable, Hashable {
        package init(size: PixelSize, block: PixelSize, directory: UInt64) {
            self.size = size
            self.block = block
            self.directory = directory
        }

        package var size: PixelSize
        package var block: PixelSize
        package var directory: UInt64
    }

    /// Where the file's first directory (image file directory) starts, from its first bytes
    /// (8 for a classic TIFF, 16 for a BigTIFF); `nil` when they are not a TIFF's header. libtiff
    /// and vips write the directory after the pixels, so a header reader that has only the
    /// file's first bytes reads this far next.
    package static func firstDirectoryOffset(_ bytes: UnsafeRawBufferPointer) -> Int? {
        guard bytes.count >= 8 else { return nil }
        let little: Bool
        switch (bytes[0], bytes[1]) {
        case (0x49, 0x49): little = true
        case (0x4D, 0x4D): little = false
        default: return nil
        }
        func value(at offset: Int, count: Int) -> UInt64 {
            var result: UInt64 = 0
            for i in 0..<count {
                let byte = UInt64(bytes[offset + (little ? count - 1 - i : i)])
                result = result << 8 | byte
            }
            return result
        }
        switch value(at: 2, count: 2) {
        case 42: return Int(exactly: value(at: 4, count: 4))
        case 43:
            guard bytes.count >= 16, value(at: 4, count: 2) == 8 else { return nil }
            return Int(exactly: value(at: 8, count: 8))
        default: return nil
        }
    }

    /// The most images ``levels(_:)`` lists.
    package static let maximumLevels = 64

    /// The file's images: the first, its following pages, then the first image's SubIFDs (at
    /// most ``maximumLevels``). Reads directories only, no pixels.
    package static func levels(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> [Level] {
        let file = try File(bytes)
        var levels = [strata_tiff_level](repeating: strata_tiff_level(), count: maximumLevels)
        let count = Int(strata_tiff_levels(file.tiff, &levels, Int32(levels.count)))
        return levels.prefix(count).map {
            Level(
                size: PixelSize(width: Int($0.width), height: Int($0.height)),
                block: PixelSize(width: Int($0.block_width), height: Int($0.block_height)), directory: $0.offset)
        }
    }

    /// Reads regions of a file's images (``Level``) as premultiplied BGRA, as stored (no
    /// orientation applied): one open file for many reads, each decoding only the tiles (or
    /// strips) its region touches. One thread at a time.
    package final class RegionReader {
        private let file: File

        /// Opens `bytes`, which must outlive the reader.
        package init(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) {
            file = try File(bytes)
        }

        /// The `size` region at `x`, `y` of `level` into `destination` (`size.width` pixels a
        /// row, no padding).
        package func read(
            _ level: Level, x: Int, y: Int, size: PixelSize, into destination: UnsafeMutablePointer<UInt32>
        ) throws(ImageDecodingError) {
            var message = [CChar](repeating: 0, count: 256)
            guard
                strata_tiff_read_region(
                    file.tiff, level.directory, destination, UInt32(x), UInt32(y), UInt32(size.width), UInt32(size.height), &message,
                    message.count) == 0
            else {
                throw TIFFCodec.error(TIFFCodec.text(message), while: "decoding \(size) at \(x),\(y) of its \(level.size) image")
            }
            TIFFCodec.toBGRA(destination, into: destination, count: size.width * size.height)
        }
    }
}
