import CStrataTIFF
import CTIFF
import StrataBase

/// libtiff calls (through `CStrataTIFF`, which reads the bytes in place and keeps libtiff's
/// messages per file): the first image's header, and its decode to premultiplied BGRA through
/// libtiff's RGBA reader — striped or tiled, classic or BigTIFF; RGB, gray, palette, YCbCr,
/// CMYK and CIELab; 1 to 16 bits; uncompressed, LZW, deflate, PackBits and JPEG (whatever the
/// Debian libtiff decodes). Stateless; the file is closed before returning.
///
/// - **Pages**: the first image only (a multi-page file's, or a pyramid's full resolution);
///   a pyramid's other images are listed by `levels(_:)` and read as regions by
///   `RegionReader`, for tile pyramids.
/// - **Orientation**: the `Orientation` tag, whose values are EXIF's: the pixels are decoded
///   as stored and ``ImageHeader/orientation`` carries it, as for a JPEG.
/// - **Alpha**: associated alpha is kept, unassociated alpha is premultiplied by libtiff.
/// - **Colour**: the ICC profile (tag 34675) of RGB, gray, palette and YCbCr images. CMYK and
///   CIELab are converted to RGB by libtiff itself (not colour-managed), so their profile is
///   not handed on.
/// - **Limits**: the caller checks the size against ``DecodingLimits`` before any decode; no
///   single allocation of libtiff's (a strip or tile buffer) may exceed
///   ``maximumSingleAllocation``. Cost: one pass over the file's strips or tiles; memory: one
///   band of strips or tiles as RGBA besides the destination.
package enum TIFFCodec {
    package struct Features {
        package var size: PixelSize
        package var orientation: Int
        package var hasAlpha: Bool
        package var isGrayscale: Bool
        package var colour: EmbeddedColour
    }

    /// The largest single allocation libtiff may make for a file.
    package static let maximumSingleAllocation = 256 << 20

    /// An open file over `bytes` (not copied: it must not outlive them).
    package final class File {
        package let tiff: OpaquePointer
        package let features: strata_tiff_features

        package init(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) {
            var message = [CChar](repeating: 0, count: 256)
            guard let base = bytes.baseAddress,
                let tiff = strata_tiff_open(base, bytes.count, TIFFCodec.maximumSingleAllocation, &message, message.count)
            else {
                throw TIFFCodec.error(text(message), while: "opening the file")
            }
            self.tiff = tiff
            var features = strata_tiff_features()
            guard strata_tiff_features(tiff, &features, &message, message.count) == 0 else {
                TIFFClose(tiff)
                throw TIFFCodec.error(text(message), while: "reading the first image's header")
            }
            self.features = features
        }

        deinit { TIFFClose(tiff) }
    }

    package static func features(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> Features {
        let file = try File(bytes)
        let f = file.features
        let photometric = Int32(f.photometric)
        let isGray = photometric == PHOTOMETRIC_MINISBLACK || photometric == PHOTOMETRIC_MINISWHITE
        let managed = isGray || photometric == PHOTOMETRIC_RGB || photometric == PHOTOMETRIC_PALETTE || photometric == PHOTOMETRIC_YCBCR
        var colour = EmbeddedColour.none
        if managed, f.icc_count > 0, let icc = f.icc {
            if Int(f.icc_count) > ColourProfile.maximumByteCount {
                colour = .unusable(.tooLarge(bytes: Int(f.icc_count)))
            } else {
                colour = EmbeddedProfiles.profile(Array(UnsafeRawBufferPointer(start: icc, count: Int(f.icc_count))))
            }
        }
        return Features(
            size: PixelSize(width: Int(f.width), height: Int(f.height)),
            orientation: (1...8).contains(Int(f.orientation)) ? Int(f.orientation) : 1,
            hasAlpha: f.has_alpha != 0, isGrayscale: isGray, colour: colour)
    }

    /// Decodes the first image, as stored (no orientation applied), as premultiplied BGRA into
    /// `destination` (rows `stride` bytes apart); `size` is its coded size from the header.
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, size: PixelSize, into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        try readBands(bytes, size: size) { (band, first, rows) throws(ImageDecodingError) in
            for y in 0..<rows {
                toBGRA(
                    band + y * size.width, into: (destination + (first + y) * stride).assumingMemoryBound(to: UInt32.self),
                    count: size.width)
            }
        }
    }

    /// Decodes the first image, as stored, in bands of whole strips or tiles (each decoded
    /// once; at least 16 rows): `body(band, first, rows)` gets each band's premultiplied BGRA
    /// rows (`size.width` pixels each, no padding, in a buffer reused for the next band) from
    /// row `first` down. Memory: one band, never the image.
    package static func decodeBands(
        _ bytes: UnsafeRawBufferPointer, size: PixelSize, consumed: (Range<Int>) -> Void = { _ in },
        _ body: (UnsafeMutableRawPointer, _ first: Int, _ rows: Int) throws(ImageDecodingError) -> Void
    ) throws(ImageDecodingError) {
        try readBands(bytes, size: size, consumed: consumed) { (band, first, rows) throws(ImageDecodingError) in
            toBGRA(band, into: band, count: rows * size.width)
            try body(UnsafeMutableRawPointer(band), first, rows)
        }
    }

    /// libtiff's RGBA pixels of the first image, band by band (whole strips or tiles, at least
    /// 16 rows, `size.width` pixels a row): `body(band, first, rows)`. After each band,
    /// `consumed` gets the range of `bytes` its strips or tiles take, when they lie together
    /// (`strata_tiff_rows_extent`): a reader of a mapped file hands those pages back.
    private static func readBands(
        _ bytes: UnsafeRawBufferPointer, size: PixelSize, consumed: (Range<Int>) -> Void = { _ in },
        _ body: (UnsafeMutablePointer<UInt32>, _ first: Int, _ rows: Int) throws(ImageDecodingError) -> Void
    ) throws(ImageDecodingError) {
        let file = try File(bytes)
        let f = file.features
        guard Int(f.width) == size.width, Int(f.height) == size.height else {
            throw ImageDecodingError(.corrupt("libtiff reads \(f.width)x\(f.height), the header says \(size)"), format: .tiff)
        }
        let bandRows = min(size.height, max(Int(f.band_rows), 16))
        let band = UnsafeMutablePointer<UInt32>.allocate(capacity: size.width * bandRows)
        defer { band.deallocate() }
        var message = [CChar](repeating: 0, count: 256)
        var first = 0
        while first < size.height {
            let rows = min(bandRows, size.height - first)
            guard strata_tiff_read_rows(file.tiff, band, UInt32(first), UInt32(rows), &message, message.count) == 0 else {
                throw error(text(message), while: "decoding rows \(first)…\(first + rows - 1)")
            }
            try body(band, first, rows)
            var start: UInt64 = 0, end: UInt64 = 0
            strata_tiff_rows_extent(file.tiff, UInt32(first), UInt32(rows), &start, &end)
            if end > start, end <= UInt64(bytes.count) { consumed(Int(start)..<Int(end)) }
            first += rows
        }
    }

    /// libtiff's pixels (R | G << 8 | B << 16 | A << 24) as BGRA in memory: R and B swapped.
    /// `source` and `destination` may be the same.
    package static func toBGRA(_ source: UnsafeMutablePointer<UInt32>, into destination: UnsafeMutablePointer<UInt32>, count: Int) {
        for i in 0..<count {
            let p = source[i]
            destination[i] = (p & 0xFF00_FF00) | (p & 0xFF) << 16 | (p >> 16) & 0xFF
        }
    }

    /// A NUL-ended C string in `buffer`.
    package static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A typed error from libtiff's message: truncated data, a feature it does not read, or a
    /// corrupt file.
    package static func error(_ message: String, while action: String) -> ImageDecodingError {
        let lowered = message.lowercased()
        let text = "libtiff: \(message.isEmpty ? "unknown error" : message) while \(action)"
        if lowered.contains("read error") || lowered.contains("unexpected end") || lowered.contains("past end")
            || lowered.contains("truncat") || lowered.contains("premature") || lowered.contains("can not read")
            || lowered.contains("cannot read")
        {
            return ImageDecodingError(.truncated, format: .tiff)
        }
        if lowered.contains("not supported") || lowered.contains("sorry") || lowered.contains("unsupported")
            || lowered.contains("can not handle")
        {
            return ImageDecodingError(.unsupported(text), format: .tiff)
        }
        return ImageDecodingError(.corrupt(text), format: .tiff)
    }
}
