import ArgumentParser
import Foundation
import Strata

/// `strata-bench gravity [FILES...] [--json] [--crops]`: what a smart crop costs against a centre
/// fill, and the crops it chooses.
struct BenchGravityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gravity",
        abstract: "Time smart-crop fills against centre fills from the original; print the crops chosen.",
        discussion: """
            For each file and box: centre_ms (a cold fill render, header to resampled pixels, \
            the file's bytes in memory, gravity=center: the anchor) and smart_ms (the same with \
            gravity=smart and no held variant, so the saliency comes from the render's own \
            shrink-on-load decode) and held_ms (the saliency of a 192 px variant, as the engine \
            reads it when memory holds one, plus the render with that focus), interleaved in \
            the same run, medians of --runs. --crops prints instead each smart \
            crop in original pixels (x, y, width, height), for Scripts/smartcrop-agreement.sh. \
            Use a release build.
            """
    )

    @Argument(help: "JPEG or WebP files (default: the photographs in Fixtures/).")
    var files: [String] = []

    @Option(help: "Fixtures directory used when no files are given.")
    var fixtures: String = "Fixtures"

    @Option(help: "Runs per measurement (the median is reported; at least 5).")
    var runs: Int = 21

    @Option(parsing: .upToNextOption, help: "Boxes WxH (default: 512x512 400x600 640x360).")
    var boxes: [String] = ["512x512", "400x600", "640x360"]

    @Flag(help: "Print each smart crop (original pixels) instead of timing.")
    var crops = false

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    static let defaultFiles = [
        "jpeg/path-2560x1600.jpg", "jpeg/fallenleaf-2048x1280-420.jpg", "jpeg/eveningglow-1024x640-progressive.jpg",
        "jpeg/kite-800x500-gray.jpg", "jpeg/cups-320x200-rgb-reference.jpg", "webp/path-2560x1600.webp",
    ]

    struct Row: Codable {
        var file: String
        var box: String
        var centre_ms: Double?
        var smart_ms: Double?
        var held_ms: Double?
        var ratio: Double?
        var held_ratio: Double?
        var crop: [Double]?
    }

    func validate() throws {
        guard runs >= 5 else { throw ValidationError("--runs must be at least 5") }
        for box in boxes where PixelSize(parsing: box) == nil { throw ValidationError("--boxes: \(box) is not WxH") }
    }

    func run() throws {
        #if DEBUG
        if !crops { FileHandle.standardError.write(Data("warning: debug build; timings are not meaningful\n".utf8)) }
        #endif
        let paths = files.isEmpty ? Self.defaultFiles.map { fixtures + "/" + $0 } : files
        var rows: [Row] = []
        for path in paths {
            guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("cannot read \(path)") }
            let bytes = [UInt8](data)
            let renderer = ImageRenderer()
            let header = try ImageDecoder().readHeader(bytes)
            for text in boxes {
                let box = PixelSize(parsing: text)!
                let name = (path as NSString).lastPathComponent
                if crops {
                    rows.append(Row(file: name, box: text, crop: try Self.smartCrop(bytes, header: header, box: box, renderer: renderer)))
                    continue
                }
                let centre = RenderRequest(box: box, mode: .fill)
                let smart = RenderRequest(box: box, mode: .fill, gravity: .smart)
                // The engine's other way: the saliency of a small variant memory holds, then a
                // render with that focus.
                let small = try renderer.render(bytes, request: RenderRequest(box: PixelSize(width: 192, height: 192)))
                func held() throws {
                    let focus = Saliency.focus(of: small, forFillOf: box)
                    _ = try renderer.render(bytes, request: RenderRequest(box: box, mode: .fill, gravity: .smart, smartFocus: focus))
                }
                _ = try renderer.render(bytes, request: centre)
                _ = try renderer.render(bytes, request: smart)
                try held()
                var a: [Double] = [], b: [Double] = [], c: [Double] = []
                let clock = ContinuousClock()
                for _ in 0..<runs {
                    a.append(Self.ms(try clock.measure { _ = try renderer.render(bytes, request: centre) }))
                    b.append(Self.ms(try clock.measure { _ = try renderer.render(bytes, request: smart) }))
                    c.append(Self.ms(try clock.measure { try held() }))
                }
                let (mc, ms, mh) = (median(a), median(b), median(c))
                rows.append(Row(file: name, box: text, centre_ms: mc, smart_ms: ms, held_ms: mh, ratio: ms / mc, held_ratio: mh / mc))
            }
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            print(String(decoding: try encoder.encode(["rows": rows]), as: UTF8.self))
            return
        }
        for row in rows {
            if let crop = row.crop {
                print("\(row.file)\t\(row.box)\t" + crop.map { String(format: "%.1f", $0) }.joined(separator: "\t"))
            } else {
                print(
                    String(
                        format: "%-40@ %-8@ centre %7.2f ms  smart %7.2f ms ×%.3f  smart from a held variant %7.2f ms ×%.3f",
                        row.file as NSString, row.box as NSString, row.centre_ms!, row.smart_ms!, row.ratio!, row.held_ms!,
                        row.held_ratio!))
            }
        }
    }

    /// The crop a smart render of `box` takes, in original pixels: the focus the renderer chose,
    /// placed as the renderer places it.
    static func smartCrop(_ bytes: [UInt8], header: ImageHeader, box: PixelSize, renderer: ImageRenderer) throws -> [Double] {
        _ = try renderer.render(bytes, request: RenderRequest(box: box, mode: .fill, gravity: .smart))
        let placed = SizingPlan(source: header.size, box: box, mode: .fill, focus: renderer.lastSmartFocus ?? .center).sourceRect
        return [placed.x, placed.y, placed.width, placed.height]
    }

    static func ms(_ d: Duration) -> Double { Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) / 1e15 }
}
