import Benchmark
import Strata

/// The engine (`ImageCache`) over a memory tier and a `ClosureSource` that answers every key with
/// the same 1024×640 JPEG (made in the setup, so no file is read):
/// - a warm memory hit through `image(for:)`, the facade every request takes (1 000 per
///   iteration; `strata-bench engine` times the same beside `cachedImage(for:)` and the bare
///   tier lookup);
/// - a coalesced miss: 8 concurrent `image(for:)` of a key no tier holds yet, answered by one
///   source render (fetch, decode, resample to fit 512×512) that the other 7 wait for.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal], maxDuration: .seconds(2), maxIterations: 100_000)

    let hit = EngineState()
    Benchmark("Engine memory hit image(for:)", configuration: .init(scalingFactor: .kilo)) { benchmark in
        let engine = hit.engine!
        let request = ImageRequest(key: "photo", box: EngineState.box)
        var widths = 0
        for _ in benchmark.scaledIterations { widths &+= try await engine.image(for: request).image.width }
        precondition(widths == hit.width * benchmark.scaledIterations.count)
    } setup: {
        try hit.start()
        let primed = try await hit.engine!.image(for: ImageRequest(key: "photo", box: EngineState.box))
        precondition(primed.tier == .source)
        let warm = try await hit.engine!.image(for: ImageRequest(key: "photo", box: EngineState.box))
        precondition(warm.tier == .memory, "expected a memory hit, got \(warm.tier)")
        hit.width = warm.image.width
    } teardown: {
        hit.engine = nil
    }

    let miss = EngineState()
    Benchmark("Engine coalesced miss (8 requests, 1 render)") { _ in
        let engine = miss.engine!
        let request = ImageRequest(key: miss.nextKey(), box: EngineState.box)
        let sizes = try await withThrowingTaskGroup(of: PixelSize.self) { group in
            for _ in 0..<8 { group.addTask { try await engine.image(for: request).image.size } }
            return try await group.reduce(into: Set<PixelSize>()) { $0.insert($1) }
        }
        precondition(sizes.count == 1, "the answers differ: \(sizes)")
    } setup: {
        try miss.start()
    } teardown: {
        if let stats = miss.engine?.statistics.engine {
            precondition(stats.coalesced > 0, "no request was coalesced")
            precondition(stats.sourceDecodes < stats.coalesced, "\(stats.sourceDecodes) renders for \(stats.coalesced) coalesced")
        }
        miss.engine = nil
    }
}

/// An engine made by a benchmark's setup and dropped (its pool stopped) by its teardown.
final class EngineState: @unchecked Sendable {
    static let box = PixelSize(width: 512, height: 512)
    var engine: ImageCache?
    /// The width of the memory hit's answer.
    var width = 0
    private var counter = 0

    /// Encodes the original (a colour pattern) and makes the engine.
    func start() throws {
        var original = PixelImage(width: 1024, height: 640)
        let bytesPerRow = original.bytesPerRow
        original.withUnsafeMutableBytes { raw in
            for y in 0..<640 {
                for x in 0..<1024 {
                    let p = y * bytesPerRow + x * 4
                    (raw[p], raw[p + 1], raw[p + 2], raw[p + 3]) = (UInt8(x & 255), UInt8(y & 255), UInt8((x ^ y) & 255), 255)
                }
            }
        }
        let jpeg = try ImageEncoder.encode(original, as: .jpeg, quality: 85)
        let source = ClosureSource { _ in SourceData(bytes: jpeg, version: "1") }
        engine = try ImageCache(memory: ImageMemoryTier(), source: source)
    }

    /// A key no earlier iteration asked for.
    func nextKey() -> CacheKey {
        counter += 1
        return CacheKey("photo-\(counter)")
    }
}
