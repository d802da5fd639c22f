import ArgumentParser
import Foundation
import Strata
// The knobs a benchmark turns (`@_spi(Benchmarks)`) are declared in the codecs layer.
@_spi(Benchmarks) import StrataCodecs

/// `strata-bench codecs --avif`: the AVIF figures, all from one run over the same answers.
///
/// Each photo is rendered as the service would answer `?w=1024&h=1024` (fit, Lanczos-3), then:
/// - JPEG at `--jpeg-quality` (the service's `http.quality`) and AVIF at `--avif-quality` /
///   `--avif-speed` (`http.avifQuality` / `http.avifSpeed`): bytes and SSIM against the answer
///   (``SSIM``, computed on our decode of each file: ImageDecoder for JPEG, `avifdec` — Debian's
///   libavif-bin — to PNG then ImageDecoder for AVIF);
/// - equal SSIM both ways: the JPEG quality whose SSIM reaches AVIF's (bytes interpolated
///   linearly in SSIM between the two qualities around it), and the AVIF quality whose SSIM
///   reaches JPEG's; the ratios of AVIF bytes to JPEG bytes at equal SSIM;
/// - AVIF encode milliseconds (median of `--iterations` runs, interleaved) at each of
///   `--avif-speeds` on ``AVIFCodec/threads`` thread(s), and at the chosen speed on 2 threads,
///   with bytes and SSIM at each speed.
extension BenchCodecsCommand {
    /// One encode's result.
    struct Encoded {
        var bytes: Int
        var ssim: Double
    }

    func runAVIFFigures() throws {
        let renderer = ImageRenderer(resampleThreads: 1)
        var ratios: (atAVIFSSIM: [Double], atJPEGSSIM: [Double], atDefaults: [Double]) = ([], [], [])
        var defaultSpeedMs: [Double] = []
        print(
            "AVIF figures: answers fit 1024x1024; JPEG q\(jpegQuality); AVIF q\(avifQuality) speed \(avifSpeed) tune \(avifTune) "
                + "(quantizer \(AVIFCodec.quantizer(forQuality: avifQuality))), \(AVIFCodec.threads) thread(s); SSIM on luma, 11x11 Gaussian"
        )
        for path in avifFiles {
            guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
            let answer = try renderer.render([UInt8](data), request: RenderRequest(box: PixelSize(width: 1024, height: 1024)))
            let jpeg = try encodeJPEG(answer, quality: jpegQuality)
            let avif = try encodeAVIF(answer, quality: avifQuality, speed: avifSpeed)
            print("\(path) → \(answer.size)")
            print(String(format: "  JPEG q%-3d %8d bytes  SSIM %.4f", jpegQuality, jpeg.bytes, jpeg.ssim))
            print(
                String(
                    format: "  AVIF q%-3d %8d bytes  SSIM %.4f  (%.2fx JPEG's bytes)", avifQuality, avif.bytes, avif.ssim,
                    Double(avif.bytes) / Double(jpeg.bytes)))
            ratios.atDefaults.append(Double(avif.bytes) / Double(jpeg.bytes))
            let jpegMatch = try equalSSIM(avif.ssim) { quality throws in try encodeJPEG(answer, quality: quality) }
            if let jpegMatch {
                print(
                    String(
                        format: "  JPEG at AVIF's SSIM: q%-3d %8.0f bytes  → AVIF/JPEG %.2f", jpegMatch.quality, jpegMatch.bytes,
                        Double(avif.bytes) / jpegMatch.bytes))
                ratios.atAVIFSSIM.append(Double(avif.bytes) / jpegMatch.bytes)
            } else {
                print("  JPEG at AVIF's SSIM: not reached at q100")
            }
            let avifMatch = try equalSSIM(jpeg.ssim) { quality throws in try encodeAVIF(answer, quality: quality, speed: avifSpeed) }
            if let avifMatch {
                print(
                    String(
                        format: "  AVIF at JPEG's SSIM: q%-3d %8.0f bytes  → AVIF/JPEG %.2f", avifMatch.quality, avifMatch.bytes,
                        avifMatch.bytes / Double(jpeg.bytes)))
                ratios.atJPEGSSIM.append(avifMatch.bytes / Double(jpeg.bytes))
            } else {
                print("  AVIF at JPEG's SSIM: not reached at q100")
            }
            let milliseconds = try timeSpeeds(answer)
            if max(answer.width, answer.height) == 1024 { defaultSpeedMs.append(milliseconds) }
        }
        func mean(_ values: [Double]) -> Double { values.isEmpty ? .nan : values.reduce(0, +) / Double(values.count) }
        print(
            String(
                format: "mean AVIF/JPEG bytes at equal SSIM: %.2f (AVIF at defaults vs JPEG at AVIF's SSIM), "
                    + "%.2f (AVIF at JPEG's SSIM vs JPEG at defaults); at the two defaults %.2f", mean(ratios.atAVIFSSIM),
                mean(ratios.atJPEGSSIM), mean(ratios.atDefaults)))
        print(
            String(
                format: "mean AVIF encode of a 1024 px answer (%d of them) at speed %d, %d thread(s): %.1f ms", defaultSpeedMs.count,
                avifSpeed, AVIFCodec.threads, mean(defaultSpeedMs)))
    }

