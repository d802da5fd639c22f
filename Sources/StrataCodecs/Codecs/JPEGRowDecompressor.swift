import CStrataJPEG
import StrataBase

/// Owns a libjpeg decompressor (through `CStrataJPEG`) for JPEG decodes that hand over their
/// rows as they go, so that a resample can work on the first rows while the rest decode. Same
/// library, defaults and strictness as ``TurboJPEGDecompressor`` (warnings are errors, at most
/// 500 progressive scans), so the pixels are the same bytes. Not thread-safe: one per decoder.
package final class JPEGRowDecompressor {
    private let reader: OpaquePointer

    package init() {
        guard let reader = strata_jpeg_rows_create() else { fatalError("jpeg_create_decompress failed: out of memory") }
        self.reader = reader
    }

    deinit { strata_jpeg_rows_destroy(reader) }

    /// Decodes `bytes` at `factor` into BGRA rows `stride` bytes apart from `destination`,
    /// `rowsPerStep` rows at a time, calling `progress(rows)` after each step with the number
    /// of rows complete. Returns false, having written nothing, for a CMYK or YCCK file (it needs
    /// the colour conversion of ``ImageDecoder``'s other path). `expected` is the size the
    /// caller sized `destination` for; a file that decodes to another size is refused as corrupt.
    package func decode(
        _ bytes: UnsafeRawBufferPointer, factor: JPEGScalingFactor, expected: PixelSize,
        into destination: UnsafeMutableRawPointer, stride: Int, rowsPerStep: Int, progress: (Int) -> Void
    ) throws(ImageDecodingError) -> Bool {
        guard let size = try start(bytes, factor: factor) else { return false }
        try readRows(
            width: UInt32(size.width), height: UInt32(size.height), expected: expected, into: destination, stride: stride,
            rowsPerStep: rowsPerStep, progress: progress)
        return true
    }

    /// Starts a decode of `bytes` (which must stay valid until it ends) at `factor`, for a
    /// caller that takes the rows band by band (``read(into:stride:count:)``, then
    /// ``finish()``, or ``abort()``): the decoded size, or `nil`, having started nothing, for a
    /// CMYK or YCCK file.
    package func start(_ bytes: UnsafeRawBufferPointer, factor: JPEGScalingFactor) throws(ImageDecodingError) -> PixelSize? {
        var width: UInt32 = 0, height: UInt32 = 0
        var colorSpace: Int32 = 0
        let started = strata_jpeg_rows_start(
            reader, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, Int32(factor.numerator),
            Int32(factor.denominator), &width, &height, &colorSpace)
        if started == -2 { return nil }
        if started != 0 { throw error() }
        return PixelSize(width: Int(width), height: Int(height))
    }

    /// The next `count` rows (fewer at the end of the image) of a started decode, as BGRA rows
    /// `stride` bytes apart from `destination`; the number read. Data that ends before the
    /// image does is refused as truncated (the decode is then over).
    package func read(into destination: UnsafeMutableRawPointer, stride: Int, count: Int) throws(ImageDecodingError) -> Int {
        let read = strata_jpeg_rows_read(reader, destination.assumingMemoryBound(to: UInt8.self), stride, UInt32(max(1, count)))
        if read < 0 { throw error() }
        if read == 0 {
            strata_jpeg_rows_abort(reader)
            throw ImageDecodingError(.truncated, format: .jpeg)
        }
        return Int(read)
    }

    /// Ends a started decode whose rows were all read: checks the end of the data.
    package func finish() throws(ImageDecodingError) {
        if strata_jpeg_rows_finish(reader) != 0 { throw error() }
    }

    /// Bytes of the data libjpeg has taken so far in the started decode: it never reads the
    /// ones before again (a caller may release their pages). 0 when nothing is started.
    package var consumedBytes: Int { strata_jpeg_rows_consumed(reader) }

    /// Ends a started decode early.
    package func abort() { strata_jpeg_rows_abort(reader) }

    /// The rows of a started decode of `width` × `height`, `rowsPerStep` at a time, then the
    /// end of the data: refuses another size than `expected` (as corrupt) and data that ends
    /// early (as truncated), calling `progress(rows)` after each step.
    private func readRows(
        width: UInt32, height: UInt32, expected: PixelSize, into destination: UnsafeMutableRawPointer, stride: Int,
        rowsPerStep: Int, progress: (Int) -> Void
    ) throws(ImageDecodingError) {
        guard Int(width) == expected.width, Int(height) == expected.height else {
            strata_jpeg_rows_abort(reader)
            throw ImageDecodingError(
                .corrupt("the image decodes to \(width)x\(height), not the \(expected) its header gave"), format: .jpeg)
        }
        var done = 0
        while done < expected.height {
            done += try read(into: destination + done * stride, stride: stride, count: rowsPerStep)
            progress(done)
        }
        try finish()
    }

    /// What ``decodePlane(_:factor:output:expected:into:stride:)`` writes.
    package enum Plane {
        /// The Y component, 1 byte a pixel.
        case luma
        /// Y, Cb and Cr, 3 bytes a pixel, the chroma upsampled as a BGRA decode upsamples it.
        case ycc

        package var code: Int32 { self == .luma ? Int32(STRATA_JPEG_OUT_LUMA) : Int32(STRATA_JPEG_OUT_YCC) }
    }

    /// Decodes one half of a split progressive file (``ProgressiveJPEGSplit``) at `factor` into
    /// `destination`, rows `stride` bytes apart, without block smoothing. Returns false, having
    /// written nothing, when the file is not YCbCr; throws as ``decode(_:factor:expected:into:stride:rowsPerStep:progress:)``
    /// does, and refuses a file that decodes to another size than `expected`.
    package func decodePlane(
        _ bytes: UnsafeRawBufferPointer, factor: JPEGScalingFactor, output: Plane, expected: PixelSize,
        into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) -> Bool {
        var width: UInt32 = 0, height: UInt32 = 0
        let started = strata_jpeg_rows_start_split(
            reader, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, Int32(factor.numerator),
            Int32(factor.denominator), output.code, &width, &height)
        if started == -2 || started == -3 { return false }
        if started != 0 { throw error() }
        try readRows(
            width: width, height: height, expected: expected, into: destination, stride: stride,
            rowsPerStep: expected.height, progress: { _ in })
        return true
    }

    private func error() -> ImageDecodingError {
        TurboJPEGDecompressor.error(message: String(cString: strata_jpeg_rows_message(reader)))
    }
}
