import ArgumentParser
import Foundation
import Strata

/// `strata-bench eighth`: a baseline JPEG at 1/8 scale — libjpeg-turbo's own scaled decode (one
/// thread: its entropy decoding is sequential) against `JPEGEighthReader` in one part a round
/// and in `--parts` parts (speculative Huffman decoding on several threads), each the median of
/// `--rounds`; the decodes a tile pyramid's coarse pass makes for a viewer's first screen.
struct BenchEighthCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "eighth",
        abstract: "A JPEG at 1/8 scale: libjpeg-turbo against the multi-threaded reader (release build).")

    @Option(help: "Timed rounds of each (the median is reported).")
    var rounds = 3

    @Option(help: "Parts per round of the multi-threaded read (default: the online cores).")
    var parts = ProcessInfo.processInfo.activeProcessorCount

    @Argument(help: "A baseline JPEG (a big one: the read is cut into 1 MiB parts).")
    var file: String

    func run() throws {
        guard let data = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
        let bytes = [UInt8](data)
        let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: Int.max))
        let header = try decoder.readHeader(bytes)
        let eighth = PixelSize(width: (header.codedSize.width + 7) / 8, height: (header.codedSize.height + 7) / 8)
        print("\(file): \(header.codedSize), \(bytes.count) bytes; 1/8 scale \(eighth)")
        let libjpeg = try BenchDiskCommand.median(runs: max(1, rounds)) {
            let image = try decoder.decode(bytes, minimumSize: eighth)
            guard image.size == eighth else { throw ValidationError("libjpeg-turbo decoded \(image.size), not \(eighth)") }
        }
        print(String(format: "libjpeg-turbo 1/8 (one thread):   %8.1f ms", libjpeg * 1000))
        for count in [1, parts] {
            var inStep: Int64 = 0, speculative = 0
            let seconds = try BenchDiskCommand.median(runs: max(1, rounds)) {
                try bytes.withUnsafeBytes { raw in
                    guard let reader = try JPEGEighthReader(raw) else {
                        throw ValidationError("not a JPEG the 1/8 reader takes (progressive, CMYK, 4:1:1…)")
                    }
                    var rows = 0
                    try reader.read(parts: count, forkJoin: .dispatch) { _, _, n in rows += n }
                    guard rows == eighth.height else { throw ValidationError("the reader made \(rows) rows") }
                    (inStep, speculative) = (reader.partsInStep, reader.speculativeParts)
                }
            }
            print(
                String(
                    format: "JPEGEighthReader, %2d part(s):     %8.1f ms  %.2fx libjpeg-turbo  (%lld of %d speculative parts in step)",
                    count, seconds * 1000, seconds / libjpeg, inStep, speculative))
        }
    }

}