    /// The photos of `Fixtures/jpeg` (the files given, if any).
    var avifFiles: [String] {
        files != Self.defaultFiles
            ? files
            : [
                "Fixtures/jpeg/path-2560x1600.jpg", "Fixtures/jpeg/fallenleaf-2048x1280-420.jpg",
                "Fixtures/jpeg/eveningglow-1024x640-progressive.jpg", "Fixtures/jpeg/coldripple-1024x640-orientation6.jpg",
                "Fixtures/jpeg/kite-800x500-gray.jpg",
            ]
    }

    func encodeJPEG(_ image: PixelImage, quality: Int) throws -> Encoded {
        let bytes = try ImageEncoder.encode(image, as: .jpeg, quality: quality)
        return Encoded(bytes: bytes.count, ssim: SSIM.of(image, try ImageDecoder().decode(bytes)))
    }

    func encodeAVIF(_ image: PixelImage, quality: Int, speed: Int, threads: Int = AVIFCodec.threads) throws -> Encoded {
        let bytes = try AVIFCodec.encode(image, quality: quality, speed: speed, threads: threads, tune: avifTune)
        return Encoded(bytes: bytes.count, ssim: SSIM.of(image, try Self.decodeWithAvifdec(bytes)))
    }

    /// The smallest quality whose SSIM reaches `target` (SSIM grows with quality: a bisection),
    /// and its bytes interpolated linearly in SSIM from the quality below; `nil` when q100
    /// does not reach it.
    func equalSSIM(_ target: Double, _ encode: (Int) throws -> Encoded) throws -> (quality: Int, bytes: Double)? {
        var low = 1, high = 100
        var results: [Int: Encoded] = [:]
        func at(_ quality: Int) throws -> Encoded {
            if let known = results[quality] { return known }
            let made = try encode(quality)
            results[quality] = made
            return made
        }
        guard try at(high).ssim >= target else { return nil }
        if try at(low).ssim >= target { return (low, Double(try at(low).bytes)) }
        while high - low > 1 {
            let middle = (low + high) / 2
            if try at(middle).ssim >= target { high = middle } else { low = middle }
        }
        let below = try at(low), above = try at(high)
        let t = above.ssim > below.ssim ? (target - below.ssim) / (above.ssim - below.ssim) : 1
        return (high, Double(below.bytes) + t * Double(above.bytes - below.bytes))
    }

    /// Times the AVIF encode at each of `avifSpeeds` (and at `avifSpeed` on 2 threads), rounds
    /// interleaved; prints ms, bytes and SSIM; returns the median ms at `avifSpeed`.
    func timeSpeeds(_ image: PixelImage) throws -> Double {
        var cases = avifSpeeds.map { (speed: $0, threads: AVIFCodec.threads) }
        if !cases.contains(where: { $0.speed == avifSpeed }) { cases.append((avifSpeed, AVIFCodec.threads)) }
        cases.append((avifSpeed, 2))
        var samples = [[Double]](repeating: [], count: cases.count)
        let clock = ContinuousClock()
        for _ in 0..<max(1, avifIterations) {
            for (index, c) in cases.enumerated() {
                let elapsed = try clock.measure {
                    _ = try AVIFCodec.encode(image, quality: avifQuality, speed: c.speed, threads: c.threads, tune: avifTune)
                }
                samples[index].append(Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15)
            }
        }
        var atDefault = Double.nan
        for (index, c) in cases.enumerated() {
            let median = samples[index].sorted()[samples[index].count / 2]
            let made = try encodeAVIF(image, quality: avifQuality, speed: c.speed, threads: c.threads)
            print(
                String(
                    format: "  AVIF q%d speed %2d, %d thread(s): %7.1f ms  %8d bytes  SSIM %.4f", avifQuality, c.speed, c.threads,
                    median, made.bytes, made.ssim))
            if c.speed == avifSpeed, c.threads == AVIFCodec.threads { atDefault = median }
        }
        return atDefault
    }

    /// `bytes` (an AVIF) decoded by `avifdec` to an 8-bit PNG, and that by ImageDecoder.
    static func decodeWithAvifdec(_ bytes: [UInt8]) throws -> PixelImage {
        let directory = FileManager.default.temporaryDirectory
        let stem = "strata-bench-\(UUID().uuidString)"
        let input = directory.appendingPathComponent(stem + ".avif"), output = directory.appendingPathComponent(stem + ".png")
        defer {
            try? FileManager.default.removeItem(at: input)
            try? FileManager.default.removeItem(at: output)
        }
        try Data(bytes).write(to: input)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["avifdec", "--depth", "8", input.path, output.path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0, let png = FileManager.default.contents(atPath: output.path) else {
            throw ValidationError("avifdec failed (status \(process.terminationStatus)): install it with `apt-get install libavif-bin`")
        }
        return try ImageDecoder().decode([UInt8](png))
    }
}
