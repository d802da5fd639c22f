import Foundation
import Strata
import StrataConfiguration

/// `strata warm --iiif`: builds the tile pyramid of every original above `iiif.tiledAbove`
/// (into `iiif.pyramidPath`), one original at a time, so a viewer's first screen of a big image
/// is already there. Originals at or below the threshold are counted and left to `--size`.
/// Progress goes to standard error (the tiles of the pyramid being built, every second); the
/// summary to standard output.
struct WarmPyramids {
    let pyramids: TilePyramids
    let keys: [String]
    let tiledAbove: Int

    struct Summary {
        var built = 0
        var small = 0
        var failed = 0
        var failures: [String] = []
        var tiles = 0
        var tilesWritten = 0
        var tilesFound = 0
        var cancelled = false
    }

    /// Builds the pyramids; stops between originals (and stops waiting for the one being built)
    /// when the calling task is cancelled.
    func run() async -> Summary {
        var summary = Summary()
        for (index, key) in keys.enumerated() {
            if Task.isCancelled {
                summary.cancelled = true
                break
            }
            let cacheKey = CacheKey(key)
            let header: ImageHeader
            do {
                header = try await pyramids.original(for: cacheKey).header
            } catch {
                record(failure: "\(key): \(GetCommand.oneLine(error.description))", in: &summary)
                continue
            }
            guard header.size.pixelCount > tiledAbove else {
                summary.small += 1
                continue
            }
            let tiles = pyramids.geometry(for: header.size).tileCount
            let before = pyramids.statistics
            let started = ContinuousClock.now
            let reporter = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    let now = pyramids.statistics
                    let done = now.tilesWritten + now.tilesFound - before.tilesWritten - before.tilesFound
                    Self.say("pyramid \(index + 1)/\(keys.count) \(key) \(header.size): \(done)/\(tiles) tiles")
                }
            }
            do {
                try await pyramids.build(cacheKey)
                let now = pyramids.statistics
                summary.built += 1
                summary.tiles += tiles
                summary.tilesWritten += now.tilesWritten - before.tilesWritten
                summary.tilesFound += now.tilesFound - before.tilesFound
                Self.say(
                    "pyramid \(index + 1)/\(keys.count) \(key) \(header.size): \(tiles) tiles in "
                        + String(format: "%.2f s", (ContinuousClock.now - started).seconds))
            } catch {
                if case .cancelled = error {
                    summary.cancelled = true
                } else {
                    record(failure: "\(key): \(GetCommand.oneLine(error.description))", in: &summary)
                }
            }
            reporter.cancel()
        }
        return summary
    }

    private func record(failure: String, in summary: inout Summary) {
        summary.failed += 1
        if summary.failures.count < WarmRun.failuresShown { summary.failures.append(failure) }
    }

    static func say(_ line: String) { FileHandle.standardError.write(Data((line + "\n").utf8)) }

    static func text(_ s: Summary) -> String {
        var lines = [
            "pyramids built: \(s.built) (\(s.tiles) tiles: \(s.tilesWritten) written, \(s.tilesFound) already there)",
            "at or below iiif.tiledAbove: \(s.small)",
            "pyramids failed: \(s.failed)",
        ]
        lines += s.failures.map { "  \($0)" }
        if s.cancelled { lines.append("pyramids: interrupted (a build cut short resumes from the tiles written)") }
        return lines.joined(separator: "\n") + "\n"
    }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) * 1e-18 }
}
