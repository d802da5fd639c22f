import Foundation
import Strata

/// The zoom trace of `strata-bench engine`: a viewer flipping through an album and zooming,
/// replayed against a fresh engine per tolerance, either as a viewer replays it (one request a
/// frame, album neighbours prefetched, render-ahead on) or closed-loop (one request at a time,
/// nothing else).
extension EngineBench {
    /// One request of the trace: photo `photo` (an index into the album's keys) at `box`.
    struct ZoomStep {
        var photo: Int
        var box: PixelSize
        /// The first request of a visit (the viewer has just flipped to `photo`).
        var opensVisit: Bool
    }

    /// How the viewer replays the trace; `nil` in ``runZoom(_:keys:tolerance:root:memoryBytes:viewer:)``
    /// is the closed loop.
    struct Viewer {
        /// Time between two requests (a frame): requests go out on schedule whether or not the
        /// previous one was answered.
        var frameNanoseconds: UInt64
        /// On flipping to photo p, the viewer prefetches photos p+1 … p+`prefetch` at the window's
        /// box (the engine's prefetch lane).
        var prefetch: Int
        /// ``ImageCache/Options/renderAhead`` of the engine; `nil`: off.
        var renderAhead: Double?
    }

    /// The viewer's requests, in order. Each photo is visited `visits` times; the visits are
    /// ordered by the photo's place in the album plus a seeded jitter of up to `flipWindow`
    /// places, so the viewer flips back and forth over a few neighbouring photos while moving
    /// through the album. Each visit opens at the window's box and zooms.
    static func zoomTrace(photos: Int, visits: Int, steps: Int, seed: UInt64) -> [ZoomStep] {
        var rng = SplitMix64(seed: seed)
        var order: [(time: Double, photo: Int)] = []
        for photo in 0..<photos {
            for _ in 0..<visits { order.append((Double(photo) + flipWindow * unit(&rng), photo)) }
        }
        order.sort { $0.time < $1.time }
        var trace: [ZoomStep] = []
        trace.reserveCapacity(order.count * steps)
        for (_, photo) in order {
            var zoom = 1.0
            var direction: Double = rng.next() & 1 == 0 ? 1 : -1
            for step in 0..<steps {
                let box = PixelSize(
                    width: max(1, Int((Double(window.width) * zoom).rounded())),
                    height: max(1, Int((Double(window.height) * zoom).rounded())))
                trace.append(ZoomStep(photo: photo, box: box, opensVisit: step == 0))
                if unit(&rng) < 0.15 { direction = -direction }
                var next = zoom * exp(direction * (0.02 + 0.03 * unit(&rng)))
                if !zoomRange.contains(next) {
                    direction = -direction
                    next = zoom * exp(direction * (0.02 + 0.03 * unit(&rng)))
                }
                zoom = next
            }
        }
        return trace
    }

    /// Replays `trace` on a fresh engine (memory tier + `DirectorySource`) at `tolerance`.
    /// Latency is that of `ImageCache.image(for:)` as the caller sees it, from the moment the
    /// request is made; the hits per tier are the trace's own requests (not the prefetches);
    /// `sourceDecodes` counts every render (prefetches and render-aheads included).
    static func runZoom(
        _ trace: [ZoomStep], keys: [String], tolerance: Double, root: String, memoryBytes: Int, viewer: Viewer?
    ) async throws -> ZoomResult {
        let memory = ImageMemoryTier(configuration: ImageMemoryTier.Configuration(costLimit: memoryBytes))
        let engine = try makeEngine(root: root, memory: memory, tolerance: tolerance, renderAhead: viewer?.renderAhead)
        let requests = trace.map { ImageRequest(key: CacheKey(keys[$0.photo]), box: $0.box, tolerance: tolerance) }
        var latencies = [UInt64](repeating: 0, count: requests.count)
        var tiers = [ServingTier](repeating: .source, count: requests.count)
        let started = now()
        if let viewer {
            try await withThrowingTaskGroup(of: (Int, UInt64, ServingTier).self) { group in
                for (i, step) in trace.enumerated() {
                    let due = started + UInt64(i) * viewer.frameNanoseconds
                    let t = now()
                    if due > t { try await Task.sleep(nanoseconds: due - t) }
                    if step.opensVisit {
                        let next = (step.photo + 1)..<min(keys.count, step.photo + 1 + viewer.prefetch)
                        _ = engine.prefetch(next.map { ImageRequest(key: CacheKey(keys[$0]), box: window, tolerance: tolerance) })
                    }
                    let request = requests[i], issued = now()
                    group.addTask {
                        let served = try await engine.image(for: request)
                        return (i, now() - issued, served.tier)
                    }
                }
                for try await (i, latency, tier) in group {
                    latencies[i] = latency
                    tiers[i] = tier
                }
            }
        } else {
            for (i, request) in requests.enumerated() {
                let start = now()
                let served = try await engine.image(for: request)
                latencies[i] = now() - start
                tiers[i] = served.tier
            }
        }
        let seconds = Double(now() - started) / 1e9
        latencies.sort()
        func percentile(_ p: Double) -> Double {
            Double(latencies[min(latencies.count - 1, max(0, Int((Double(latencies.count) * p).rounded(.up)) - 1))]) / 1e6
        }
        func count(_ tier: ServingTier) -> Int { tiers.lazy.filter { $0 == tier }.count }
        let stats = engine.statistics.engine
        return ZoomResult(
            tolerance: tolerance, requests: requests.count, sourceDecodes: stats.sourceDecodes, renderAheads: stats.renderAheads,
            memory: count(.memory), disk: count(.disk), table: count(.table), source: count(.source), p50Ms: percentile(0.5),
            p99Ms: percentile(0.99), maxMs: Double(latencies.last ?? 0) / 1e6, seconds: seconds)
    }
}
