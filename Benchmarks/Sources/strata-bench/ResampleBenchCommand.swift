import ArgumentParser
import Foundation
import Strata

/// `strata-bench resample`: the resampler's speed against the bare libjpeg-turbo decode it
/// follows in the source tier, and its quality against Pillow's Lanczos references.
struct ResampleBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resample",
        abstract: "Resampler speed (vs. the bare DCT-scaled JPEG decode) and quality (PSNR vs. Pillow).",
        discussion: """
            For 256 px and 1024 px thumbnails of the JPEG, and every power-of-two DCT scale that \
            still covers the thumbnail, times the bare libjpeg-turbo decode at that scale (the \
            anchor) and Lanczos-3 resampling of its output to the thumbnail, and reports the ratio \
            (decode + resample) / decode. At the scale the source tier picks (≥ 2× the thumbnail, \
            marked *) it also times Strata's whole pipeline (ImageRenderer.render, the decode and \
            the resample overlapped where they can be) and, interleaved with it, the same with \
            the decode before the resample (serial ms). \
            With Fixtures/reference present, reports PSNR against Pillow's Lanczos of the full \
            decode (Scripts/quality/reference.py).
            """)

    @Option(help: "The JPEG to decode (a 2048+ px photo).")
    var jpeg = "Fixtures/jpeg/path-2560x1600.jpg"

    @Option(help: "Directory of the Pillow references (Scripts/quality/reference.py write).")
    var references = "Fixtures/reference"

    @Option(help: "Timed repetitions per case (the median is reported).")
    var iterations = 30

    @Flag(help: ArgumentHelp("Time only the resampler (for A/B runs under perf stat).", visibility: .hidden))
    var resampleOnly = false

    @Option(help: "Threads one resample may use (Resampler.threads; default as the source tier's).")
    var threads = RenderSettings.defaultResampleThreads

    @Option(help: "Write the thumbnails as raw BGRA (tightly packed) into this directory, for `reference.py psnr`.")
    var dump: String?

    func run() throws {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: jpeg)))
        let decoder = ImageDecoder()
        let header = try decoder.readHeader(bytes)
        print("source \(jpeg): \(header.size); medians of \(iterations) runs (1/1 decodes: a third as many); resample threads: \(threads)")
        print("anchor: ImageDecoder.decodeBare (one tjDecompress2 into a reused buffer); ratio = (bare + resample) / bare")
        print("thumbnail  DCT  decoded     bare ms  resample ms  ratio  pipeline ms  ratio  serial ms  PSNR (dB)")
        let resampler = Resampler()
        resampler.threads = threads
        let renderer = ImageRenderer(resampleThreads: threads)
        // The same pipeline with the decode and the resample one after the other.
        let serialRenderer = ImageRenderer(resampleThreads: threads)
        serialRenderer.overlapsDecode = false
        for side in [256, 1024] {
            let box = PixelSize(width: side, height: side)
            let target = SizingPlan(source: header.size, box: box, mode: .fit).output
            // The source tier's choice (ImageRenderer: shrink-on-load to ≥ 2× the output) is marked *.
            let request = RenderRequest(box: box, mode: .fit)
            let chosen =
                decoder.jpegScalingFactor(for: header, minimumSize: renderer.plan(for: header, request: request).minimumDecode) ?? .one
            // Every power-of-two DCT scale whose output still covers the thumbnail.
            let factors = [8, 4, 2, 1].map { JPEGScalingFactor(1, $0) }.filter {
                let s = $0.scaled(header.size)
                return s.width >= target.width && s.height >= target.height
            }
            for factor in factors {
                let scaled = factor.scaled(header.size)
                var decoded = PixelImage(uninitializedWidth: scaled.width, height: scaled.height)
                let runs = factor == .one ? max(3, iterations / 3) : iterations
                let decode = { try! bytes.withUnsafeBytes { raw in try decoder.decodeBare(raw, scale: factor, into: &decoded) } }
                decode()
                let bare = resampleOnly ? .nan : Self.median(runs, decode)
                let region = SourceRect(x: 0, y: 0, width: Double(scaled.width), height: Double(scaled.height))
                var thumb = PixelImage(uninitializedWidth: target.width, height: target.height)
                let resample = Self.median(runs) { resampler.resample(decoded, region: region, into: &thumb) }
                var pipelineText = "          -       -          -"
                if factor == chosen && !resampleOnly {
                    // What the source tier does: ImageRenderer.render (header check, decode at the
                    // chosen scale into its reused buffer, Lanczos to the output, the two at once
                    // where they overlap); and the same with the decode before the resample.
                    // Interleaved, run by run, so that machine noise hits both alike.
                    let (pipeline, serial) = Self.medians(runs) {
                        _ = try! renderer.render(bytes, request: request)
                    } _: {
                        _ = try! serialRenderer.render(bytes, request: request)
                    }
                    pipelineText = String(format: "%11.2f  %5.2f  %9.2f", pipeline, pipeline / bare, serial)
                }
                let psnr = try quality(thumb).map { String(format: "%.2f", $0) } ?? "-"
                print(
                    String(
                        format: "%-9@  %@%-3@ %-10@ %8.2f  %11.2f  %5.2f  %@  %@", "\(target)",
                        factor == chosen ? "*" : " ", "\(factor)", "\(scaled)", bare, resample,
                        (bare + resample) / bare, pipelineText, psnr))
                if let dump { try Self.write(thumb, to: "\(dump)/strata-dct\(factor.denominator)-\(target).bgra") }
            }
        }
        // Style conversion of a 1024×640 BGRA thumbnail (one pass each way).
        var thumb = resampler.resize(try decoder.decode(bytes), box: PixelSize(width: 1024, height: 1024), mode: .fit)
        thumb = PixelConversion.convert(thumb, to: .bgra32Premultiplied)
        var line = "convert \(thumb.size) from BGRA:"
        for style in [PixelStyle.bgrx32, .rgb565, .gray8] {
            var out = PixelImage(uninitializedWidth: thumb.width, height: thumb.height, style: style)
            let there = Self.median(iterations) { PixelConversion.convert(thumb, into: &out) }
            var back = PixelImage(uninitializedWidth: thumb.width, height: thumb.height, style: .bgra32Premultiplied)
            let returning = Self.median(iterations) { PixelConversion.convert(out, into: &back) }
            line += String(format: " → %@ %.2f ms, back %.2f ms;", "\(style)", there, returning)
        }
        print(line)
        print("PSNR vs Pillow's Lanczos of the full decode: whole 256 px thumbnail; for 1024 px the committed")
        print("centre window (for the whole image: --dump DIR, then Scripts/quality/reference.py psnr).")
    }

    /// PSNR against the committed reference: the whole 256 px thumbnail, or the committed
    /// centre window of the 1024 px one.
    private func quality(_ image: PixelImage) throws -> Double? {
        let fm = FileManager.default
        guard let names = try? fm.contentsOfDirectory(atPath: references) else { return nil }
        let prefix = "path-lanczos-\(image.width)x\(image.height)"
        guard jpeg.hasSuffix("path-2560x1600.jpg"), let name = names.sorted().first(where: { $0.hasPrefix(prefix) }) else { return nil }
        let rgb = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(references)/\(name)")))
        // "…-crop-X-Y-WxH.rgb" names a window; otherwise the whole image.
        var x0 = 0, y0 = 0, w = image.width, h = image.height
        if let range = name.range(of: "-crop-") {
            let parts = name[range.upperBound...].dropLast(4).split(separator: "-")
            guard parts.count == 3, let x = Int(parts[0]), let y = Int(parts[1]),
                let size = PixelSize(parsing: parts[2])
            else { return nil }
            (x0, y0, w, h) = (x, y, size.width, size.height)
        }
        guard rgb.count == w * h * 3 else { return nil }
        var reference = PixelImage(width: w, height: h, style: .bgrx32)
        var window = PixelImage(width: w, height: h, style: .bgrx32)
        let refStride = reference.bytesPerRow
        reference.withUnsafeMutableBytes { raw in
            for y in 0..<h {
                for x in 0..<w {
                    let s = (y * w + x) * 3, d = y * refStride + x * 4
                    raw[d] = rgb[s + 2]
                    raw[d + 1] = rgb[s + 1]
                    raw[d + 2] = rgb[s]
                    raw[d + 3] = 255
                }
            }
        }
        let winStride = window.bytesPerRow
        image.withUnsafeBytes { src in
            window.withUnsafeMutableBytes { dst in
                for y in 0..<h {
                    for i in 0..<(w * 4) { dst[y * winStride + i] = src[(y + y0) * image.bytesPerRow + x0 * 4 + i] }
                }
            }
        }
        return window.peakSignalToNoiseRatio(against: reference)
    }

    private static func write(_ image: PixelImage, to path: String) throws {
        var packed = [UInt8]()
        packed.reserveCapacity(image.width * image.height * 4)
        image.withUnsafeBytes { raw in
            for y in 0..<image.height { packed += raw[(y * image.bytesPerRow)..<(y * image.bytesPerRow + image.width * 4)] }
        }
        try Data(packed).write(to: URL(fileURLWithPath: path))
    }

    /// Medians of `count` runs of `a` and of `b`, alternating, in milliseconds (one untimed
    /// warm-up run of each).
    private static func medians(_ count: Int, _ a: () -> Void, _ b: () -> Void) -> (Double, Double) {
        a()
        b()
        var times: ([Double], [Double]) = ([], [])
        let clock = ContinuousClock()
        for _ in 0..<max(1, count) {
            times.0.append(milliseconds(clock.measure(a)))
            times.1.append(milliseconds(clock.measure(b)))
        }
        times.0.sort()
        times.1.sort()
        return (times.0[times.0.count / 2], times.1[times.1.count / 2])
    }

    /// Median wall time of `count` runs of `body`, in milliseconds (one untimed warm-up run).
    private static func median(_ count: Int, _ body: () -> Void) -> Double {
        body()
        var times = [Double]()
        let clock = ContinuousClock()
        for _ in 0..<max(1, count) { times.append(milliseconds(clock.measure(body))) }
        times.sort()
        return times[times.count / 2]
    }

    private static func milliseconds(_ d: Duration) -> Double {
        Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) * 1e-15
    }
}
