import ArgumentParser
import Foundation
import Strata

/// `strata-bench source [FILES...] [--json]`: the source tier against bare library decodes.
struct BenchSourceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "source",
        abstract: "Time source-tier thumbnails against bare libjpeg-turbo / libwebp decodes.",
        discussion: """
            For each file and each target long side (256, 1024), measured in the same run and \
            interleaved so that machine noise hits all three alike: thumbnail_ms (the source \
            tier: header, shrink-on-load decode, Lanczos-3, file bytes already in memory), \
            decode_full_ms (bare library full decode into a reused buffer: the anchor) and, for \
            JPEG, decode_scaled_ms (bare decode at the DCT scale the tier chose: the floor). \
            Medians of --runs runs. Then the colour rows: the first JPEG rendered untagged, \
            tagged sRGB and tagged Display P3 (converted after the resample, and before it), \
            interleaved, with ratios to the untagged render. Use a release build.
            """
    )

    @Argument(help: "JPEG or WebP files (default: the photographs in Fixtures/).")
    var files: [String] = []

    @Option(help: "Runs per measurement (the median is reported; at least 15).")
    var runs: Int = 21

    @Option(help: "Fixtures directory used when no files are given.")
    var fixtures: String = "Fixtures"

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    @Option(help: "Threads one large resample may use (source.resampleThreads; default as the source tier's).")
    var resampleThreads = RenderSettings.defaultResampleThreads

    static let defaultFiles = [
        "jpeg/path-2560x1600.jpg", "jpeg/fallenleaf-2048x1280-420.jpg",
        "jpeg/eveningglow-1024x640-progressive.jpg", "webp/path-2560x1600.webp",
        "webp/cups-640x400-alpha.webp",
    ]

    struct Row: Codable {
        var file: String
        var format: String
        var width: Int
        var height: Int
        var target: Int
        var thumbnail_ms: Double
        var decode_full_ms: Double
        var decode_scaled_ms: Double?
    }

    func validate() throws {
        guard runs >= 15 else { throw ValidationError("--runs must be at least 15") }
        guard resampleThreads >= 1 else { throw ValidationError("--resample-threads must be at least 1") }
    }

    func run() throws {
        #if DEBUG
        if !json { print("warning: this is a debug build; benchmark with `swift build -c release`") }
        #endif
        let paths = files.isEmpty ? Self.defaultFiles.map { fixtures + "/" + $0 } : files
        var rows: [Row] = []
        let renderer = ImageRenderer(resampleThreads: resampleThreads)
        let bare = ImageDecoder()
        for path in paths {
            let bytes: [UInt8]
            do { bytes = try FileDescriptor(open: path, flags: O_RDONLY).readAll() } catch {
                throw ValidationError("\(path): cannot read: \(error.reason)")
            }
            let header = try bytes.withUnsafeBytes { try renderer.decoder.readHeader($0) }
            for target in [256, 1024] {
                let request = RenderRequest(box: PixelSize(width: target, height: target), mode: .fit)
                let minimum = renderer.plan(for: header, request: request).minimumDecode
                // decodedSize is oriented; the bare decode works in coded orientation.
                let oriented = bare.decodedSize(for: header, minimumSize: minimum)
                let scaledSize = header.swapsSides ? PixelSize(width: oriented.height, height: oriented.width) : oriented
                var full = PixelImage(width: header.codedSize.width, height: header.codedSize.height)
                var scaled = PixelImage(width: scaledSize.width, height: scaledSize.height)
                var thumbTimes: [Double] = [], fullTimes: [Double] = [], scaledTimes: [Double] = []
                try bytes.withUnsafeBytes { raw in
                    // One warm-up of each, then interleaved timed runs.
                    for round in 0...runs {
                        let t0 = DispatchTime.now().uptimeNanoseconds
                        _ = try renderer.render(raw, request: request)
                        let t1 = DispatchTime.now().uptimeNanoseconds
                        try bare.decodeBare(raw, into: &full)
                        let t2 = DispatchTime.now().uptimeNanoseconds
                        var t3 = t2
                        if header.format == .jpeg {
                            try bare.decodeBare(raw, into: &scaled)
                            t3 = DispatchTime.now().uptimeNanoseconds
                        }
                        if round == 0 { continue }
                        thumbTimes.append(Double(t1 - t0) / 1e6)
                        fullTimes.append(Double(t2 - t1) / 1e6)
                        scaledTimes.append(Double(t3 - t2) / 1e6)
                    }
                }
                rows.append(
                    Row(
                        file: (path as NSString).lastPathComponent, format: header.format.rawValue,
                        width: header.size.width, height: header.size.height, target: target,
                        thumbnail_ms: median(thumbTimes), decode_full_ms: median(fullTimes),
                        decode_scaled_ms: header.format == .jpeg ? median(scaledTimes) : nil))
            }
        }
        var colour: [ColourRow] = []
        if let first = paths.first(where: { $0.lowercased().hasSuffix(".jpg") || $0.lowercased().hasSuffix(".jpeg") }) {
            let bytes = try FileDescriptor(open: first, flags: O_RDONLY).readAll()
            colour = try colourRows(file: (first as NSString).lastPathComponent, bytes: bytes)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            struct Output: Codable {
                var results: [Row]
                var colour: [ColourRow]
            }
            print(String(decoding: try encoder.encode(Output(results: rows, colour: colour)), as: UTF8.self))
        } else {
            func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0) }
            print(pad("file", 38), pad("fmt", 5), pad("size", 10), "target  thumb_ms  full_ms  scaled_ms  thumb/scaled  thumb/full")
            for r in rows {
                let scaled = r.decode_scaled_ms.map { String(format: "%9.2f", $0) } ?? "        -"
                let ratio = r.decode_scaled_ms.map { String(format: "%12.2f", r.thumbnail_ms / $0) } ?? "           -"
                print(
                    pad(r.file, 38), pad(r.format, 5), pad("\(r.width)x\(r.height)", 10),
                    String(format: "%6d %9.2f %8.2f", r.target, r.thumbnail_ms, r.decode_full_ms),
                    scaled, ratio, String(format: "%11.2f", r.thumbnail_ms / r.decode_full_ms))
            }
            Self.printColour(colour)
        }
    }
}

/// The median of `values` (the mean of the middle two for an even count).
func median(_ values: [Double]) -> Double {
    precondition(!values.isEmpty)
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}
