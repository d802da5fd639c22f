import CStrataJPEG

/// Owns a libjpeg decompressor (through `CStrataJPEG`) for JPEG decodes that hand over their
/// rows as they go, so that a resample can work on the first rows while the rest decode. Same
/// library, defaults and strictness as ``TurboJPEGDecompressor`` (warnings are errors, at most
/// 500 progressive scans), so the pixels are the same bytes. Not thread-safe: one per decoder.
final class JPEGRowDecompressor {
    private let reader: OpaquePointer

    init() {
        guard let reader = strata_jpeg_rows_create() else { fatalError("jpeg_create_decompress failed: out of memory") }
        self.reader = reader
    }

    deinit { strata_jpeg_rows_destroy(reader) }

    /// Decodes `bytes` at `factor` into BGRA rows `stride` bytes apart from `destination`,
    /// `rowsPerStep` rows at a time, calling `progress(rows)` after each step with the number
    /// of rows complete. Returns false, having written nothing, for a CMYK or YCCK file (it needs
    /// the colour conversion of ``ImageDecoder``'s other path). `expected` is the size the
    /// caller sized `destination` for; a file that decodes to another size is refused as corrupt.
    func decode(
        _ bytes: UnsafeRawBufferPointer, factor: JPEGScalingFactor, expected: PixelSize,
        into destination: UnsafeMutableRawPointer, stride: Int, rowsPerStep: Int, progress: (Int) -> Void
    ) throws(ImageDecodingError) -> Bool {
        var width: UInt32 = 0, height: UInt32 = 0
        var colorSpace: Int32 = 0
        let started = strata_jpeg_rows_start(
            reader, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, Int32(factor.numerator),
            Int32(factor.denominator), &width, &height, &colorSpace)
        if started == -2 { return false }
        if started != 0 { throw error() }
        guard Int(width) == expected.width, Int(height) == expected.height else {
            strata_jpeg_rows_abort(reader)
            throw ImageDecodingError(
                .corrupt("the image decodes to \(width)x\(height), not the \(expected) its header gave"), format: .jpeg)
        }
        let step = UInt32(max(1, rowsPerStep))
        var done = 0
        let rows = destination.assumingMemoryBound(to: UInt8.self)
        while done < expected.height {
            let read = strata_jpeg_rows_read(reader, rows + done * stride, stride, step)
            if read < 0 { throw error() }
            if read == 0 {
                strata_jpeg_rows_abort(reader)
                throw ImageDecodingError(.truncated, format: .jpeg)
            }
            done += Int(read)
            progress(done)
        }
        if strata_jpeg_rows_finish(reader) != 0 { throw error() }
        return true
    }

    private func error() -> ImageDecodingError {
        TurboJPEGDecompressor.error(message: String(cString: strata_jpeg_rows_message(reader)))
    }
}
