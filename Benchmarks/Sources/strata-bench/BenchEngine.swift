import ArgumentParser
import Foundation
import Strata

/// `strata-bench engine [--json]`: the engine as a viewer uses it — a zoom trace at tolerance 0
/// and 0.2, a burst of identical requests, and the facade's cost over the bare tiers — in one
/// process.
struct BenchEngineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "engine",
        abstract: "The engine: zoom trace by tolerance, request coalescing, facade overhead (release build).",
        discussion: """
            Photos: --photos distinct JPEGs derived from Fixtures/jpeg/path-2560x1600.jpg and \
            fallenleaf-2048x1280-420.jpg (seeded crops of six aspects, rescaled with Lanczos to a \
            long side of 1024–2048 px, encoded with ImageEncoder at quality 80–92), made once \
            into --workdir/photos and reused; the 2560×1600 fixture is copied there too. \
            Zoom trace (seeded): a viewer with a 1024×640 window flips through the album, each \
            photo --visits times, back and forth over about 8 neighbouring photos at a time; every \
            visit opens at the window's box (fit) and takes --steps zoom steps, each changing the \
            box by 2–5 % in the current direction, turning with probability 0.15 and at the zoom \
            limits (0.25× to 2× the window; a box larger than the photo is served by the whole \
            original). The trace runs on fresh engines with the tiers memory (ImageMemoryTier, \
            --memory-mb) + source (DirectorySource over the photos) — no disk tier, no image tables — \
            at tolerance 0 and 0.2, twice. As a viewer replays it (the `zoom` rows): one request \
            every --frame-ms (sent on schedule, answered or not), on each flip the next --prefetch \
            album photos prefetched at the window's box, and the engine's renderAhead set to \
            --render-ahead. Closed loop (the `zoom_closed_loop` rows; --no-closed-loop skips it): \
            one request at a time, no prefetch, no render-ahead. Hits per tier count the trace's \
            requests; renders count every source render (prefetches and render-aheads too); \
            latency is that of ImageCache.image(for:) as the caller sees it, from the moment the \
            request is made. Burst: 100 identical concurrent \
            image(for:) calls on a fresh engine (memory + source); decodes = \
            statistics.engine.sourceDecodes. Overhead (best of --rounds interleaved rounds, the \
            order alternating): a memory hit through image(for:) and cachedImage(for:) against \
            ImageMemoryTier.entry(forKey:matching:) of the same key and box (the 2560×1600 photo \
            at 512×512); a disk hit through image(for:) of an engine with a disk tier and no \
            memory tier (every request is a mapped disk hit of the 2048×1280 BGRA variant, made \
            through the engine from the 2560×1600 photo for a 2048×2048 box) against \
            DiskTier.hit(forKey:matching:) of the same file, touching one byte of every page of \
            the pixels in both, as `strata-bench disk` does. The text form adds the floor of a \
            disk hit that hops to other threads: an empty BlockingPool job awaited, then the \
            bare hit.
            """
    )

    @Flag(help: "Print one JSON object instead of tables.")
    var json = false

    @Option(help: "Distinct photos in the zoom trace.")
    var photos = 200

    @Option(help: "Visits per photo in the zoom trace.")
    var visits = 4

    @Option(help: "Zoom steps (requests) per visit.")
    var steps = 10

    @Option(help: "The viewer's frame: time between two of its requests, in ms.")
    var frameMs = 16.7

    @Option(help: "Album neighbours the viewer prefetches at the window's box on each flip (0: none).")
    var prefetch = 8

    @Option(help: "The viewer's engine's renderAhead: a share of the tolerance, or `off`.")
    var renderAhead = "0.5"

    @Flag(help: "Skip the closed-loop replay of the zoom trace.")
    var noClosedLoop = false

    @Option(help: "The memory tier's cost limit in MiB (the zoom trace's engines).")
    var memoryMb = 256

    @Option(help: "Interleaved rounds of the overhead measurements (the best is kept).")
    var rounds = 15

    @Option(help: "Working directory for the derived photos (reused) and the disk tier (removed).")
    var workdir = NSTemporaryDirectory() + "strata-bench-engine"

    @Option(help: "Fixtures directory (the source photos).")
    var fixtures = "Fixtures"

    @Option(help: .hidden)
    var profile: String?

    @Option(help: .hidden)
    var profileCount = 100_000

    func validate() throws {
        guard photos >= 1, visits >= 1, steps >= 1 else { throw ValidationError("--photos, --visits and --steps must be ≥ 1") }
        guard memoryMb >= 1 else { throw ValidationError("--memory-mb must be ≥ 1") }
        guard rounds >= 1 else { throw ValidationError("--rounds must be ≥ 1") }
        guard frameMs > 0, frameMs.isFinite else { throw ValidationError("--frame-ms must be > 0") }
        guard prefetch >= 0 else { throw ValidationError("--prefetch must be ≥ 0") }
        _ = try renderAheadShare()
    }

    func renderAheadShare() throws -> Double? {
        if renderAhead.lowercased() == "off" { return nil }
        guard let share = Double(renderAhead), (0...1).contains(share) else {
            throw ValidationError("--render-ahead must be a share within 0...1 or `off`, got \(renderAhead)")
        }
        return share
    }

    func run() async throws {
        #if DEBUG
        if !json { print("warning: this is a debug build; benchmark with `swift build -c release`") }
        #endif
        let photoDirectory = workdir + "/photos"
        if let profile {
            // Only one path, N times, for callgrind/strace: memory, cached, bare-memory, disk, bare-disk.
            _ = try EngineBench.ensurePhotos(count: 0, in: photoDirectory, fixtures: fixtures)
            try await EngineBench.profile(profile, count: profileCount, root: photoDirectory, scratch: workdir + "/disk-\(getpid())")
            return
        }
        let generated = try EngineBench.ensurePhotos(count: photos, in: photoDirectory, fixtures: fixtures)
        if !json && generated > 0 { print("derived \(generated) photos into \(photoDirectory)") }
        let keys = (0..<photos).map { EngineBench.photoName($0) }
        let trace = EngineBench.zoomTrace(photos: photos, visits: visits, steps: steps, seed: 0x200D_2025)

        let viewer = EngineBench.Viewer(
            frameNanoseconds: UInt64(frameMs * 1e6), prefetch: prefetch, renderAhead: try renderAheadShare())
        var zoom: [ZoomResult] = []
        var closedLoop: [ZoomResult] = []
        for tolerance in [0.0, 0.2] {
            let result = try await EngineBench.runZoom(
                trace, keys: keys, tolerance: tolerance, root: photoDirectory, memoryBytes: memoryMb << 20, viewer: viewer)
            zoom.append(result)
            if !json { print("viewer " + result.progressLine) }
        }
        if !noClosedLoop {
            for tolerance in [0.0, 0.2] {
                let result = try await EngineBench.runZoom(
                    trace, keys: keys, tolerance: tolerance, root: photoDirectory, memoryBytes: memoryMb << 20, viewer: nil)
                closedLoop.append(result)
                if !json { print("closed-loop " + result.progressLine) }
            }
        }
        let burst = try await EngineBench.runBurst(root: photoDirectory, key: keys[0])
        let overhead = try await EngineBench.runOverhead(
            root: photoDirectory, scratch: workdir + "/disk-\(getpid())", rounds: rounds)
        let report = EngineReport(
            zoom: zoom, closedLoop: closedLoop, viewer: viewer, burst: burst, overhead: overhead, photos: photos, visits: visits,
            steps: steps)
        print(json ? report.json : report.text)
    }
}

