import CStrataJP2
import StrataBase

/// JPEG 2000 through OpenJPEG (through `CStrataJP2`, which reads the bytes in place, keeps
/// OpenJPEG's messages per file and turns its component planes into premultiplied BGRA): JP2
/// files and raw J2K codestreams; gray, RGB, sYCC (subsampled chroma too) and CMYK, with or
/// without alpha; 1 to 16 bits a sample. Stateless; each call opens and closes the file.
///
/// - **Shrink-on-load** from the file's own resolution levels: a decode `r` levels down is
///   OpenJPEG's reduce factor (the wavelet's lower bands only), listed smallest first in
///   ``ImageHeader/levels`` and chosen by ``ImageDecoder/decodedSize(for:minimumSize:)`` as
///   HEIF's thumbnails are.
/// - **Colour**: the ICC profile of a JP2 `colr` box goes through ``ColourConversion`` like any
///   other format's; an enumerated sRGB, gray or sYCC box needs none.
/// - **Strict**: a truncated or corrupt codestream is an error (OpenJPEG's strict mode), never
///   a partly decoded image.
/// - **Limits**: the caller checks the size against ``DecodingLimits`` before any decode.
///   OpenJPEG holds every component as 32-bit integers at the decoded size, which
///   ``workingBytes(components:decodedSize:)`` tells the memory budget.
/// - **Threads**: OpenJPEG decodes code-blocks on ``threads(for:)`` threads: more than one only
///   for a decode large enough to repay them.
package enum JP2Codec {
    package struct Features {
        package var size: PixelSize
        /// Where the image area starts on the reference grid (reduced sizes depend on it).
        package var origin: PixelSize
        package var components: Int
        package var precision: Int
        /// Resolution levels every component has: a decode may reduce by `resolutions - 1`.
        package var resolutions: Int
        package var hasAlpha: Bool
        package var isGrayscale: Bool
        package var isCMYK: Bool
        package var colour: EmbeddedColour
        /// The tile size (the whole image when untiled) and the tile grid.
        package var tileSize: PixelSize
        package var tiles: PixelSize
    }

    /// Whether `bytes` start a raw J2K codestream (`FF 4F FF 51`: SOC then SIZ) rather than a
    /// JP2 file.
    package static func isCodestream(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 4 && bytes[0] == 0xFF && bytes[1] == 0x4F && bytes[2] == 0xFF && bytes[3] == 0x51
    }

    /// An open file over `bytes` (not copied: it must not outlive them), its header read and
    /// checked.
    private final class File {
        let handle: OpaquePointer
        let info: strata_jp2_info

        /// `threads`: what a decode of this file will run on (OpenJPEG takes it before the header).
        init(_ bytes: UnsafeRawBufferPointer, threads: Int = 1) throws(ImageDecodingError) {
            var message = [CChar](repeating: 0, count: 256)
            guard let base = bytes.baseAddress,
                let handle = strata_jp2_open(
                    base, bytes.count, JP2Codec.isCodestream(bytes) ? 1 : 0, UInt32(max(1, threads)), &message, message.count)
            else {
                throw JP2Codec.error(message, while: "reading the header")
            }
            self.handle = handle
            var info = strata_jp2_info()
            guard strata_jp2_info(handle, &info, &message, message.count) == 0 else {
                strata_jp2_close(handle)
                throw JP2Codec.error(message, while: "reading the header", unsupported: true)
            }
            self.info = info
        }

        deinit { strata_jp2_close(handle) }
    }

    package static func features(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> Features {
        let info = try File(bytes).info
        var colour = EmbeddedColour.none
        if let icc = iccProfile(bytes) {
            if icc.count > ColourProfile.maximumByteCount {
                colour = .unusable(.tooLarge(bytes: icc.count))
            } else {
                colour = EmbeddedProfiles.profile(Array(icc))
            }
        }
        let colourComponents = Int(info.components) - (info.has_alpha != 0 ? 1 : 0)
        return Features(
            size: PixelSize(width: Int(info.width), height: Int(info.height)),
            origin: PixelSize(width: Int(info.origin_x), height: Int(info.origin_y)),
            components: Int(info.components), precision: Int(info.precision), resolutions: max(1, Int(info.resolutions)),
            hasAlpha: info.has_alpha != 0, isGrayscale: colourComponents < 3, isCMYK: info.colour_space == 5,
            colour: colour,
            tileSize: PixelSize(width: Int(info.tile_width), height: Int(info.tile_height)),
            tiles: PixelSize(width: Int(info.tiles_across), height: Int(info.tiles_down)))
    }

    /// The ICC profile of a JP2 file's first `colr` box of method 2 (restricted ICC) or 3 (any
    /// ICC) in its `jp2h` header box, `nil` when it has none (a codestream, an enumerated
    /// colour space). Boxes (ISO/IEC 15444-1 Annex I): a 4-byte big-endian length (header
    /// included; 1: an 8-byte length follows; 0: to the end), a 4-byte type, the payload.
    package static func iccProfile(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer.SubSequence? {
        func word(_ i: Int) -> UInt32 {
            UInt32(bytes[i]) << 24 | UInt32(bytes[i + 1]) << 16 | UInt32(bytes[i + 2]) << 8 | UInt32(bytes[i + 3])
        }
        func boxes(_ range: Range<Int>, _ visit: (String, Range<Int>) -> Bool) {
            var offset = range.lowerBound
            while offset + 8 <= range.upperBound {
                var length = Int(word(offset))
                var header = 8
                if length == 1 {
                    guard offset + 16 <= range.upperBound else { return }
                    let long = UInt64(word(offset + 8)) << 32 | UInt64(word(offset + 12))
                    guard long <= UInt64(range.upperBound - offset) else { return }
                    length = Int(long)
                    header = 16
                } else if length == 0 {
                    length = range.upperBound - offset
                }
                guard length >= header, offset + length <= range.upperBound else { return }
                let type = String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self)
                if !visit(type, offset + header..<offset + length) { return }
                offset += length
            }
        }
        var profile: UnsafeRawBufferPointer.SubSequence?
        boxes(0..<bytes.count) { type, payload in
            guard type == "jp2h" else { return type != "jp2c" }  // the header comes before the codestream
            boxes(payload) { inner, colr in
                guard inner == "colr", colr.count > 3 else { return true }
                let method = bytes[colr.lowerBound]
                guard method == 2 || method == 3 else { return true }
                profile = bytes[colr.lowerBound + 3..<colr.upperBound]
                return false
            }
            return false
        }
        return profile
    }

    /// The size of a decode `reduce` levels down: OpenJPEG's
    /// `ceil((origin + size) / 2^r) - ceil(origin / 2^r)` on each side.
    package static func reducedSize(_ size: PixelSize, origin: PixelSize, reduce: Int) -> PixelSize {
        func side(_ start: Int, _ length: Int) -> Int {
            let step = 1 << reduce
            return (start + length + step - 1) / step - (start + step - 1) / step
        }
        return PixelSize(width: side(origin.width, size.width), height: side(origin.height, size.height))
    }

    /// The sizes a decode reaches directly, smallest first: one per resolution level below the
    /// full one (``ImageHeader/levels``).
    package static func levels(of features: Features) -> [PixelSize] {
        guard features.resolutions > 1 else { return [] }
        return (1..<features.resolutions).reversed().map { reducedSize(features.size, origin: features.origin, reduce: $0) }
            .filter { $0.width > 0 && $0.height > 0 }
    }

    /// Threads for a decode of `pixels`: 2 from 4 megapixels up, else 1 (a small decode's
    /// code-blocks are too few to share; the engine runs several renders at once anyway).
    package static func threads(for pixels: Int) -> Int { pixels >= 4_000_000 ? 2 : 1 }

    /// The bytes OpenJPEG holds while decoding `components` planes at `decodedSize`: a 32-bit
    /// integer per sample, plus the code-block buffers (a quarter more, as a bound).
    package static func workingBytes(components: Int, decodedSize: PixelSize) -> Int {
        let planes = max(1, components) * 4 * decodedSize.pixelCount
        return planes + planes / 4
    }

    /// Decodes the image into `size` premultiplied BGRA pixels at `out` (rows `stride` bytes
    /// apart): the full size or one of ``levels(of:)``.
    /// Returns the threads OpenJPEG decoded on.
    @discardableResult
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, size: PixelSize, into out: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) -> Int {
        let file = try File(bytes, threads: threads(for: size.pixelCount))
        let info = file.info
        var message = [CChar](repeating: 0, count: 256)
        let full = PixelSize(width: Int(info.width), height: Int(info.height))
        let origin = PixelSize(width: Int(info.origin_x), height: Int(info.origin_y))
        guard
            let reduce = (0..<max(1, Int(info.resolutions))).first(where: {
                reducedSize(full, origin: origin, reduce: $0) == size
            })
        else {
            throw ImageDecodingError(.corrupt("no resolution level of \(full) is \(size)"), format: .jp2)
        }
        guard
            strata_jp2_decode(
                file.handle, UInt32(reduce), out.assumingMemoryBound(to: UInt8.self), stride, UInt32(size.width),
                UInt32(size.height), &message, message.count) == 0
        else {
            throw error(message, while: "decoding")
        }
        return Int(strata_jp2_threads(file.handle))
    }

    /// Decodes the region of `size` at (`x`, `y`) of the image `reduce` levels down (in that
    /// level's pixels; level 0 is the full size) into premultiplied BGRA at `out`: OpenJPEG
    /// reads only the tiles and code-blocks the region touches, so memory and time follow the
    /// region, not the image. For an image area at the reference grid's origin (what every
    /// writer makes); `threads`: OpenJPEG's for this decode.
    package static func decodeRegion(
        _ bytes: UnsafeRawBufferPointer, reduce: Int, x: Int, y: Int, size: PixelSize, into out: UnsafeMutableRawPointer, stride: Int,
        threads: Int = 1
    ) throws(ImageDecodingError) {
        let file = try File(bytes, threads: threads)
        let info = file.info
        let full = PixelSize(width: Int(info.width), height: Int(info.height))
        let level = reducedSize(full, origin: .init(width: 0, height: 0), reduce: reduce)
        guard info.origin_x == 0, info.origin_y == 0, reduce >= 0, reduce < max(1, Int(info.resolutions)), x >= 0, y >= 0,
            size.width > 0, size.height > 0, x + size.width <= level.width, y + size.height <= level.height
        else {
            throw ImageDecodingError(
                .corrupt("no region \(size) at \(x),\(y) of level \(reduce) (\(level)) of \(full) with its origin at 0,0"), format: .jp2)
        }
        var message = [CChar](repeating: 0, count: 256)
        guard
            strata_jp2_decode_region(
                file.handle, UInt32(reduce), UInt32(x << reduce), UInt32(y << reduce), UInt32(min(full.width, (x + size.width) << reduce)),
                UInt32(min(full.height, (y + size.height) << reduce)), out.assumingMemoryBound(to: UInt8.self), stride,
                UInt32(size.width), UInt32(size.height), &message, message.count) == 0
        else {
            throw error(message, while: "decoding a region")
        }
    }

    private static func error(_ message: [CChar], while doing: String, unsupported: Bool = false) -> ImageDecodingError {
        let text = String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let lower = text.lowercased()
        if lower.contains("stream too short") || lower.contains("truncated") || lower.contains("end of stream")
            || lower.contains("stream error")
        {
            return ImageDecodingError(.truncated, format: .jp2)
        }
        let detail = text.isEmpty ? "OpenJPEG gave no message" : text
        return ImageDecodingError(unsupported ? .unsupported("\(detail), \(doing)") : .corrupt("\(detail), \(doing)"), format: .jp2)
    }
}
