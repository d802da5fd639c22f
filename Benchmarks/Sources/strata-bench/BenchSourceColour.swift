import Foundation
import Strata
// The knobs a benchmark turns (`@_spi(Benchmarks)`) are declared in the codecs layer.
@_spi(Benchmarks) import StrataCodecs

/// `strata-bench source`'s colour rows: one JPEG render to each target, untagged (its own
/// profile, if any, taken out), as the file came (Fixtures' 2560×1600 photo carries the HP
/// sRGB IEC61966-2.1 profile), tagged with Little CMS's sRGB (both identities: no transform),
/// tagged with Display P3 (a Little CMS transform after the resample, the source tier's way) and
/// the same with the transform before the resample (on the decoded, larger image), interleaved
/// in one run; ratios against the untagged render.
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
        let untagged = Self.withoutICCProfile(bytes)
        var variants: [(name: String, bytes: [UInt8], beforeResample: Bool)] = [("untagged", untagged, false)]
        if untagged.count != bytes.count { variants.append(("as the file came (its profile)", bytes, false)) }
        variants += [
            ("sRGB-tagged (Little CMS's)", try ImageEncoder.embedding(.sRGB, in: untagged, format: .jpeg), false),
            ("Display P3, after resample", try ImageEncoder.embedding(.displayP3, in: untagged, format: .jpeg), false),
            ("Display P3, before resample", try ImageEncoder.embedding(.displayP3, in: untagged, format: .jpeg), true),
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
            let base = median(times[0])
            for (index, variant) in variants.enumerated() {
                let ms = median(times[index])
                rows.append(ColourRow(file: file, target: target, variant: variant.name, thumbnail_ms: ms, ratio_to_untagged: ms / base))
            }
        }
        return rows
    }

    /// `jpeg` without its APP2 `ICC_PROFILE` segments (the segments before the scan walked).
    static func withoutICCProfile(_ jpeg: [UInt8]) -> [UInt8] {
        guard jpeg.count > 4, jpeg[0] == 0xFF, jpeg[1] == 0xD8 else { return jpeg }
        var out: [UInt8] = [0xFF, 0xD8]
        var i = 2
        while i + 4 <= jpeg.count, jpeg[i] == 0xFF, jpeg[i + 1] != 0xDA {
            let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            guard i + 2 + length <= jpeg.count else { break }
            let isICC = jpeg[i + 1] == 0xE2 && length >= 14 && Array(jpeg[(i + 4)..<(i + 15)]) == Array("ICC_PROFILE".utf8)
            if !isICC { out += jpeg[i..<(i + 2 + length)] }
            i += 2 + length
        }
        return out + jpeg[i...]
    }

    /// The colour rows as a table.
    static func printColour(_ rows: [ColourRow]) {
        func pad(_ text: String, _ width: Int) -> String { text.padding(toLength: max(width, text.count), withPad: " ", startingAt: 0) }
        print("")
        print(pad("colour: file", 38), pad("variant", 32), "target  thumb_ms  x_untagged")
        for r in rows {
            print(pad(r.file, 38), pad(r.variant, 32), String(format: "%6d %9.2f %11.2f", r.target, r.thumbnail_ms, r.ratio_to_untagged))
        }
    }
}