// MARK: - Results

struct ZoomResult {
    var tolerance: Double
    var requests: Int
    var sourceDecodes: Int
    var renderAheads: Int
    var memory: Int
    var disk: Int
    var table: Int
    var source: Int
    var p50Ms: Double
    var p99Ms: Double
    var maxMs: Double
    var seconds: Double

    var progressLine: String {
        String(
            format: "zoom trace at tolerance %.1f: %d requests, %d renders, %.1f s", tolerance, requests, sourceDecodes, seconds)
    }
}

struct BurstResult {
    var requests: Int
    var decodes: Int
    var coalesced: Int
    var memoryHits: Int
}

struct OverheadResult {
    var memoryHitNs: Double
    var cachedImageNs: Double
    var bareMemoryHitNs: Double
    var diskHitUs: Double
    var bareDiskHitUs: Double
    /// An empty BlockingPool job awaited, then the bare disk hit (text form only).
    var hopFloorUs: Double
    var diskBytes: Int
    var diskStorage: String
}

struct EngineReport {
    /// As the viewer replays the trace, then closed-loop (empty when skipped).
    var zoom: [ZoomResult]
    var closedLoop: [ZoomResult]
    var viewer: EngineBench.Viewer
    var burst: BurstResult
    var overhead: OverheadResult
    var photos: Int
    var visits: Int
    var steps: Int

    static func number(_ value: Double, _ decimals: Int) -> String {
        let scale = pow(10, Double(decimals))
        let rounded = (value * scale).rounded() / scale
        return rounded == rounded.rounded() ? String(Int(rounded)) : String(rounded)
    }

    static func jsonRows(_ rows: [ZoomResult]) -> String {
        "["
            + rows.map { z in
                "{\"tolerance\":\(number(z.tolerance, 2)),\"requests\":\(z.requests),\"source_decodes\":\(z.sourceDecodes),"
                    + "\"render_aheads\":\(z.renderAheads),\"blocking_renders\":\(z.source),"
                    + "\"hits\":{\"memory\":\(z.memory),\"disk\":\(z.disk),\"table\":\(z.table)},"
                    + "\"p50_ms\":\(number(z.p50Ms, 4)),\"p99_ms\":\(number(z.p99Ms, 3))}"
            }.joined(separator: ",") + "]"
    }

