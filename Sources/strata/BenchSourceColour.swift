import Foundation
@_spi(Benchmarks) import Strata

/// `strata bench source`'s colour rows: one JPEG render to each target, untagged, tagged with
/// sRGB (identity: no transform), tagged with Display P3 (a Little CMS transform after the
/// resample, the source tier's way) and the same with the transform before the resample (on
/// the decoded, larger image), interleaved in one run; ratios against the untagged render.
extension BenchSourceCommand {
    struct ColourRow: Codable {
        var file: String
        var target: Int
        var variant: String
        var thumbnail_ms: Double
        var ratio_to_untagged: Double
    }

    /// The rows for `bytes` (an untagged JPEG).
    func colourRows(file: String, bytes: [UInt8]) throws -> [ColourRow] {
        let variants: [(name: String, bytes: [UInt8], beforeResample: Bool)] = [
            ("untagged", bytes, false),
            ("sRGB-tagged", try ImageEncoder.embedding(.sRGB, in: bytes, format: .jpeg), false),
            ("Display P3, after resample", try ImageEncoder.embedding(.displayP3, in: bytes, format: .jpeg), false),
            ("Display P3, before resample", try ImageEncoder.embedding(.displayP3, in: bytes, format: .jpeg), true),
        ]
        let renderer = ImageRenderer(resampleThreads: resampleThreads)
        var rows: [ColourRow] = []
        for target in [256, 1024] {
            let request = RenderRequest(box: PixelSize(width: target, height: target), mode: .fit)
            var times = [[Double]](repeating: [], count: variants.count)
            for round in 0...runs {
                for (index, variant) in variants.enumerated() {
                    renderer.convertsColourBeforeResample = variant.beforeResample
                    let t0 = DispatchTime.now().uptimeNanoseconds
                    _ = try renderer.render(variant.bytes, request: request)
                    let t1 = DispatchTime.now().uptimeNanoseconds
                    if round > 0 { times[index].append(Double(t1 - t0) / 1e6) }
                }
            }
            renderer.convertsColourBeforeResample = false
            let untagged = median(times[0])
            for (index, variant) in variants.enumerated() {
                let ms = median(times[index])
                rows.append(
                    ColourRow(file: file, target: target, variant: variant.name, thumbnail_ms: ms, ratio_to_untagged: ms / untagged))
            }
        }
        return rows
    }

    /// The colour rows as a table.
    static func printColour(_ rows: [ColourRow]) {
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0) }
        print("")
        print(pad("colour: file", 38), pad("variant", 30), "target  thumb_ms  x_untagged")
        for r in rows {
            print(pad(r.file, 38), pad(r.variant, 30), String(format: "%6d %9.2f %11.2f", r.target, r.thumbnail_ms, r.ratio_to_untagged))
        }
    }
}
