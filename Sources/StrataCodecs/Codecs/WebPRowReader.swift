import CWebP
import StrataBase

/// Owns libwebp's incremental decoder over a still WebP in memory, for decodes that hand over
/// their rows as they go: a tile pyramid's streaming pass. The rows are premultiplied BGRA, the
/// bytes of ``WebPCodec``'s whole decode. libwebp insists on one output buffer for the whole
/// image, but writes it top to bottom as it is given more of the file: here that buffer is a
/// ``ScratchMapping`` whose rows are handed back to the kernel once read, and the file is given
/// to the decoder a slice at a time, so what is resident is a band of rows, not the image.
///
/// Memory: bounded by the bands for a lossy WebP without alpha (``isBoundedByBands``); libwebp
/// itself holds a lossy file's whole alpha plane (a byte or more a pixel) and a lossless file's
/// whole image (four bytes a pixel) while it decodes. Still images only. Not thread-safe.
package final class WebPRowReader {
    package let size: PixelSize
    /// Whether libwebp's own memory stays bounded too: a lossy file without alpha.
    package let isBoundedByBands: Bool
    private let bytes: UnsafeRawBufferPointer
    private let config: UnsafeMutablePointer<WebPDecoderConfig>
    private var output: ScratchMapping
    private let decoder: OpaquePointer
    /// Bytes of the file given to the decoder so far, and how many more each step gives.
    private var given = 0
    private let step: Int
    /// Rows final in `output`, rows handed over, and whether libwebp has said it is done.
    private var decoded = 0, rowsRead = 0, finished = false

    /// Whether a still WebP's rows come in memory bounded by the bands (see the type's notes).
    package static func isBoundedByBands(_ bytes: UnsafeRawBufferPointer) -> Bool {
        (try? WebPCodec.features(bytes)).map(isBoundedByBands) ?? false
    }

    /// The rule of ``isBoundedByBands``: a still, lossy file without alpha.
    private static func isBoundedByBands(_ features: WebPCodec.Features) -> Bool {
        features.isLossy && !features.hasAlpha && !features.isAnimated
    }

    /// Opens `bytes` (which must outlive the reader): reads the header and maps the output.
    package init(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) {
        let features = try WebPCodec.features(bytes)
        guard !features.isAnimated else {
            throw ImageDecodingError(.unsupported("an animated WebP is not read in rows"), format: .webp)
        }
        size = features.size
        isBoundedByBands = Self.isBoundedByBands(features)
        self.bytes = bytes
        step = max(64 << 10, bytes.count / 256)
        let rowBytes = size.width * 4
        do {
            output = try ScratchMapping(count: rowBytes * size.height)
        } catch {
            throw ImageDecodingError(.corrupt("no address space for the decoder's output (\(error))"), format: .webp)
        }
        config = .allocate(capacity: 1)
        guard WebPInitDecoderConfig(config) != 0 else {
            config.deallocate()
            throw ImageDecodingError(.unsupported("libwebp ABI mismatch"), format: .webp)
        }
        // libwebp keeps pointers to the options and the output description: `config` lives
        // as long as the decoder.
        config.pointee.options.use_threads = 1
        config.pointee.output.colorspace = MODE_bgrA
        config.pointee.output.is_external_memory = 1
        config.pointee.output.width = Int32(size.width)
        config.pointee.output.height = Int32(size.height)
        config.pointee.output.u.RGBA.rgba = output.base.assumingMemoryBound(to: UInt8.self)
        config.pointee.output.u.RGBA.stride = Int32(rowBytes)
        config.pointee.output.u.RGBA.size = output.count
        guard let decoder = WebPIDecode(nil, 0, config) else {
            config.deallocate()
            throw ImageDecodingError(.corrupt("libwebp could not start its incremental decoder"), format: .webp)
        }
        self.decoder = decoder
    }

    deinit {
        WebPIDelete(decoder)
        WebPFreeDecBuffer(&config.pointee.output)
        config.deallocate()
    }

    /// The next `count` rows (fewer when fewer are decoded yet, or at the end of the image; at
    /// least one must remain) into `destination`, rows `stride` bytes apart; the number read.
    package func read(into destination: UnsafeMutableRawPointer, stride: Int, count: Int) throws(ImageDecodingError) -> Int {
        guard rowsRead < size.height else { throw ImageDecodingError(.corrupt("no rows left to read"), format: .webp) }
        while decoded == rowsRead { try advance() }
        let rows = min(count, decoded - rowsRead), rowBytes = size.width * 4
        for row in 0..<rows {
            (destination + row * stride).copyMemory(from: output.base + (rowsRead + row) * rowBytes, byteCount: rowBytes)
        }
        rowsRead += rows
        output.release(upTo: rowsRead * rowBytes)
        return rows
    }

    /// Bytes of the decoder's whole-image output resident now (decoded rows not yet read, and
    /// pages libwebp is writing).
    package var outputResidentBytes: Int { output.residentBytes }

    /// Gives the decoder the next slice of the file and notes how many rows are now final.
    private func advance() throws(ImageDecodingError) {
        guard !finished else {
            throw ImageDecodingError(.corrupt("libwebp finished after \(decoded) of \(size.height) rows"), format: .webp)
        }
        given = min(bytes.count, given + step)
        let status = WebPIUpdate(decoder, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), given)
        switch status {
        case VP8_STATUS_OK:
            finished = true
        case VP8_STATUS_SUSPENDED:
            if given == bytes.count { throw ImageDecodingError(.truncated, format: .webp) }
        default:
            throw WebPCodec.error(status, while: "decoding")
        }
        var lastRow: Int32 = 0, width: Int32 = 0, height: Int32 = 0, stride: Int32 = 0
        // Nil until the headers are read.
        guard let rgba = WebPIDecGetRGB(decoder, &lastRow, &width, &height, &stride) else { return }
        guard UnsafeMutableRawPointer(rgba) == output.base, Int(width) == size.width, Int(height) == size.height else {
            throw ImageDecodingError(.corrupt("libwebp decodes \(width)×\(height), the header says \(size)"), format: .webp)
        }
        decoded = min(size.height, max(decoded, Int(lastRow)))
    }
}