    var json: String {
        let o = overhead
        let ahead = viewer.renderAhead.map { Self.number($0, 3) } ?? "null"
        return "{\"zoom\":\(Self.jsonRows(zoom)),\"zoom_closed_loop\":\(Self.jsonRows(closedLoop)),"
            + "\"viewer\":{\"frame_ms\":\(Self.number(Double(viewer.frameNanoseconds) / 1e6, 3)),\"prefetch\":\(viewer.prefetch),"
            + "\"render_ahead\":\(ahead)},"
            + "\"burst\":{\"requests\":\(burst.requests),\"decodes\":\(burst.decodes)},"
            + "\"overhead\":{\"memory_hit_ns\":\(Self.number(o.memoryHitNs, 1)),\"cached_image_ns\":\(Self.number(o.cachedImageNs, 1)),"
            + "\"bare_memory_hit_ns\":\(Self.number(o.bareMemoryHitNs, 1)),\"disk_hit_us\":\(Self.number(o.diskHitUs, 1)),"
            + "\"bare_disk_hit_us\":\(Self.number(o.bareDiskHitUs, 1))}}"
    }

    static func verdict(_ met: Bool) -> String { met ? "met" : "MISSED" }

    /// One replay's rows and, for a pair (tolerance 0, then 0.2), the two targets.
    static func zoomTable(_ zoom: [ZoomResult]) -> [String] {
        var lines = ["tolerance  requests  renders  ahead  memory  disk  table  source    p50_ms    p99_ms    max_ms"]
        for z in zoom {
            lines.append(
                String(
                    format: "%9.1f  %8d  %7d  %5d  %6d  %4d  %5d  %6d  %8.3f  %8.3f  %8.3f", z.tolerance, z.requests, z.sourceDecodes,
                    z.renderAheads, z.memory, z.disk, z.table, z.source, z.p50Ms, z.p99Ms, z.maxMs))
        }
        guard zoom.count == 2 else { return lines }
        let (exact, loose) = (zoom[0], zoom[1])
        let fewer = exact.sourceDecodes > 0 ? 1 - Double(loose.sourceDecodes) / Double(exact.sourceDecodes) : 0
        let p99Ratio = loose.p99Ms > 0 ? exact.p99Ms / loose.p99Ms : .infinity
        lines.append(
            String(
                format: "  target: ≥ 80 %% fewer renders at 0.2 than at 0:   %.1f %% fewer             %@", fewer * 100,
                verdict(fewer >= 0.8)))
        lines.append(
            String(
                format: "  target: p99 at 0.2 ≤ 1/5 of p99 at 0:           1/%.1f                    %@", p99Ratio,
                verdict(p99Ratio >= 5)))
        lines.append(
            String(
                format:
                    "  (at 0.2, %.2f %% of the trace's requests waited for a render: p99 is a render's latency whenever more than 1 %% do)",
                Double(loose.source) / Double(max(1, loose.requests)) * 100))
        return lines
    }

    var text: String {
        var lines: [String] = []
        let ahead = viewer.renderAhead.map { "renderAhead \($0)" } ?? "no render-ahead"
        lines.append("zoom trace: \(photos) photos × \(visits) visits × \(steps) steps; engine = memory tier + DirectorySource")
        lines.append(
            String(
                format: "as a viewer replays it: one request every %.1f ms, %d album neighbours prefetched on each flip, %@",
                Double(viewer.frameNanoseconds) / 1e6, viewer.prefetch, ahead))
        lines += Self.zoomTable(zoom)
        if !closedLoop.isEmpty {
            lines.append("")
            lines.append("closed loop: one request at a time, no prefetch, no render-ahead")
            lines += Self.zoomTable(closedLoop)
        }
        lines.append("")
        lines.append(
            "burst: \(burst.requests) identical concurrent requests: \(burst.decodes) render(s), \(burst.coalesced) coalesced, "
                + "\(burst.memoryHits) memory hits   target: 1 render   \(Self.verdict(burst.decodes == 1))")
        lines.append("")
        let o = overhead
        lines.append("overhead (best of interleaved rounds)      engine         bare   difference    target")
        lines.append(
            String(
                format: "memory hit, image(for:)               %9.1f ns  %9.1f ns  %+8.1f ns   ≤ +400 ns  %@", o.memoryHitNs,
                o.bareMemoryHitNs, o.memoryHitNs - o.bareMemoryHitNs, Self.verdict(o.memoryHitNs <= o.bareMemoryHitNs + 400)))
        lines.append(
            String(
                format: "memory hit, cachedImage(for:)         %9.1f ns  %9.1f ns  %+8.1f ns   ≤ +100 ns  %@", o.cachedImageNs,
                o.bareMemoryHitNs, o.cachedImageNs - o.bareMemoryHitNs, Self.verdict(o.cachedImageNs <= o.bareMemoryHitNs + 100)))
        lines.append(
            String(
                format: "disk hit, image(for:)                 %9.1f µs  %9.1f µs  ×%-7.3f      ≤ ×1.15    %@", o.diskHitUs,
                o.bareDiskHitUs, o.diskHitUs / o.bareDiskHitUs, Self.verdict(o.diskHitUs <= 1.15 * o.bareDiskHitUs)))
        lines.append(
            String(
                format: "  (%@, %d KiB, one byte of every page read; floor of any hop: an empty BlockingPool job awaited + the bare hit",
                o.diskStorage, o.diskBytes >> 10))
        lines.append(
            String(
                format: "   = %.1f µs, ×%.3f of bare; the engine's hit is %+.1f µs from that floor)", o.hopFloorUs,
                o.hopFloorUs / o.bareDiskHitUs, o.diskHitUs - o.hopFloorUs))
        return lines.joined(separator: "\n")
    }
}

