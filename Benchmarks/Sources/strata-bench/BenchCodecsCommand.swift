import ArgumentParser
import Foundation
import Strata

/// `strata-bench codecs`: decode and encode timings of the source tier's codecs, as ratios
/// against the bare full-size library decode into a reused buffer (the anchor) measured in
/// the same run, and the source tier's whole render (`ImageRenderer`: shrink-on-load decode —
/// a HEIF's embedded thumbnail when one covers it —, Lanczos, colour) to 256 and 1024 px. Cases are interleaved (one run of each per round) so that load from other
/// processes affects them alike; the median of the rounds is reported.
struct BenchCodecsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "codecs",
        abstract:
            "Time decoding (bare, full, DCT/WebP scaled, HEIF thumbnails, fresh vs reused buffers), renders and encoding; AVIF figures (--avif)."
    )

    @Option(help: "Timed rounds (the median is reported).")
    var iterations = 15

    @Flag(help: "Also time the encoders (slow: WebP and PNG take seconds per large image).")
    var encode = false

    @Flag(
        help:
            "Instead: the AVIF figures for 1024 px answers of the photos in Fixtures/jpeg (bytes against JPEG at equal SSIM, encode ms per speed; needs avifdec, Debian's libavif-bin)."
    )
    var avif = false

    @Option(help: "--avif: the JPEG quality compared (the service's http.quality).")
    var jpegQuality = 80

    @Option(help: "--avif: the AVIF quality compared (http.avifQuality).")
    var avifQuality = AVIFCodec.defaultQuality

    @Option(help: "--avif: the AVIF speed compared (http.avifSpeed).")
    var avifSpeed = AVIFCodec.defaultSpeed

    @Option(help: "--avif: aom's tune, ssim or psnr.")
    var avifTune = AVIFCodec.tune

    @Option(parsing: .upToNextOption, help: "--avif: the speeds timed.")
    var avifSpeeds = [6, 7, 8, 9]

    @Option(help: "--avif: timed rounds per speed (the median is reported).")
    var avifIterations = 5

    static let defaultFiles = [
        "Fixtures/jpeg/path-2560x1600.jpg", "Fixtures/jpeg/fallenleaf-2048x1280-420.jpg", "Fixtures/webp/path-2560x1600.webp",
    ]

    @Argument(help: "Image files (default: the large fixtures; with --avif, the photos of Fixtures/jpeg).")
    var files: [String] = Self.defaultFiles

    struct Case {
        var name: String
        var note = ""
        var body: () throws -> Void
        var samples: [Double] = []
    }

    func run() throws {
        if avif { return try runAVIFFigures() }
        for path in files {
            guard let data = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read \(path)")
            }
            let bytes = [UInt8](data)
            let decoder = ImageDecoder()
            let header = try decoder.readHeader(bytes)
            print("\(path): \(header.format.displayName) \(header.size), \(bytes.count) bytes")
            let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 64)
            defer { raw.deallocate() }
            raw.copyBytes(from: bytes)
            let input = UnsafeRawBufferPointer(raw)

            var cases: [Case] = []
            var full = PixelImage(width: header.codedSize.width, height: header.codedSize.height)
            cases.append(
                Case(name: "decode_full_ms (bare library, reused buffer)", note: "anchor") {
                    try decoder.decodeBare(input, into: &full)
                })
            var destination = PixelImage(width: header.size.width, height: header.size.height)
            cases.append(
                Case(name: "ImageDecoder.decode into reused destination") {
                    try decoder.decode(input, minimumSize: nil, into: &destination)
                })
            cases.append(Case(name: "ImageDecoder.decode, fresh buffer each time") { _ = try decoder.decode(input) })
            if header.format == .heic {
                // The same bare decode with libde265 on one thread (libheif's own plugin: one
                // worker), against the anchor's worker threads.
                let threads = ImageDecoder.hevcDecodeThreads
                cases.append(
                    Case(name: "decode_full_ms, HEVC on 1 thread (anchor: \(threads))") {
                        ImageDecoder.hevcDecodeThreads = 1
                        defer { ImageDecoder.hevcDecodeThreads = threads }
                        try decoder.decodeBare(input, into: &full)
                    })
            }
            if header.format == .jpeg {
                for factor in JPEGScalingFactor.reducing where factor != .one {
                    let size = factor.scaled(header.codedSize)
                    var scaled = PixelImage(width: size.width, height: size.height)
                    cases.append(
                        Case(name: "decode_scaled_ms \(factor) -> \(size)") {
                            try decoder.decodeBare(input, scale: factor, into: &scaled)
                        })
                }
            } else if header.format == .webp {
                for div in [2, 4, 8] {
                    let size = PixelSize(width: header.codedSize.width / div, height: header.codedSize.height / div)
                    var scaled = PixelImage(width: size.width, height: size.height)
                    cases.append(
                        Case(name: "decode_scaled_ms 1/\(div) -> \(size)") {
                            try decoder.decodeBare(input, into: &scaled)
                        })
                }
            }
            // Shrink-on-load for a target box: decode to >= target (1x) or leave >= 2x for the reduce.
            for target in [256, 1024] {
                for headroom in [1, 2] {
                    let box = PixelSize(width: target * headroom, height: target * headroom)
                    let plan = SizingPlan(source: header.size, box: box, mode: .fit)
                    let size = decoder.decodedSize(for: header, minimumSize: plan.output)
                    var out = PixelImage(width: size.width, height: size.height)
                    cases.append(
                        Case(name: "fit \(target) headroom \(headroom)x: decode -> \(size)") {
                            try decoder.decode(input, minimumSize: plan.output, into: &out)
                        })
                }
            }
            let renderer = ImageRenderer()
            for target in [256, 1024] {
                let request = RenderRequest(box: PixelSize(width: target, height: target))
                let (_, minimum) = renderer.plan(for: header, request: request)
                let size = decoder.decodedSize(for: header, minimumSize: minimum)
                cases.append(
                    Case(name: "render fit \(target) (ImageRenderer, decode -> \(size))") {
                        _ = try renderer.render(input, request: request)
                    })
            }
            if encode {
                let image = try decoder.decode(input, minimumSize: PixelSize(width: 1024, height: 1024))
                for format in ImageEncoder.formats {
                    cases.append(
                        Case(name: "encode \(format.displayName) q85 \(image.size)") {
                            _ = try ImageEncoder.encode(image, as: format)
                        })
                }
            }

            let clock = ContinuousClock()
            for i in cases.indices { try cases[i].body() }  // warm-up
            for _ in 0..<iterations {
                for i in cases.indices {
                    let elapsed = try clock.measure { try cases[i].body() }
                    cases[i].samples.append(Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15)
                }
            }
            let medians = cases.map { $0.samples.sorted()[$0.samples.count / 2] }
            let anchor = medians[0]
            for (c, ms) in zip(cases, medians) {
                print(String(format: "  %-48@ %8.2f ms  %6.2fx  %@", c.name as NSString, ms, ms / anchor, c.note as NSString))
            }
        }
    }
}
