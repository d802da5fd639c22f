import Foundation
import Testing
@testable import Strata

/// ``Resampler/resample(filling:sourceSize:sourceStride:style:region:into:fill:)``: the resample
/// that runs while its source is still being written.
@Suite("Resampler overlapping its fill")
struct ResamplerFillingTests {
    struct Failure: Error, Equatable {}

    /// A resampler that overlaps any geometry it may split (tests' small images).
    static func overlapping(avx2: Bool = Resampler.hasAVX2) -> Resampler {
        let resampler = Resampler()
        resampler.threads = 2
        resampler.maximumBands = 2
        resampler.parallelWork = 0
        resampler.overlapWork = 0
        resampler.usesAVX2 = avx2
        return resampler
    }

    /// Copies `image`'s rows into `buffer` (already holding other bytes) `step` rows at a time,
    /// publishing each step and yielding (or pausing `pause` microseconds, so that the helper
    /// catches up and works right at the edge of what is written). Stops with `Failure` before
    /// row `failAt` when given.
    static func fill(
        _ buffer: UnsafeMutableRawBufferPointer, from image: PixelImage, step: Int, pause: UInt32 = 0,
        failAt: Int? = nil, publish: (Int) -> Void
    ) throws(Failure) {
        let stride = image.bytesPerRow
        var done = 0
        while done < image.height {
            let next = min(image.height, done + step)
            if let failAt, next > failAt { throw Failure() }
            image.withUnsafeBytes { src in
                (buffer.baseAddress! + done * stride).copyMemory(
                    from: src.baseAddress! + done * stride, byteCount: (next - done) * stride)
            }
            done = next
            publish(done)
            if pause > 0 { usleep(pause) } else { sched_yield() }
        }
    }

    /// Whether two images of one size and style hold the same pixel bytes (padding aside).
    static func sameBytes(_ a: PixelImage, _ b: PixelImage) -> Bool { differingRows(a, b) == 0 }