// MARK: - The measurements

enum EngineBench {
    static let window = PixelSize(width: 1024, height: 640)
    static let flipWindow = 8.0
    static let zoomRange = 0.25...2.0
    static let largePhoto = "path-2560x1600.jpg"

    static func photoName(_ i: Int) -> String { String(format: "photo-%04d.jpg", i) }

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func unit(_ rng: inout SplitMix64) -> Double { Double(rng.next() >> 11) / Double(1 << 53) }

    // MARK: Photos

    /// Derives the missing photos (seeded, so reusing earlier ones is safe); returns how many it made.
    static func ensurePhotos(count: Int, in directory: String, fixtures: String) throws -> Int {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let large = directory + "/" + largePhoto
        if !FileManager.default.fileExists(atPath: large) {
            try FileManager.default.copyItem(atPath: fixtures + "/jpeg/" + largePhoto, toPath: large)
        }
        let missing = (0..<count).filter { !FileManager.default.fileExists(atPath: directory + "/" + photoName($0)) }
        guard !missing.isEmpty else { return 0 }
        var sources: [PixelImage] = []
        for name in ["jpeg/path-2560x1600.jpg", "jpeg/fallenleaf-2048x1280-420.jpg"] {
            let path = fixtures + "/" + name
            guard let bytes = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read \(path): run from the package root or pass --fixtures")
            }
            sources.append(try ImageDecoder().decode([UInt8](bytes)))
        }
        let resampler = Resampler()
        let aspects = [3.0 / 2, 4.0 / 3, 16.0 / 10, 1, 2.0 / 3, 3.0 / 4]
        for i in missing {
            var rng = SplitMix64(seed: 0xE_2025 &+ UInt64(i) &* 0x9E37)
            let source = sources[i % sources.count]
            let aspect = aspects[Int(rng.next() % UInt64(aspects.count))]
            // The largest crop of this aspect, then 60–100 % of it, anywhere in the photo.
            var cw = Double(source.width), ch = cw / aspect
            if ch > Double(source.height) {
                ch = Double(source.height)
                cw = ch * aspect
            }
            let share = 0.6 + 0.4 * unit(&rng)
            cw *= share
            ch *= share
            let x = unit(&rng) * (Double(source.width) - cw), y = unit(&rng) * (Double(source.height) - ch)
            let long = 1024 + Int(rng.next() % 1025)
            let size =
                aspect >= 1
                ? PixelSize(width: long, height: Int((Double(long) / aspect).rounded()))
                : PixelSize(width: Int((Double(long) * aspect).rounded()), height: long)
            let image = resampler.resample(source, region: SourceRect(x: x, y: y, width: cw, height: ch), to: size)
            let jpeg = try ImageEncoder.encode(image, as: .jpeg, quality: 80 + Int(rng.next() % 13))
            let path = directory + "/" + photoName(i)
            try Data(jpeg).write(to: URL(fileURLWithPath: path + ".tmp"))
            try FileManager.default.moveItem(atPath: path + ".tmp", toPath: path)
        }
        return missing.count
    }

    static func makeEngine(
        root: String, memory: ImageMemoryTier?, disk: DiskTier? = nil, tolerance: Double = SizeQuery.defaultTolerance,
        renderAhead: Double? = nil
    ) throws -> ImageCache {
        var options = ImageCache.Options()
        options.defaultTolerance = tolerance
        options.renderAhead = renderAhead
        return try ImageCache(memory: memory, disk: disk, source: try DirectorySource(root: root), options: options)
    }
}
