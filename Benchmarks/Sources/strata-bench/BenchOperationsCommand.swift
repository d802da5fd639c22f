import ArgumentParser
import Foundation
import Strata

/// `strata-bench operations [FILE] [--runs N] [--json]`: each image operation on one decoded
/// photo, the anchor being libvips' (`Scripts/bench/pyvips_operations.py`, the same operations
/// and parameters, run by `Scripts/bench-operations.sh` in the same run).
struct BenchOperationsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "operations",
        abstract: "Time blur, sharpen, trim, pad, flatten, crop and turn on a decoded photo.",
        discussion: """
            The photo is decoded once (premultiplied BGRA); each operation then runs on it --runs \
            times (the median is reported), with 2 threads where it splits (the blur, as libvips \
            runs its pipeline on the 2 cores): blur_2 and blur_5 (Gaussian, σ 2 and 5), \
            sharpen_1 (σ 1), trim (the box of the photo framed in a 64-pixel border), \
            pad (to 3000×2000), watermark (Fixtures/webp/cups-640x400-alpha.webp laid over the \
            bottom-right corner, in linear light), turn (90° clockwise) and flip (left to right). Use a release build.
            """
    )

    @Argument(help: "The photo (default: Fixtures/jpeg/path-2560x1600.jpg).")
    var file = "Fixtures/jpeg/path-2560x1600.jpg"

    @Option(help: "Runs per operation (the median is reported; at least 5).")
    var runs: Int = 15

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    func validate() throws {
        guard runs >= 5 else { throw ValidationError("--runs must be at least 5") }
    }

    func run() throws {
        #if DEBUG
        FileHandle.standardError.write(Data("warning: debug build; timings are not meaningful\n".utf8))
        #endif
        guard let data = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
        let photo = try ImageDecoder().decode([UInt8](data))
        let framed = photo.padded(
            to: PixelSize(width: photo.width + 128, height: photo.height + 128),
            background: BackgroundColour(red: 250, green: 250, blue: 250).premultipliedBGRA)
        let markPath = (file as NSString).deletingLastPathComponent + "/../webp/cups-640x400-alpha.webp"
        guard let markData = FileManager.default.contents(atPath: markPath) else { throw ValidationError("cannot read \(markPath)") }
        let mark = try ImageDecoder().decode([UInt8](markData))
        let operations: [(String, () -> PixelImage)] = [
            ("blur_2", { photo.blurred(sigma: 2, threads: 2) }),
            ("blur_5", { photo.blurred(sigma: 5, threads: 2) }),
            ("sharpen_1", { photo.sharpened(sigma: 1, threads: 2) }),
            (
                "trim",
                {
                    let b = framed.trimBox(threshold: 10)
                    return PixelImage(width: max(1, b.width / 1000), height: 1)
                }
            ),
            ("pad", { photo.padded(to: PixelSize(width: 3000, height: 2000)) }),
            ("watermark", { photo.composited(mark, x: photo.width - mark.width - 16, y: photo.height - mark.height - 16) }),
            ("turn", { photo.rotated(clockwiseQuarterTurns: 1) }),
            ("flip", { photo.mirrored() }),
        ]
        var results: [String: Double] = [:]
        for (name, operation) in operations {
            var times: [Double] = []
            for i in 0...runs {
                let start = ContinuousClock.now
                let out = operation()
                let elapsed = ContinuousClock.now - start
                precondition(out.width > 0)
                if i > 0 { times.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3) }
            }
            times.sort()
            results[name] = times[times.count / 2]
        }
        if json {
            let object: [String: Any] = [
                "file": (file as NSString).lastPathComponent, "size": "\(photo.size)", "runs": runs, "ms": results,
            ]
            print(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
        } else {
            for (name, _) in operations {
                print("\(name.padding(toLength: 12, withPad: " ", startingAt: 0)) \(String(format: "%8.2f", results[name]!)) ms")
            }
        }
    }
}
