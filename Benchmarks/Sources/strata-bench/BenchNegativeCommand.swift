import ArgumentParser
import Foundation
import Strata

/// `strata-bench negative`: memory hits beside a flood of distinct missing keys — the latency of
/// `ImageCache.image(for:)` memory hits alone, then while another task asks for `--flood`
/// distinct keys the source does not have (each a miss, a source call answering not found, and
/// an insert into the negative cache), in interleaved rounds; and the negative cache's size and
/// the process's peak RSS after the flood.
struct BenchNegativeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "negative",
        abstract: "Memory-hit latency beside a flood of distinct missing keys; the negative cache's bound (release build).")

    @Option(help: "Distinct missing keys asked for during each flooded round.")
    var flood = 250_000

    @Option(help: "Memory hits timed per round.")
    var hits = 200_000

    @Option(help: "Rounds (each: hits alone, then hits beside the flood).")
    var rounds = 3

    func run() async throws {
        let source = ClosureSource { key in throw SourceError(key: key, reason: .notFound) }
        let cache = try ImageCache(memory: ImageMemoryTier(), source: source)
        let photo = CacheKey("photo.jpg")
        cache.memory!.insert(
            PixelImage(width: 512, height: 320), forKey: photo,
            variant: ImageVariant(descriptor: VariantDescriptor(size: PixelSize(width: 512, height: 320))))
        let request = ImageRequest(key: photo, box: PixelSize(width: 512, height: 512))
        print("memory hits of image(for:), \(hits) per round; flood: \(flood) distinct missing keys beside them")
        print("round  alone p50/p99 ns   flooded p50/p99 ns   flood keys/s")
        var next = 0
        for round in 1...rounds {
            let alone = try await Self.timeHits(cache, request, hits)
            let first = next
            next += flood
            let flooding = Task.detached { () -> Double in
                let start = ContinuousClock.now
                for i in first..<(first + flood) {
                    _ = try? await cache.image(for: ImageRequest(key: CacheKey("missing/\(i)"), box: PixelSize(width: 64, height: 64)))
                }
                let seconds = (ContinuousClock.now - start) / .seconds(1)
                return Double(flood) / seconds
            }
            let flooded = try await Self.timeHits(cache, request, hits)
            let rate = await flooding.value
            print(
                String(
                    format: "%5d  %8d / %-8d  %8d / %-8d  %10.0f", round, alone.p50, alone.p99, flooded.p50, flooded.p99, rate))
        }
        let stats = cache.statistics.engine
        print(
            "negative cache after \(next) distinct missing keys: \(stats.negativeKeys) held (capacity \(cache.options.negativeCapacity)), \(stats.negativeDisplaced) forgotten early; peak RSS \(Self.peakRSSMiB()) MiB"
        )
    }

    static func timeHits(_ cache: ImageCache, _ request: ImageRequest, _ n: Int) async throws -> (p50: Int, p99: Int) {
        var samples = [Int](repeating: 0, count: n)
        for i in 0..<n {
            let start = ContinuousClock.now
            let served = try await cache.image(for: request)
            let elapsed = ContinuousClock.now - start
            precondition(served.tier == .memory)
            samples[i] = Int(elapsed.components.attoseconds / 1_000_000_000) + Int(elapsed.components.seconds) * 1_000_000_000
        }
        samples.sort()
        return (samples[n / 2], samples[n * 99 / 100])
    }

    static func peakRSSMiB() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
            let kib = Int(line.split(separator: " ").dropFirst().first { !$0.isEmpty } ?? "")
        else { return -1 }
        return kib / 1024
    }
}
