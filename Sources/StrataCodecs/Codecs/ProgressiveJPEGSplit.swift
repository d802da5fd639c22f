import CStrataJPEG
import CStrataSIMD
import Synchronization
import StrataBase

/// Decodes a progressive JPEG on two threads, into the same bytes as libjpeg-turbo's decode on
/// one.
///
/// A progressive file's time goes to entropy decoding, scan after scan, on one thread. But its
/// AC scans each carry one component, so the file splits into two files that libjpeg decodes
/// independently (`strata_jpeg_split`): every DC scan plus the luma's AC scans, decoded to the
/// Y plane alone (libjpeg then skips the chroma's inverse DCT and upsampling), and every DC scan
/// plus the chroma's AC scans, decoded to Y, Cb, Cr. The halves run at once through a
/// ``ForkJoin`` (this thread takes one); then libjpeg's own YCbCr → BGRA arithmetic
/// (`strata_jpeg_merge_bgra`) joins the first's Y with the second's Cb and Cr, in two bands.
///
/// Cost (2 cores, `strata-bench source`, six rounds): a 2560×1600 progressive 4:4:4 photo →
/// 256 px in 0.67× the whole-file decode's time; 1024×640 4:2:0 ones, whose luma holds most of
/// the data, in 0.85–0.97×. Each half decodes the DC scans, and the chroma half an unused Y, so
/// the CPU time is 1.1–1.4× the whole decode's: ``ImageDecoder`` splits only when
/// ``hasIdleCores(pending:)``. When the helpers' executor is busy both halves run on this thread, one
/// after the other. The scratch is the two halves' bytes (twice the file), the Y plane and the
/// Y, Cb, Cr plane (4 bytes a pixel).
///
/// Not thread-safe: one per ``ImageDecoder``; its two libjpeg readers are reused.
package final class ProgressiveJPEGSplit {
    private let luma = JPEGRowDecompressor()
    private let chroma = JPEGRowDecompressor()
    /// Where the second half and the second merge band run.
    package var forkJoin: ForkJoin = .dispatch

    /// Decodes in progress in this process (every format, counted by ``ImageDecoder``).
    package static let decodesInFlight = Atomic<Int>(0)
    /// The processors this process may run on, read once.
    package static let processors = Processors.online

    /// Whether a split now would find an idle core for its second half: every decode in flight,
    /// and `pending` more about to start, could take two threads. On a machine whose cores are
    /// all decoding, the split's extra work (the DC scans twice, the chroma half's unused Y)
    /// would cost throughput: 35 % fewer renders a second, measured on two cores with two
    /// renders at once.
    package static func hasIdleCores(pending: Int = 0) -> Bool {
        2 * (decodesInFlight.load(ordering: .relaxed) + pending) <= processors
    }

    /// Whether `bytes` is a progressive file that splits (three components, complete, at most
    /// 500 scans, luma and chroma AC scans both present). One `memchr` pass over the bytes.
    package static func splits(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return false }
        return strata_jpeg_split(base.assumingMemoryBound(to: UInt8.self), bytes.count, nil, nil, nil, nil) == 1
    }

    /// Scratch bytes a decode of `bytes` at `size` needs.
    package static func scratchBytes(fileBytes: Int, size: PixelSize) -> Int {
        let layout = Layout(fileBytes: fileBytes, size: size)
        return layout.total
    }

    /// Decodes `bytes` at `factor` (whose result is `size`) into premultiplied BGRA rows `stride`
    /// bytes apart at `destination`, using `scratch` (``scratchBytes(fileBytes:size:)`` bytes).
    /// Returns false when the file does not split, is not YCbCr, or either half fails: the
    /// destination is then unspecified and the caller decodes the file whole, which gives the
    /// file's own result or error.
    package func decode(
        _ bytes: UnsafeRawBufferPointer, factor: JPEGScalingFactor, size: PixelSize,
        into destination: UnsafeMutableRawPointer, stride: Int, scratch: UnsafeMutableRawPointer
    ) -> Bool {
        let layout = Layout(fileBytes: bytes.count, size: size)
        let data = bytes.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let base = scratch.assumingMemoryBound(to: UInt8.self)
        var lumaCount = 0, chromaCount = 0
        guard
            strata_jpeg_split(
                data, bytes.count, base + layout.lumaFile, &lumaCount, base + layout.chromaFile, &chromaCount) == 1
        else { return false }
        let work = Halves(
            luma: luma, chroma: chroma, factor: factor, size: size,
            lumaFile: UnsafeRawBufferPointer(start: base + layout.lumaFile, count: lumaCount),
            chromaFile: UnsafeRawBufferPointer(start: base + layout.chromaFile, count: chromaCount),
            lumaPlane: base + layout.lumaPlane, lumaStride: layout.lumaStride,
            yccPlane: base + layout.yccPlane, yccStride: layout.yccStride,
            destination: destination.assumingMemoryBound(to: UInt8.self), stride: stride)
        let decoded = Flags()
        forkJoin.forEach(2) { half in
            decoded.set(half, work.decode(half))
        }
        guard decoded.both else { return false }
        // Two bands when there is enough to share (8 rows of a 4096 px image or more).
        let bands = size.pixelCount >= 32_768 ? 2 : 1
        forkJoin.forEach(bands) { band in
            work.merge(rows: size.height * band / bands..<size.height * (band + 1) / bands)
        }
        return true
    }

    /// Where the scratch's four parts lie: the two halves' files, the Y plane, the Y, Cb, Cr
    /// plane; rows padded to 64 bytes.
    private struct Layout {
        let lumaFile: Int, chromaFile: Int, lumaPlane: Int, yccPlane: Int
        let lumaStride: Int, yccStride: Int, total: Int

        init(fileBytes: Int, size: PixelSize) {
            let file = (fileBytes + 63) & ~63
            lumaStride = (size.width + 63) & ~63
            yccStride = (size.width * 3 + 63) & ~63
            lumaFile = 0
            chromaFile = file
            lumaPlane = 2 * file
            yccPlane = lumaPlane + lumaStride * size.height
            total = yccPlane + yccStride * size.height
        }
    }
}