    /// How many rows of two images of one size and style differ (padding aside).
    static func differingRows(_ a: PixelImage, _ b: PixelImage) -> Int {
        guard a.size == b.size, a.style == b.style else { return Int.max }
        let rowBytes = a.width * a.style.bytesPerPixel
        return a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in
                (0..<a.height).filter { row in
                    memcmp(x.baseAddress! + row * a.bytesPerRow, y.baseAddress! + row * b.bytesPerRow, rowBytes) != 0
                }.count
            }
        }
    }

    @Test(
        "the bytes are those of the whole source resampled, for reductions, crops and enlargements",
        arguments: [
            (PixelSize(width: 640, height: 400), SourceRect(x: 0, y: 0, width: 640, height: 400), PixelSize(width: 256, height: 160)),
            (PixelSize(width: 640, height: 400), SourceRect(x: 80, y: 0, width: 400, height: 400), PixelSize(width: 300, height: 300)),
            (PixelSize(width: 500, height: 700), SourceRect(x: 3.5, y: 10.25, width: 480, height: 600), PixelSize(width: 97, height: 121)),
            (PixelSize(width: 200, height: 120), SourceRect(x: 0, y: 0, width: 200, height: 120), PixelSize(width: 333, height: 200)),
        ])
    func sameBytes(source size: PixelSize, region: SourceRect, output: PixelSize) async throws {
        // Seconds of work (minutes under TSan): on a thread of its own, not one of the two of
        // Swift's cooperative pool, which other suites' tasks need meanwhile.
        let failures = try await offThePool("filling-same-bytes") {
            try Self.sameBytesFailures(source: size, region: region, output: output)
        }
        #expect(failures.isEmpty, "\(failures)")
    }

    /// The cases of ``sameBytes(source:region:output:)`` whose bytes differ or that did not
    /// overlap.
    static func sameBytesFailures(source size: PixelSize, region: SourceRect, output: PixelSize) throws -> [String] {
        var failures: [String] = []
        for style in [PixelStyle.bgra32Premultiplied, .bgrx32] {
            for avx2 in Resampler.hasAVX2 ? [true, false] : [false] {
                let image = ResamplerTests.noise(size.width, size.height, style, seed: UInt64(size.width * 7 + output.width))
                // The portable kernels' blend differs from AVX2's within float rounding: compare
                // like with like.
                let plain = Resampler()
                plain.usesAVX2 = avx2
                let expected = plain.resample(image, region: region, to: output)
                let resampler = Self.overlapping(avx2: avx2)
                if !resampler.overlapsFill(sourceSize: size, region: region, destinationSize: output, style: style) {
                    failures.append("\(style), AVX2 \(avx2): overlapsFill is false")
                }
                // BGRx shares the kernels of premultiplied BGRA but its last store: one schedule.
                let schedules: [(Int, UInt32)] = style == .bgrx32 ? [(7, 0)] : [(1, 0), (1, 100), (7, 0), (64, 0)]
                for (step, pause) in schedules {
                    // The unwritten rows hold the source inverted: reading one early shows.
                    var target = PixelImage(width: size.width, height: size.height, style: style)
                    target.withUnsafeMutableBytes { raw in
                        image.withUnsafeBytes { src in for i in 0..<raw.count { raw[i] = ~src[i] } }
                    }
                    var output = PixelImage(width: output.width, height: output.height, style: style)
                    let stride = target.bytesPerRow
                    try target.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) throws(Failure) in
                        try resampler.resample(
                            filling: UnsafePointer(raw.baseAddress!.assumingMemoryBound(to: UInt8.self)),
                            sourceSize: size, sourceStride: stride, style: style, region: region, into: &output
                        ) { (publish: (Int) -> Void) throws(Failure) in
                            try Self.fill(raw, from: image, step: step, pause: pause, publish: publish)
                        }
                    }
                    let differing = Self.differingRows(output, expected)
                    if resampler.lastBandCount != 2 || differing != 0 {
                        failures.append(
                            "\(size) \(region) → \(output.size), \(style), AVX2 \(avx2), step \(step), pause \(pause): "
                                + "\(differing) rows differ, \(resampler.lastBandCount) bands")
                    }
                }
            }
        }
        return failures
    }

    @Test("a fill that fails is rethrown; no output row that needs an unwritten source row is written")
    func failingFill() async throws {
        let failures = try await offThePool("filling-fails") { Self.failingFillFailures() }
        #expect(failures.isEmpty, "\(failures)")
    }

    /// What ``failingFill()`` finds wrong.
    static func failingFillFailures() -> [String] {
        let size = PixelSize(width: 640, height: 400), output = PixelSize(width: 256, height: 160)
        let region = SourceRect(x: 0, y: 0, width: 640, height: 400)
        let image = ResamplerTests.noise(size.width, size.height, .bgra32Premultiplied, seed: 0xF11)
        let expected = Resampler().resample(image, region: region, to: output)
        let resampler = Self.overlapping()
        let failAt = 200
        let sentinel: [UInt8] = [0xA5, 0xA5, 0xA5, 0xA5]
        var failures: [String] = []
        for attempt in 0..<3 {
            var target = PixelImage(width: size.width, height: size.height)
            var result = PixelImage(width: output.width, height: output.height)
            result.withUnsafeMutableBytes { raw in _ = raw.initializeMemory(as: UInt8.self, repeating: 0xA5) }
            let stride = target.bytesPerRow
            var thrown: Failure?
            do {
                try target.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) throws(Failure) in
                    try resampler.resample(
                        filling: UnsafePointer(raw.baseAddress!.assumingMemoryBound(to: UInt8.self)), sourceSize: size,
                        sourceStride: stride, style: .bgra32Premultiplied, region: region, into: &result
                    ) { (publish: (Int) -> Void) throws(Failure) in
                        try Self.fill(raw, from: image, step: 8, failAt: failAt, publish: publish)
                    }
                }
            } catch { thrown = error }
            if thrown != Failure() { failures.append("attempt \(attempt): the fill's error was not rethrown") }
            // Rows the helper may have done match; rows it may not (their window reaches past the
            // last published row) still hold the sentinel.
            let v = ResamplerTable(
                ResamplerTable.Key(
                    sourceLength: size.height, regionStart: 0, regionLength: Double(size.height),
                    destinationLength: output.height, filter: .lanczos3))
            for y in 0..<output.height {
                let needs = min(v.spanEnd, v.starts[y] + v.counts[y] + 1)
                let row = (0..<output.width).map { result.pixelBytes(x: $0, y: y) }
                if needs > failAt {
                    if !row.allSatisfy({ $0 == sentinel }) { failures.append("attempt \(attempt): row \(y) was written") }
                } else if row.first != sentinel && row != (0..<output.width).map({ expected.pixelBytes(x: $0, y: y) }) {
                    failures.append("attempt \(attempt): row \(y) differs")
                }
            }
        }
        // The resampler (and its helper) still work afterwards.
        if !Self.sameBytes(resampler.resample(image, region: region, to: output), expected) {
            failures.append("the resampler's next resample differs")
        }
        return failures
    }

    @Test("small resamples and one thread do not overlap")
    func whenItOverlaps() {
        let resampler = Resampler()
        resampler.threads = 2
        let photo = SourceRect(x: 0, y: 0, width: 2560, height: 1600)
        #expect(
            resampler.overlapsFill(
                sourceSize: PixelSize(width: 2560, height: 1600), region: photo,
                destinationSize: PixelSize(width: 1024, height: 640), style: .bgra32Premultiplied))
        #expect(
            !resampler.overlapsFill(
                sourceSize: PixelSize(width: 640, height: 400), region: SourceRect(x: 0, y: 0, width: 640, height: 400),
                destinationSize: PixelSize(width: 256, height: 160), style: .bgra32Premultiplied))
        #expect(
            !resampler.overlapsFill(
                sourceSize: PixelSize(width: 2560, height: 1600), region: photo,
                destinationSize: PixelSize(width: 1024, height: 640), style: .gray8))
        resampler.threads = 1
        #expect(
            !resampler.overlapsFill(
                sourceSize: PixelSize(width: 2560, height: 1600), region: photo,
                destinationSize: PixelSize(width: 1024, height: 640), style: .bgra32Premultiplied))
    }
}
