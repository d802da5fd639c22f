import Benchmark
import Foundation
import Strata

/// The disk tier's lookups, as `strata-bench disk` times them: a hit (`image(forKey:matching:)`,
/// then one byte read from every page of the pixels, so a mapping's pages are faulted in as a
/// caller's reads would) of a 256×160 variant (read with `pread`, under the tier's map
/// threshold) and of a 1024×640 one (mapped), and a miss (a key the index does not hold). The
/// tier's directory is a fresh temporary one, removed after each benchmark; no inotify.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(2), maxIterations: 100_000)

    let small = PixelSize(width: 256, height: 160)
    let large = PixelSize(width: 1024, height: 640)
    for size in [small, large] {
        let state = DiskState()
        Benchmark("DiskTier hit \(size.width)x\(size.height)") { _ in
            blackHole(state.touchHit(key: "bench/\(size.width)", query: SizeQuery(box: size)))
        } setup: {
            try state.open(storing: [small, large])
        } teardown: {
            state.close()
        }
    }

    let state = DiskState()
    Benchmark("DiskTier miss", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let query = SizeQuery(box: small)
        for i in benchmark.scaledIterations {
            precondition(state.lookup(key: state.absent[i], query: query) == nil)
        }
    } setup: {
        try state.open(storing: [small, large])
    } teardown: {
        state.close()
    }
}

/// One disk tier in a temporary directory, opened by a benchmark's setup and closed (the
/// directory removed) by its teardown.
final class DiskState: @unchecked Sendable {
    private(set) var tier: DiskTier?
    private var directory: String?
    /// Keys the tier does not hold (1 000: one iteration of the miss benchmark).
    let absent = (0..<1_000).map { "bench/absent/\($0)" }

    /// Opens a tier in a new directory and stores a test-pattern image of each size under
    /// `bench/<width>`, synchronously; then hits each once (the first hit verifies the checksum).
    func open(storing sizes: [PixelSize]) throws {
        let directory = NSTemporaryDirectory() + "strata-benchmark-disk-\(getpid())-\(UUID().uuidString)"
        var configuration = DiskTier.Configuration()
        configuration.useInotify = false
        configuration.byteLimit = 256 << 20
        let tier = try DiskTier(directory: directory, configuration: configuration)
        for size in sizes {
            var image = PixelImage(width: size.width, height: size.height)
            image.withUnsafeMutableBytes { raw in
                for i in raw.indices { raw[i] = UInt8(truncatingIfNeeded: i &* 31 &+ i >> 8) }
            }
            try tier.storeSynchronously(image, forKey: "bench/\(size.width)")
            let hit = try tier.image(forKey: "bench/\(size.width)", matching: SizeQuery(box: size))
            precondition(hit != nil, "no hit for the \(size) image just stored")
        }
        (self.tier, self.directory) = (tier, directory)
    }

    func close() {
        tier?.close()
        tier = nil
        if let directory { try? FileManager.default.removeItem(atPath: directory) }
        directory = nil
    }

    func lookup(key: String, query: SizeQuery) -> PixelImage? {
        try! tier!.image(forKey: key, matching: query)
    }

    /// A hit, one byte read from every page of the pixels (and the last byte), the image dropped.
    func touchHit(key: String, query: SizeQuery) -> Int {
        guard let image = lookup(key: key, query: query) else { preconditionFailure("expected a hit for \(key)") }
        return image.withUnsafeBytes { raw in
            var sum = 0
            var i = 0
            while i < raw.count {
                sum &+= Int(raw[i])
                i += 4096
            }
            return sum &+ Int(raw[raw.count - 1])
        }
    }
}