/// What the two halves and the merge bands share. Unchecked: `ForkJoin.forEach` returns only
/// when every iteration has finished; half 0 uses only the luma reader, file and plane, half 1
/// only the chroma ones; the merge bands read both planes and write disjoint destination rows.
private struct Halves: @unchecked Sendable {
    let luma: JPEGRowDecompressor
    let chroma: JPEGRowDecompressor
    let factor: JPEGScalingFactor
    let size: PixelSize
    let lumaFile: UnsafeRawBufferPointer
    let chromaFile: UnsafeRawBufferPointer
    let lumaPlane: UnsafeMutablePointer<UInt8>
    let lumaStride: Int
    let yccPlane: UnsafeMutablePointer<UInt8>
    let yccStride: Int
    let destination: UnsafeMutablePointer<UInt8>
    let stride: Int

    /// Decodes half 0 (luma) or 1 (chroma); false on any error or refusal.
    func decode(_ half: Int) -> Bool {
        do throws(ImageDecodingError) {
            if half == 0 {
                return try luma.decodePlane(
                    lumaFile, factor: factor, output: .luma, expected: size, into: lumaPlane, stride: lumaStride)
            }
            return try chroma.decodePlane(
                chromaFile, factor: factor, output: .ycc, expected: size, into: yccPlane, stride: yccStride)
        } catch {
            return false
        }
    }

    func merge(rows: Range<Int>) {
        guard !rows.isEmpty else { return }
        strata_jpeg_merge_bgra(
            lumaPlane + rows.lowerBound * lumaStride, lumaStride, yccPlane + rows.lowerBound * yccStride, yccStride,
            destination + rows.lowerBound * stride, stride, UInt32(size.width), UInt32(rows.count))
    }
}

/// The two halves' outcomes, each written by its own iteration.
private final class Flags: Sendable {
    private let first = Atomic<Bool>(false)
    private let second = Atomic<Bool>(false)
    func set(_ half: Int, _ value: Bool) {
        if half == 0 { first.store(value, ordering: .releasing) } else { second.store(value, ordering: .releasing) }
    }
    var both: Bool { first.load(ordering: .acquiring) && second.load(ordering: .acquiring) }
}
