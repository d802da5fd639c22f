import ArgumentParser
import Foundation
import Strata

/// `strata-bench scroll [--json]`: FastImageCache's scrolling demo on Linux.
///
/// A list of `--photos` distinct JPEG photos shown 4 per row, 12 rows visible, scrolled top to
/// bottom at `--rows-per-second` at 60 frames per second. Every cell shows a 100×100 and a
/// 50×50 thumbnail (fill). Per frame we time the work of obtaining and touching the thumbnails
/// of the cells that became visible:
/// - `conventional`: read the JPEG, decode it with shrink-on-load, Lanczos to 100×100, then
///   100×100 → 50×50, every time a cell becomes visible;
/// - `disk`: the disk tier (raw BGRA files, in-memory index) filled beforehand with both
///   thumbnails, then one exact-size lookup per thumbnail;
/// - `table`: two image tables (one family) filled beforehand from the same pipeline, then
///   one synchronous table retrieval per thumbnail.
/// Each method runs in its own child process (so resident memory is its own).
struct BenchScrollCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scroll",
        abstract: "Simulated scrolling list: conventional decode vs. image tables (build with -c release).",
        discussion: """
            Photos: --photos distinct JPEGs (640x480 to 1024x768 crops of the Fixtures photos, \
            encoded at quality 80-92 with Strata's encoder), generated once into --workdir/photos. \
            `disk` and `table` are filled beforehand in separate processes (an earlier session).
            """
    )

    @Flag(help: "Print one JSON object.")
    var json = false

    @Option(help: "Distinct photos in the list.")
    var photos = 2000

    @Option(help: "Scrolling speed in rows per second (at 60 frames per second).")
    var rowsPerSecond = 30.0

    @Option(help: "Working directory for the generated photos and the tables.")
    var workdir = "/tmp/strata-bench-scroll"

    @Option(help: "Fixtures directory (the source photos).")
    var fixtures = "Fixtures"

    @Option(help: .hidden)
    var childMethod: String?

    static let columns = 4
    static let visibleRows = 12
    static let budgetMs = 1000.0 / 60.0

    struct MethodResult: Codable {
        var method: String
        var frame_p50_ms: Double
        var frame_p99_ms: Double
        var frames_over_budget: Int
        var rss_mb: Double
        // Not part of the JSON output:
        var frames: Int = 0
        var frame_max_ms: Double = 0
        var fill_s: Double = 0
        var misses: Int = 0
        var rss_anon_mb: Double?
        var rss_file_mb: Double?
    }

    func validate() throws {
        guard photos >= Self.columns * (Self.visibleRows + 1), photos % Self.columns == 0 else {
            throw ValidationError("--photos must be a multiple of 4 and at least 52")
        }
        guard rowsPerSecond > 0 && rowsPerSecond <= 600 else { throw ValidationError("--rows-per-second must be in (0, 600]") }
    }

    func run() throws {
        switch childMethod {
        case "conventional", "disk", "table": return try emit(runScroll(method: childMethod!))
        case "hits": return try emit(measureHits())
        case "fill": return try emit(fillTables())
        case "fill-disk": return try emit(fillDisk())
        case nil: break
        default: throw ValidationError("unknown --child-method")
        }
        #if DEBUG
        if !json { print("warning: this is a debug build; benchmark with `swift build -c release`") }
        #endif
        let generated = try ensurePhotos()
        var fill: MethodResult?, fillDisk: MethodResult?
        if !json && generated > 0 { print("generated \(generated) photos in \(workdir)/photos") }
        var methods: [MethodResult] = []
        for method in ["conventional", "fill-disk", "disk", "fill", "table"] {
            let result = try JSONDecoder().decode(MethodResult.self, from: runChild(method))
            switch method {
            case "fill": fill = result
            case "fill-disk": fillDisk = result
            default: methods.append(result)
            }
        }
        var hits = try JSONDecoder().decode([String: Double].self, from: runChild("hits"))
        let touched = hits.filter { $0.key.hasSuffix("+touch") }
        for key in touched.keys { hits.removeValue(forKey: key) }
        if json {
            struct Row: Encodable {
                var method: String, frame_p50_ms: Double, frame_p99_ms: Double, frames_over_budget: Int, rss_mb: Double
            }
            struct Output: Encodable {
                var methods: [Row]
                var table_hit_ns: [String: Double]
            }
            let out = Output(
                methods: methods.map {
                    Row(
                        method: $0.method, frame_p50_ms: $0.frame_p50_ms, frame_p99_ms: $0.frame_p99_ms,
                        frames_over_budget: $0.frames_over_budget, rss_mb: $0.rss_mb)
                },
                table_hit_ns: hits)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            print(String(decoding: try encoder.encode(out), as: UTF8.self))
        } else {
            print(
                "\(photos) photos, \(Self.columns)x\(Self.visibleRows) visible, \(rowsPerSecond) rows/s at 60 fps, thumbnails 100x100 + 50x50 (fill)"
            )
            print("method        frames  p50_ms   p99_ms   max_ms  over_16.7ms  rss_mb (anon + file)  misses")
            for m in methods {
                print(
                    String(
                        format: "%-12@ %7d %7.3f %8.3f %8.3f %12d %7.1f (%5.1f + %5.1f) %7d", m.method as NSString, m.frames,
                        m.frame_p50_ms, m.frame_p99_ms, m.frame_max_ms, m.frames_over_budget, m.rss_mb,
                        m.rss_anon_mb ?? 0, m.rss_file_mb ?? 0, m.misses))
            }
            if let fillDisk {
                print(String(format: "disk fill (separate process, both sizes, one decode per photo): %.2f s", fillDisk.fill_s))
            }
            if let fill { print(String(format: "table fill (separate process, both formats, one decode per photo): %.2f s", fill.fill_s)) }
            for m in methods.dropFirst() where m.frame_p99_ms > 0 {
                print(String(format: "%@ p99 = 1/%.0f of conventional p99", m.method as NSString, methods[0].frame_p99_ms / m.frame_p99_ms))
            }
            print(
                "table_hit_ns (retrieve + release): 1000 entries \(Int(hits["1000"] ?? 0)) ns, 100000 entries \(Int(hits["100000"] ?? 0)) ns"
            )
            print(
                "  with a read of the first pixel:     1000 entries \(Int(touched["1000+touch"] ?? 0)) ns, 100000 entries \(Int(touched["100000+touch"] ?? 0)) ns"
            )
        }
    }

    // MARK: - Child processes

    private func runChild(_ method: String) throws -> Data {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
        process.arguments = [
            "scroll", "--child-method", method, "--photos", "\(photos)",
            "--rows-per-second", "\(rowsPerSecond)", "--workdir", workdir, "--fixtures", fixtures,
        ]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw ValidationError("the \(method) run failed (status \(process.terminationStatus))")
        }
        return data
    }

    private func emit<T: Encodable>(_ value: T) throws {
        print(String(decoding: try JSONEncoder().encode(value), as: UTF8.self))
    }

    // MARK: - Photos

    private var photoDirectory: String { workdir + "/photos" }
    private func photoPath(_ i: Int) -> String { photoDirectory + String(format: "/photo-%05d.jpg", i) }

    /// Generates the photos that are missing; returns how many it made.
    private func ensurePhotos() throws -> Int {
        try FileManager.default.createDirectory(atPath: photoDirectory, withIntermediateDirectories: true)
        let missing = (0..<photos).filter { !FileManager.default.fileExists(atPath: photoPath($0)) }
        guard !missing.isEmpty else { return 0 }
        let decoder = ImageDecoder()
        var sources: [PixelImage] = []
        for name in [
            "jpeg/path-2560x1600.jpg", "jpeg/fallenleaf-2048x1280-420.jpg", "jpeg/eveningglow-1024x640-progressive.jpg",
            "jpeg/coldripple-1024x640-orientation6.jpg",
        ] {
            let path = fixtures + "/" + name
            guard let bytes = FileManager.default.contents(atPath: path) else {
                throw ValidationError("cannot read \(path): run from the package root or pass --fixtures")
            }
            sources.append(try decoder.decode([UInt8](bytes)))
        }
        for i in missing {
            var rng = SplitMix64(state: UInt64(i) &* 7919 &+ 17)
            let src = sources[i % sources.count]
            let maxW = min(1024, src.width, src.height * 4 / 3)
            let w = min(maxW, 640 + Int(rng.next() % UInt64(385)))
            let h = min(src.height, w * 3 / 4)
            let x = Int(rng.next() % UInt64(src.width - w + 1))
            let y = Int(rng.next() % UInt64(src.height - h + 1))
            var crop = PixelImage(uninitializedWidth: w, height: h)
            let stride = crop.bytesPerRow
            crop.withUnsafeMutableBytes { dst in
                src.withUnsafeBytes { s in
                    for row in 0..<h {
                        dst.baseAddress!.advanced(by: row * stride)
                            .copyMemory(from: s.baseAddress! + (y + row) * src.bytesPerRow + x * 4, byteCount: w * 4)
                    }
                }
            }
            let jpeg = try ImageEncoder.encode(crop, as: .jpeg, quality: 80 + Int(rng.next() % 13))
            try Data(jpeg).write(to: URL(fileURLWithPath: photoPath(i) + ".tmp"))
            try FileManager.default.moveItem(atPath: photoPath(i) + ".tmp", toPath: photoPath(i))
        }
        return missing.count
    }

    // MARK: - Scrolling

    static let big = PixelSize(width: 100, height: 100)
    static let small = PixelSize(width: 50, height: 50)

    /// The conventional pipeline: decode with shrink-on-load, Lanczos to 100×100, then 50×50.
    static func thumbnails(_ bytes: [UInt8], renderer: ImageRenderer, resampler: Resampler) throws -> (PixelImage, PixelImage) {
        let thumb = try renderer.render(bytes, request: RenderRequest(box: big, mode: .fill))
        let tiny = resampler.resize(thumb, box: small, mode: .fill)
        return (thumb, tiny)
    }

    private func readPhoto(_ i: Int) throws -> [UInt8] {
        try FileDescriptor(open: photoPath(i), flags: O_RDONLY).readAll()
    }

    /// Reads one byte per cache line of every row, as a blit would touch them.
    @inline(never)
    static func touch(_ image: PixelImage) -> UInt64 {
        image.withUnsafeBytes { raw in
            var sum: UInt64 = 0
            var i = 0
            while i < raw.count {
                sum &+= UInt64(raw[i])
                i += 64
            }
            return sum
        }
    }

    private func runScroll(method: String) throws -> MethodResult {
        let renderer = ImageRenderer()
        let resampler = Resampler()
        // Tables and the disk directory were filled by another process (`fill`, `fill-disk`),
        // as by an earlier session.
        var lookup: (Int) throws -> (PixelImage, PixelImage)? = { _ in nil }
        if method == "table" {
            let cache = try ImageTableCache(directory: workdir + "/tables", formats: tableFormats)
            let entities = (0..<photos).map { i in scrollEntity(i) }
            lookup = { cell in
                guard let a = cache.cachedImage(for: entities[cell], formatName: "thumb100"),
                    let b = cache.cachedImage(for: entities[cell], formatName: "thumb50")
                else { return nil }
                return (a, b)
            }
        } else if method == "disk" {
            let disk = try DiskTier(directory: workdir + "/disk")
            let keys = (0..<photos).map { photoPath($0) }
            let big = SizeQuery(box: Self.big, mode: .fill, tolerance: 0), small = SizeQuery(box: Self.small, mode: .fill, tolerance: 0)
            lookup = { cell in
                guard let a = try disk.image(forKey: keys[cell], matching: big),
                    let b = try disk.image(forKey: keys[cell], matching: small)
                else { return nil }
                return (a, b)
            }
        }
        let rowsPerFrame = rowsPerSecond / 60
        let totalRows = photos / Self.columns
        let lastTop = Double(totalRows - Self.visibleRows)
        var visible: [Int: (PixelImage, PixelImage)] = [:]
        var frameMs: [Double] = []
        var misses = 0
        var sink: UInt64 = 0
        var frame = 0
        while true {
            let top = min(lastTop, Double(frame) * rowsPerFrame)
            let firstRow = Int(top)
            let lastRow = min(totalRows - 1, Int((top + Double(Self.visibleRows)).rounded(.up)) - (top == top.rounded() ? 1 : 0))
            let cells = Set((firstRow * Self.columns)..<((lastRow + 1) * Self.columns))
            let t0 = DispatchTime.now().uptimeNanoseconds
            for gone in visible.keys where !cells.contains(gone) { visible.removeValue(forKey: gone) }
            for cell in cells where visible[cell] == nil {
                let pair: (PixelImage, PixelImage)
                if let found = try lookup(cell) {
                    pair = found
                } else {
                    if method != "conventional" { misses += 1 }
                    pair = try Self.thumbnails(try readPhoto(cell), renderer: renderer, resampler: resampler)
                }
                sink &+= Self.touch(pair.0) &+ Self.touch(pair.1)
                visible[cell] = pair
            }
            frameMs.append(Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e6)
            if top >= lastTop { break }
            frame += 1
        }
        if sink == 42 { print("") }  // keep the touches
        let sorted = frameMs.sorted()
        func percentile(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)] }
        return MethodResult(
            method: method, frame_p50_ms: percentile(0.50),
            frame_p99_ms: percentile(0.99), frames_over_budget: frameMs.filter { $0 > Self.budgetMs }.count,
            rss_mb: residentMegabytes(), frames: frameMs.count, frame_max_ms: sorted.last ?? 0,
            misses: misses, rss_anon_mb: residentMegabytes("RssAnon:"), rss_file_mb: residentMegabytes("RssFile:"))
    }

    private var tableFormats: [ImageTableFormat] {
        [
            ImageTableFormat(name: "thumb100", family: "thumbs", size: Self.big, mode: .fill, maximumCount: photos),
            ImageTableFormat(name: "thumb50", family: "thumbs", size: Self.small, mode: .fill, maximumCount: photos),
        ]
    }

    /// Fills both formats of the family from one decode per photo (the same pipeline as
    /// `conventional`, drawing straight into the table slots) in fresh tables.
    private func fillTables() throws -> MethodResult {
        let dir = workdir + "/tables"
        try? FileManager.default.removeItem(atPath: dir)
        let cache = try ImageTableCache(directory: dir, formats: tableFormats)
        let renderer = ImageRenderer()
        let t0 = DispatchTime.now().uptimeNanoseconds
        for i in 0..<photos {
            let entity = scrollEntity(i)
            let source = try fillSource(entity, renderer: renderer)
            for format in tableFormats {
                try cache.table(named: format.name).store(entity.id, sourceVersion: 1) { canvas in
                    try entity.process(source, &canvas)
                }
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        return MethodResult(
            method: "fill", frame_p50_ms: 0, frame_p99_ms: 0, frames_over_budget: 0, rss_mb: residentMegabytes(),
            fill_s: seconds)
    }

    /// Stores both thumbnails of every photo in a fresh disk-tier directory (same pipeline).
    private func fillDisk() throws -> MethodResult {
        let dir = workdir + "/disk"
        try? FileManager.default.removeItem(atPath: dir)
        var configuration = DiskTier.Configuration()
        configuration.durable = false
        let disk = try DiskTier(directory: dir, configuration: configuration)
        let renderer = ImageRenderer()
        let resampler = Resampler()
        let t0 = DispatchTime.now().uptimeNanoseconds
        for i in 0..<photos {
            let (big, small) = try Self.thumbnails(try readPhoto(i), renderer: renderer, resampler: resampler)
            try disk.storeSynchronously(big, forKey: photoPath(i), mode: .fill)
            try disk.storeSynchronously(small, forKey: photoPath(i), mode: .fill)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - t0) / 1e9
        disk.close()
        return MethodResult(
            method: "fill-disk", frame_p50_ms: 0, frame_p99_ms: 0, frames_over_budget: 0, rss_mb: residentMegabytes(),
            fill_s: seconds)
    }

    /// The entity of photo `i`: its source is the JPEG decoded with shrink-on-load for the
    /// largest format; processing resamples (fill) straight into the slot.
    private func scrollEntity(_ i: Int) -> ImageTableEntity {
        let path = photoPath(i)
        return ImageTableEntity(
            id: ImageEntityID(hashing: path), sourceVersion: 1,
            source: ImageTableSource(description: path) { largest in
                let renderer = ImageRenderer()
                let bytes = try FileDescriptor(open: path, flags: O_RDONLY).readAll()
                let header = try renderer.decoder.readHeader(bytes)
                let minimum = renderer.plan(for: header, request: RenderRequest(box: largest, mode: .fill)).minimumDecode
                return try renderer.decoder.decode(bytes, minimumSize: minimum)
            },
            process: { source, canvas in
                let plan = SizingPlan(source: source.size, box: canvas.format.size, mode: .fill, allowUpscale: true)
                Resampler().resample(source, region: plan.sourceRect, into: &canvas.image)
            })
    }

    /// The same source as the entity's, with the bench's own renderer (no async hop).
    private func fillSource(_ entity: ImageTableEntity, renderer: ImageRenderer) throws -> PixelImage {
        let bytes = try FileDescriptor(open: entity.source.description, flags: O_RDONLY).readAll()
        let header = try renderer.decoder.readHeader(bytes)
        let minimum = renderer.plan(for: header, request: RenderRequest(box: Self.big, mode: .fill)).minimumDecode
        return try renderer.decoder.decode(bytes, minimumSize: minimum)
    }

    // MARK: - Table hits

    /// Nanoseconds per synchronous retrieval (lookup, trailer check, pin, image, touch of one
    /// byte, release) from a warm table of N 50×50 entries, entities in random order.
    private func measureHits() throws -> [String: Double] {
        var result: [String: Double] = [:]
        for n in [1000, 100_000] {
            let dir = workdir + "/hits-\(n)"
            try? FileManager.default.removeItem(atPath: dir)
            let table = try ImageTable(
                directory: dir,
                format: ImageTableFormat(
                    name: "hits", family: "hits", size: Self.small, mode: .fill, maximumCount: n))
            let ids = (0..<n).map { ImageEntityID(high: 0x6869_7473, low: UInt64($0)) }
            for (i, id) in ids.enumerated() {
                try table.store(id, sourceVersion: 1) { canvas in
                    canvas.image.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: i)) }
                }
            }
            var rng = SplitMix64(state: 99)
            var order = ids
            for i in stride(from: order.count - 1, to: 0, by: -1) { order.swapAt(i, Int(rng.next() % UInt64(i + 1))) }
            var sink: UInt64 = 0
            for id in order { if let image = table.image(for: id, sourceVersion: 1) { sink &+= UInt64(image.pixelBytes(x: 0, y: 0)[0]) } }
            let rounds = max(5, 1_000_000 / n)
            var perHit: [Double] = [], perHitTouched: [Double] = []
            for _ in 0..<rounds {
                // Retrieval only (the image is returned and released; no pixel is read) ...
                var hits = 0
                let t0 = DispatchTime.now().uptimeNanoseconds
                for id in order {
                    if let image = table.image(for: id, sourceVersion: 1) {
                        sink &+= UInt64(image.width)
                        hits += 1
                    }
                }
                let t1 = DispatchTime.now().uptimeNanoseconds
                // ... and retrieval plus reading the first pixel (a consumer's first touch).
                for id in order {
                    if let image = table.image(for: id, sourceVersion: 1) {
                        sink &+= image.withUnsafeBytes { UInt64($0[0]) }
                        hits += 1
                    }
                }
                let t2 = DispatchTime.now().uptimeNanoseconds
                guard hits == 2 * n else { throw ValidationError("table_hit_ns: only \(hits) of \(2 * n) retrievals were hits") }
                perHit.append(Double(t1 - t0) / Double(n))
                perHitTouched.append(Double(t2 - t1) / Double(n))
            }
            if sink == 42 { print("") }
            result["\(n)"] = median(perHit).rounded()
            result["\(n)+touch"] = median(perHitTouched).rounded()
            try? FileManager.default.removeItem(atPath: dir)
        }
        return result
    }
}

/// Resident set size of this process in megabytes (`VmRSS`, or another /proc/self/status field:
/// `RssAnon` is heap, `RssFile` clean file pages such as touched table entries).
func residentMegabytes(_ field: String = "VmRSS:") -> Double {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix(field) {
        let kb = line.split(separator: " ").compactMap { Double($0) }.first ?? 0
        return (kb / 1024 * 10).rounded() / 10
    }
    return 0
}
