import CStrataJPEG
import StrataBase

/// A baseline JPEG read at 1/8 scale with its Huffman decoding spread over several threads:
/// a pyramid's coarse pass, the viewer's first screen of a big image.
///
/// At 1/8 scale each output pixel is the mean of an 8 × 8 block (or of a quadrant of a
/// subsampled chroma block), which the block's coefficients give without an inverse DCT, so
/// the only real work is the entropy decoding — sequential by nature, one thread for libjpeg
/// however many cores there are. Here the data is cut into parts per round: the first is
/// decoded from the true state, the others speculatively from a guessed MCU start; Huffman
/// codes resynchronise, and the true decode checks where each speculative part fell in step
/// with it before taking its blocks (or decodes that part's range itself), so the result never
/// depends on a guess (`strata_jpeg_eighth.c` tells how).
///
/// Takes 8-bit baseline (Huffman, one interleaved scan) YCbCr or grayscale files whose sampling
/// factors are 1 or 2; ``init(_:partBytes:)`` answers `nil` for others (read them with libjpeg). Each
/// luma pixel is libjpeg's own 1/8-scale value; a subsampled chroma pixel is its quadrant's
/// exact mean (libjpeg's 1/8 scale approximates it). Memory: the records of one round's parts
/// (a MiB of data each, at most 65 536 MCUs: about 5 MB) and the output rows they complete,
/// never the image.
///
/// Not thread-safe: one decode at a time.
package final class JPEGEighthReader {
    private let decoder: OpaquePointer
    /// The output size: ⌈width / 8⌉ × ⌈height / 8⌉.
    package let size: PixelSize
    /// Speculative parts that were in step with the true decode (their blocks were kept).
    package private(set) var partsInStep: Int64 = 0
    /// Speculative parts in the rounds so far.
    package private(set) var speculativeParts = 0

    /// The reader for the JPEG `bytes` (which must outlive it), or `nil` when the file is not
    /// one it takes. Each part of a round covers `partBytes` bytes of the data (tests make
    /// them small). Throws when libjpeg cannot read the header.
    package init?(_ bytes: UnsafeRawBufferPointer, partBytes: Int = 1 << 20) throws(ImageDecodingError) {
        guard let base = bytes.baseAddress else { return nil }
        var decoder: OpaquePointer?
        var width: UInt32 = 0, height: UInt32 = 0
        var message = [CChar](repeating: 0, count: 256)
        let status = strata_jpeg_eighth_open(
            base.assumingMemoryBound(to: UInt8.self), bytes.count, &decoder, &width, &height, &message)
        if status < 0 {
            throw ImageDecodingError(
                .corrupt(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)), format: .jpeg)
        }
        guard status == 1, let decoder else { return nil }
        strata_jpeg_eighth_set_part_bytes(decoder, partBytes)
        self.decoder = decoder
        self.size = PixelSize(width: Int(width), height: Int(height))
    }

    deinit { strata_jpeg_eighth_close(decoder) }

    /// Bytes of the data before the next round's start: no later round reads them (a caller
    /// may release their pages).
    package var consumedBytes: Int { strata_jpeg_eighth_consumed(decoder) }

    /// The decoder handed to the threads of one round, each of which decodes its own part.
    private struct Parts: @unchecked Sendable {
        let decoder: OpaquePointer
    }

    /// Decodes the image in rounds of `parts` parts (run through `forkJoin`, this thread taking
    /// one), handing each run of completed rows to `rows(first, stride, count)` in order, on
    /// this thread. Throws ``ImageDecodingError`` for corrupt data, or what `rows` threw.
    package func read(
        parts: Int, forkJoin: ForkJoin, rows: (UnsafeRawPointer, _ stride: Int, _ count: Int) throws -> Void
    ) throws {
        let round = Parts(decoder: decoder)
        var next = 0
        while true {
            var speculative: Int32 = 0
            let count = Int(strata_jpeg_eighth_plan(decoder, Int32(max(1, parts)), &speculative))
            speculativeParts += Int(speculative)
            forkJoin.forEach(count) { index in _ = strata_jpeg_eighth_decode_part(round.decoder, Int32(index)) }
            let status = strata_jpeg_eighth_finish_round(decoder, &partsInStep)
            if status < 0 {
                throw ImageDecodingError(.corrupt(String(cString: strata_jpeg_eighth_message(decoder))), format: .jpeg)
            }
            // The round's pixels, written on as many threads as it decoded on.
            forkJoin.forEach(count) { index in strata_jpeg_eighth_write_slice(round.decoder, Int32(index), Int32(count)) }
            var pointer: UnsafePointer<UInt8>?
            var stride = 0
            var first: UInt32 = 0
            let made = strata_jpeg_eighth_rows(decoder, &pointer, &stride, &first)
            if made > 0, let pointer {
                guard Int(first) == next else { throw Self.lost("rows from \(first) after \(next)") }
                try rows(UnsafeRawPointer(pointer), stride, Int(made))
                next += Int(made)
            }
            if status == 0 { break }
        }
        guard next == size.height else { throw Self.lost("\(next) rows of \(size.height)") }
    }

    /// An error for a decode that lost count of its rows (never expected: it would be a bug).
    private static func lost(_ what: String) -> ImageDecodingError {
        ImageDecodingError(.corrupt("the 1/8-scale reader made \(what)"), format: .jpeg)
    }
}
