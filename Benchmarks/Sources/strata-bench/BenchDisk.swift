import ArgumentParser
import Foundation
import Strata

/// `strata-bench disk [--json]`: the disk tier's hit, miss, index and event costs, against
/// `pread` (the floor) and a full libjpeg-turbo decode (the conventional path), in one run.
struct BenchDiskCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disk",
        abstract: "Time disk-tier hits, index builds and inotify latency (build with -c release).",
        discussion: """
            hit_us_small/large: DiskTier.image(forKey:matching:) of a 256×160 / 2560×1600 BGRA \
            variant, touching one byte of every page of the pixels, then dropping the image \
            (munmap); checksum policy firstHit, after warm-up. pread_us_small/large: open + pread \
            of the whole file into a reused buffer + close (the floor). jpeg_decode_ms_large: \
            ImageDecoder().decode of the photo's JPEG (libjpeg-turbo, new image each time). \
            index_build_ms / index_bytes_per_entry: DiskTier.init over directories of 100 000 \
            and 1 000 000 correctly named empty files (created once under --fixtures-dir and \
            reused; removed at the end unless --keep-fixtures). event_latency_ms: rename(2) of \
            a complete file into the directory until DiskTier.contains sees it (median). \
            --misses N: only performs N tolerance misses after warm-up and exits, for \
            `strace -c -f`.
            """
    )

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    @Option(help: "Perform N tolerance misses after warm-up and exit (for strace -c).")
    var misses: Int?

    @Option(help: "Perform N hits of the small variant after warm-up and exit (for perf/strace).")
    var smallHits: Int?

    @Option(help: "The large photo (JPEG).")
    var photo = "Fixtures/jpeg/path-2560x1600.jpg"

    @Option(help: "Where the index fixtures (100k and 1M empty files) are created and reused.")
    var fixturesDir = NSTemporaryDirectory() + "strata-bench-disk-index"

    @Flag(help: "Keep the index fixtures for the next run (default: delete them at the end).")
    var keepFixtures = false

    @Option(help: "File counts for the index measurement (comma separated).")
    var indexCounts = "100000,1000000"

    @Option(help: "Repetitions for the hit and pread timings.")
    var runs = 400

    func run() throws {
        #if DEBUG
        if !json { print("warning: this is a debug build; benchmark with `swift build -c release`") }
        #endif
        let scratch = NSTemporaryDirectory() + "strata-bench-disk-\(getpid())"
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let cacheDir = scratch + "/cache"

        let jpeg = try [UInt8](Data(contentsOf: URL(fileURLWithPath: photo)))
        let large = try ImageDecoder().decode(jpeg)
        let small = Self.downsample(large, longSide: 256)
        var configuration = DiskTier.Configuration()
        configuration.byteLimit = 1 << 30
        do {
            let writer = try DiskTier(directory: cacheDir, configuration: configuration)
            try writer.storeSynchronously(large, forKey: "bench/large")
            try writer.storeSynchronously(small, forKey: "bench/small")
            writer.close()
        }
        let largeQuery = SizeQuery(box: large.size)
        let smallQuery = SizeQuery(box: small.size)

        if let misses {
            try missesOnly(count: misses, directory: cacheDir, scratch: scratch, configuration: configuration, query: largeQuery)
            return
        }

        if let smallHits {
            let tier = try DiskTier(directory: cacheDir, configuration: configuration)
            for _ in 0..<smallHits { try Self.touchHit(tier, key: "bench/small", query: smallQuery) }
            print("hits: \(tier.statistics.hits)")
            return
        }

        var results: [String: Any] = [:]
        var table: [(String, String)] = []
        func record(_ key: String, _ value: Double, _ unit: String) {
            results[key] = (value * 1000).rounded() / 1000
            table.append((key, String(format: "%.3f %@", value, unit)))
        }

        // Hits with the default configuration, and the alternatives the defaults were chosen from.
        let tier = try DiskTier(directory: cacheDir, configuration: configuration)
        let hitSmall = try Self.timeHits(tier, key: "bench/small", query: smallQuery, runs: runs * 5)
        let hitLarge = try Self.timeHits(tier, key: "bench/large", query: largeQuery, runs: runs)
        let smallFile = cacheDir + "/" + Self.fileName(in: cacheDir, width: small.width)
        let largeFile = cacheDir + "/" + Self.fileName(in: cacheDir, width: large.width)
        let preadSmall = try Self.timePread(smallFile, runs: runs * 5)
        let preadLarge = try Self.timePread(largeFile, runs: max(runs / 4, 25))
        let decodeLarge = try Self.median(runs: 15) {
            let image = try ImageDecoder().decode(jpeg)
            Self.sink &+= Int(image.pixelBytes(x: 0, y: 0)[0])
        }
        record("hit_us_small", hitSmall * 1e6, "µs")
        record("pread_us_small", preadSmall * 1e6, "µs")
        record("hit_us_large", hitLarge * 1e6, "µs")
        record("pread_us_large", preadLarge * 1e6, "µs")
        record("jpeg_decode_ms_large", decodeLarge * 1e3, "ms")
        record("ratio_hit_small_over_pread_small", hitSmall / preadSmall, "×")
        record("ratio_jpeg_decode_over_hit_large", decodeLarge / hitLarge, "×")
        tier.close()

        // Alternatives: small file mapped instead of read; large file read instead of mapped;
        // mapping without MAP_POPULATE; verifying the pixel checksum on every hit.
        var mapAll = configuration
        mapAll.mapThreshold = 0
        var readAll = configuration
        readAll.mapThreshold = Int.max
        var eager = configuration
        eager.populateMappings = true
        var verifyAll = configuration
        verifyAll.checksumPolicy = .everyHit
        for (label, alternative, key, query, n) in [
            ("hit_us_small_mmap", mapAll, "bench/small", smallQuery, runs * 5),
            (
                "hit_us_small_mmap_populate",
                {
                    var c = mapAll
                    c.populateMappings = true
                    return c
                }(), "bench/small", smallQuery, runs * 5
            ),
            ("hit_us_large_pread", readAll, "bench/large", largeQuery, max(runs / 4, 25)),
            ("hit_us_large_mmap_populate", eager, "bench/large", largeQuery, runs),
            ("hit_us_large_checksum_every_hit", verifyAll, "bench/large", largeQuery, max(runs / 4, 25)),
        ] {
            let t = try DiskTier(directory: cacheDir, configuration: alternative)
            record(label, try Self.timeHits(t, key: key, query: query, runs: n) * 1e6, "µs")
            t.close()
        }

        // Where mapping starts to beat reading: both paths across sizes (long side in px).
        var crossover: [String: [String: Double]] = [:]
        do {
            var readCfg = configuration
            readCfg.mapThreshold = Int.max
            var mapCfg = configuration
            mapCfg.mapThreshold = 0
            let writer = try DiskTier(directory: cacheDir, configuration: configuration)
            let sides = [128, 256, 384, 512, 768, 1024]
            for side in sides {
                try writer.storeSynchronously(Self.downsample(large, longSide: side), forKey: "bench/sweep/\(side)")
            }
            writer.close()
            let reader = try DiskTier(directory: cacheDir, configuration: readCfg)
            let mapper = try DiskTier(directory: cacheDir, configuration: mapCfg)
            for side in sides {
                let q = SizeQuery(box: PixelSize(width: side, height: side))
                let r = try Self.timeHits(reader, key: "bench/sweep/\(side)", query: q, runs: runs)
                let m = try Self.timeHits(mapper, key: "bench/sweep/\(side)", query: q, runs: runs)
                let bytes = Self.downsample(large, longSide: side).byteCount
                crossover["\(side)"] = [
                    "read_us": (r * 1e7).rounded() / 10, "mmap_us": (m * 1e7).rounded() / 10, "kib": Double(bytes / 1024),
                ]
                table.append(("hit_us read/mmap [\(side) px, \(bytes / 1024) KiB]", String(format: "%.1f / %.1f µs", r * 1e6, m * 1e6)))
            }
            reader.close()
            mapper.close()
        }
        results["hit_us_by_size"] = crossover

        // Misses: hash + index probe.
        do {
            let t = try DiskTier(directory: cacheDir, configuration: configuration)
            let missQuery = SizeQuery(box: PixelSize(width: 100, height: 100))
            let n = 200_000
            let start = Self.now()
            for _ in 0..<n where try t.image(forKey: "bench/large", matching: missQuery) != nil { Self.sink &+= 1 }
            record("miss_ns", Double(Self.now() - start) / Double(n), "ns")
            t.close()
        }

        // Event latency: rename a complete file into the directory, wait until the index has it.
        do {
            let t = try DiskTier(directory: cacheDir, configuration: configuration)
            var latencies: [Double] = []
            for i in 0..<41 {
                let key = "bench/event/\(i)"
                let name = DiskFileName(digest: ImageEntityID(hashing: key), variant: VariantDescriptor(size: small.size)).string
                let staged = scratch + "/staged-\(i)"
                try Data(DiskFileEncoder.encode(small, key: key, mode: .fit, sourceVersion: 0)).write(to: URL(fileURLWithPath: staged))
                let start = Self.now()
                try FileDescriptor.rename(path: staged, to: cacheDir + "/" + name)
                while !t.contains(key: key, matching: smallQuery) {
                    if Self.now() - start > 5_000_000_000 { throw ValidationError("event not seen within 5 s") }
                    sched_yield()
                }
                latencies.append(Double(Self.now() - start) / 1e6)
            }
            latencies.sort()
            record("event_latency_ms", latencies[latencies.count / 2], "ms")
            record("event_latency_ms_max", latencies.last!, "ms")
            t.close()
        }

        // Index builds from names alone.
        var buildMs: [String: Double] = [:]
        var bytesPerEntry: [String: Double] = [:]
        var readdirMs: [String: Double] = [:]
        for count in indexCounts.split(separator: ",").compactMap({ Int($0) }) {
            let dir = fixturesDir + "/\(count)"
            try Self.makeIndexFixture(dir, count: count, quiet: json)
            // The floor: the same getdents64 pass, counting names only.
            var floor = Double.infinity
            for _ in 0..<3 {
                let start = Self.now()
                let directory = try FileDescriptor(directory: dir)
                var names = 0
                try DirectoryScan.forEachName(in: directory) { _, _ in names += 1 }
                floor = min(floor, Double(Self.now() - start) / 1e6)
                Self.sink &+= names
            }
            var best = Double.infinity
            var perEntry = 0.0
            for _ in 0..<3 {
                let start = Self.now()
                let t = try DiskTier(directory: dir, configuration: configuration)
                let elapsed = Double(Self.now() - start) / 1e6
                let stats = t.statistics
                guard stats.entries == count else { throw ValidationError("indexed \(stats.entries) of \(count) files in \(dir)") }
                perEntry = Double(stats.indexMemoryBytes) / Double(stats.entries)
                best = min(best, elapsed)
                t.close()
            }
            buildMs["\(count)"] = (best * 1000).rounded() / 1000
            readdirMs["\(count)"] = (floor * 1000).rounded() / 1000
            table.append(("index_readdir_floor_ms[\(count)]", String(format: "%.1f ms (names only, best of 3)", floor)))
            bytesPerEntry["\(count)"] = (perEntry * 100).rounded() / 100
            table.append(("index_build_ms[\(count)]", String(format: "%.1f ms (best of 3, warm dentries)", best)))
            table.append(("index_bytes_per_entry[\(count)]", String(format: "%.1f B", perEntry)))
            if !keepFixtures { try? FileManager.default.removeItem(atPath: dir) }
        }
        if !keepFixtures { try? FileManager.default.removeItem(atPath: fixturesDir) }
        results["index_build_ms"] = buildMs
        results["index_bytes_per_entry"] = bytesPerEntry
        results["index_readdir_floor_ms"] = readdirMs

        if json {
            let data = try JSONSerialization.data(withJSONObject: results, options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            for (key, value) in table { print(key.padding(toLength: 40, withPad: " ", startingAt: 0) + value) }
            if Self.sink == 42 { print("") }
        }
    }

    // MARK: Pieces

    nonisolated(unsafe) static var sink = 0

    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Median seconds of `runs` calls.
    static func median(runs: Int, _ body: () throws -> Void) throws -> Double {
        var samples: [Double] = []
        samples.reserveCapacity(runs)
        for _ in 0..<runs {
            let start = now()
            try body()
            samples.append(Double(now() - start) / 1e9)
        }
        samples.sort()
        return samples[samples.count / 2]
    }

    /// A hit, one byte read from every page of the pixels, and the image dropped.
    static func timeHits(_ tier: DiskTier, key: String, query: SizeQuery, runs: Int) throws -> Double {
        for _ in 0..<10 { try touchHit(tier, key: key, query: query) }  // warm-up (first hit verifies)
        return try median(runs: runs) { try touchHit(tier, key: key, query: query) }
    }

    static func touchHit(_ tier: DiskTier, key: String, query: SizeQuery) throws {
        guard let image = try tier.image(forKey: key, matching: query) else {
            throw ValidationError("expected a hit for \(key)")
        }
        sink &+= EngineBench.touch(image)
    }

    static func timePread(_ path: String, runs: Int) throws -> Double {
        let size = (try FileManager.default.attributesOfItem(atPath: path)[.size] as! NSNumber).intValue
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64)
        defer { buffer.deallocate() }
        memset(buffer, 0, size)
        func once() throws {
            // open + one pread of the whole file + close, like a hit's syscalls.
            let file = try FileDescriptor(open: path, flags: O_RDONLY)
            let done = try file.read(into: UnsafeMutableRawBufferPointer(start: buffer, count: size), at: 0)
            guard done == size else { throw ValidationError("read \(done) of \(size) bytes of \(path)") }
            sink &+= Int(buffer.load(fromByteOffset: size - 1, as: UInt8.self))
        }
        for _ in 0..<5 { try once() }
        return try median(runs: runs, once)
    }

    static func fileName(in directory: String, width: Int) -> String {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.first { $0.contains("-\(width)x") }!
    }

    /// A nearest-neighbour copy of `image` with its long side `longSide` (timing material only).
    static func downsample(_ image: PixelImage, longSide: Int) -> PixelImage {
        let scale = Double(longSide) / Double(max(image.width, image.height))
        let w = max(1, Int((Double(image.width) * scale).rounded())), h = max(1, Int((Double(image.height) * scale).rounded()))
        var out = PixelImage(width: w, height: h, style: image.style)
        let bpp = image.style.bytesPerPixel, outStride = out.bytesPerRow
        image.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                for y in 0..<h {
                    let sy = min(image.height - 1, Int(Double(y) / scale))
                    for x in 0..<w {
                        let sx = min(image.width - 1, Int(Double(x) / scale))
                        for b in 0..<bpp { dst[y * outStride + x * bpp + b] = src[sy * image.bytesPerRow + sx * bpp + b] }
                    }
                }
            }
        }
        return out
    }

    /// `count` empty files with valid names (no content needed: the index reads names only).
    static func makeIndexFixture(_ dir: String, count: Int, quiet: Bool) throws {
        let marker = dir + "/.complete"
        if FileManager.default.fileExists(atPath: marker) { return }
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        if !quiet { print("creating \(count) files in \(dir) (once; reused with --keep-fixtures)…") }
        let directory = try FileDescriptor(directory: dir)
        let sizes = [PixelSize(width: 256, height: 160), PixelSize(width: 1024, height: 640), PixelSize(width: 2048, height: 1280)]
        for i in 0..<count {
            // About three variants per key, as a thumbnail service would keep.
            let name = DiskFileName(digest: ImageEntityID(hashing: "fixture/\(i / 3)"), variant: VariantDescriptor(size: sizes[i % 3]))
                .string
            _ = try FileDescriptor(openAt: directory, name: name, flags: O_CREAT | O_WRONLY)  // closed at once
        }
        _ = try FileDescriptor(open: marker, flags: O_CREAT | O_WRONLY)
    }

    /// Warm-up, then `count` tolerance misses (an existing key at a far size, and an absent key), then exit.
    func missesOnly(count: Int, directory: String, scratch: String, configuration: DiskTier.Configuration, query: SizeQuery) throws {
        let tier = try DiskTier(directory: directory, configuration: configuration)
        let far = SizeQuery(box: PixelSize(width: query.box.width / 4, height: query.box.height / 4))
        for _ in 0..<100 {
            _ = try tier.image(forKey: "bench/large", matching: far)
            _ = try tier.image(forKey: "bench/absent", matching: query)
        }
        var served = 0
        for i in 0..<count {
            if try tier.image(forKey: i & 1 == 0 ? "bench/large" : "bench/absent", matching: i & 1 == 0 ? far : query) != nil {
                served += 1
            }
        }
        let stats = tier.statistics
        print("misses: \(stats.misses) (\(count) timed after 200 warm-up), hits: \(stats.hits + served)")
        // Then exit at once: closing the tier and deleting the scratch files add a constant
        // handful of calls, independent of N.
        tier.close()  // else its watcher recreates the directory we delete
        try? FileManager.default.removeItem(atPath: scratch)
        fflush(nil)
        _exit(0)
    }
}
