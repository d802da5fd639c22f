import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata

/// Originals whose every pixel is their key's colour (opaque, so that resampling keeps it within
/// a rounding step): any image the engine returns can be checked against the key it was asked
/// for. Keys `s/0`…`s/<count-1>` have varied sizes and aspects; any other key is missing.
final class KeyColourSource: ImageSource, Sendable {
    let originals: [String: [UInt8]]
    let fetches = Atomic<Int>(0)

    static func colour(_ n: Int) -> (b: UInt8, g: UInt8, r: UInt8) {
        (UInt8(16 + (n % 8) * 32), UInt8(16 + (n / 8 % 8) * 32), 0x80)
    }

    init(count: Int) throws {
        var originals: [String: [UInt8]] = [:]
        for n in 0..<count {
            var image = PixelImage(width: 40 + n * 37 % 260, height: 30 + n * 53 % 190)
            let (b, g, r) = Self.colour(n)
            image.withUnsafeMutableBytes { raw in
                for i in stride(from: 0, to: raw.count, by: 4) {
                    raw[i] = b
                    raw[i + 1] = g
                    raw[i + 2] = r
                    raw[i + 3] = 255
                }
            }
            originals["s/\(n)"] = try ImageEncoder.encode(image, as: .png)
        }
        self.originals = originals
    }

    func fetch(key: String) async throws(SourceError) -> SourceData {
        fetches.add(1, ordering: .relaxed)
        guard let bytes = originals[key] else { throw SourceError(key: key, reason: .notFound) }
        return SourceData(bytes: bytes, version: "v1")
    }

    /// Whether every visible pixel of `image` is key `n`'s colour (±2 per channel).
    static func isKeyColour(_ image: PixelImage, n: Int) -> Bool {
        guard image.width >= 1, image.height >= 1, image.style == .bgra32Premultiplied else { return false }
        let (b, g, r) = colour(n)
        func near(_ a: UInt8, _ e: UInt8) -> Bool { abs(Int(a) - Int(e)) <= 2 }
        return image.withUnsafeBytes { raw in
            for y in 0..<image.height {
                let row = y * image.bytesPerRow
                for x in 0..<image.width {
                    let p = row + x * 4
                    guard near(raw[p], b), near(raw[p + 1], g), near(raw[p + 2], r), raw[p + 3] == 255 else { return false }
                }
            }
            return true
        }
    }
}

/// Many tasks against one engine (memory, disk, tables, source) for a bounded time: mixed
/// requests (fit, fill, exact sizes, table formats), cancellations, prefetches moved between
/// lanes, removals, memory reconfigurations, missing keys and render-aheads. Every image returned must be its
/// key's colour; every error must be the expected one.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct EngineStressTests {
    static let seconds = Double(getenv("STRATA_STRESS_SECONDS").flatMap { String(cString: $0) }.flatMap { Double($0) } ?? 8)
    static let keys = 24

    struct Tally {
        var served = 0, wrong = 0, cancelled = 0, missing = 0, unexpected: [String] = []
        var removals = 0, reconfigurations = 0, prefetches = 0, memoryHits = 0
    }

    @Test func mixedRequestsCancellationsRemovalsAndReconfigurationsAlwaysServeTheRightImage() async throws {
        let scratch = ScratchDirectory()
        let source = try KeyColourSource(count: Self.keys)
        let memory = ImageMemoryTier()
        var small = memory.configuration
        small.costLimit = 256 << 10
        try memory.reconfigure(small)
        let disk = try DiskTier(directory: scratch.path + "/disk", configuration: quietConfiguration { $0.byteLimit = 4 << 20 })
        // Render-aheads may still hold the engine when the test returns: close the tier (its
        // threads joined) while its directory still exists, not whenever the engine goes.
        defer {
            disk.close()
            withExtendedLifetime(scratch) {}
        }
        let format = ImageTableFormat(name: "square", family: "stress", size: PixelSize(width: 48, height: 48), maximumCount: 16)
        let tables = try ImageTableCache(directory: scratch.path + "/tables", formats: [format])
        var options = ImageCache.Options()
        options.renderAhead = 0.5  // far hits render ahead in the background, beside everything else
        let cache = try ImageCache(memory: memory, disk: disk, tables: tables, source: source, options: options)
        let tally = Lock(Tally())
        let deadline = ContinuousClock.now + .milliseconds(Int(Self.seconds * 1000))

        let check: @Sendable (Result<CachedImage, ImageCacheError>, Int) -> Void = { result, n in
            tally.withLock { t in
                switch result {
                case .success(let served):
                    t.served += 1
                    if !KeyColourSource.isKeyColour(served.image, n: n) { t.wrong += 1 }
                case .failure(.cancelled):
                    t.cancelled += 1
                case .failure(let error):
                    t.unexpected.append("s/\(n): \(error)")
                }
            }
        }

        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var rng = SplitMix64(seed: UInt64(worker) + 1)
                    var step = 0
                    // Each worker first runs every kind of operation once (so all kinds run
                    // however slow the machine or sanitizer), then random ones until the deadline.
                    while step < 20 || ContinuousClock.now < deadline {
                        let kind = step < 20 ? UInt64(step) : rng.next() % 20
                        step += 1
                        let n = Int(rng.next() % UInt64(Self.keys))
                        let key = CacheKey("s/\(n)")
                        let side = 8 + Int(rng.next() % 200)
                        let box = PixelSize(width: side, height: 8 + Int(rng.next() % 200))
                        let mode: ContentMode = rng.next() % 3 == 0 ? .fill : .fit
                        let request: ImageRequest
                        if rng.next() % 6 == 0 {
                            request = ImageRequest(key: key, box: PixelSize(width: 48, height: 48), mode: .fill)  // the table format
                        } else {
                            request = ImageRequest(key: key, box: box, mode: mode, exactSize: rng.next() % 4 == 0)
                        }
                        switch kind {
                        case 0..<10:
                            do throws(ImageCacheError) {
                                check(.success(try await cache.image(for: request)), n)
                            } catch {
                                check(.failure(error), n)
                            }
                        case 10..<12:
                            // Cancelled at once or a little later.
                            let task = Task { () throws(ImageCacheError) -> CachedImage in try await cache.image(for: request) }
                            if rng.next() % 2 == 0 { await Task.yield() }
                            task.cancel()
                            switch await task.result {
                            case .success(let served): check(.success(served), n)
                            case .failure(let error as ImageCacheError): check(.failure(error), n)
                            case .failure(let error): tally.withLock { $0.unexpected.append("s/\(n): \(error)") }
                            }
                        case 12..<14:
                            let tasks = cache.prefetch([request])
                            if rng.next() % 2 == 0 { cache.prioritize(tasks[0]) } else { cache.deprioritize(tasks[0]) }
                            if rng.next() % 4 == 0 { tasks[0].cancel() }
                            tally.withLock { $0.prefetches += 1 }
                            do { check(.success(try await tasks[0].value), n) } catch let error as ImageCacheError {
                                check(.failure(error), n)
                            } catch {
                                tally.withLock { $0.unexpected.append("prefetch s/\(n): \(error)") }
                            }
                        case 14:
                            await cache.remove(key: key)
                            tally.withLock { $0.removals += 1 }
                        case 15:
                            var configuration = memory.configuration
                            configuration.costLimit = [64 << 10, 256 << 10, 4 << 20][Int(rng.next() % 3)]
                            try? memory.reconfigure(configuration)
                            if rng.next() % 2 == 0 { memory.trim(toCost: Int(rng.next() % (128 << 10))) }
                            tally.withLock { $0.reconfigurations += 1 }
                        case 16:
                            if let hit = cache.cachedImage(for: request) {
                                check(.success(hit), n)
                                tally.withLock { $0.memoryHits += 1 }
                            }
                        default:
                            do throws(ImageCacheError) {
                                _ = try await cache.image(for: ImageRequest(key: CacheKey("missing/\(n)"), box: box))
                                tally.withLock { $0.unexpected.append("missing/\(n) was served") }
                            } catch {
                                if case .notFound = error {
                                    tally.withLock { $0.missing += 1 }
                                } else {
                                    tally.withLock { $0.unexpected.append("missing/\(n): \(error)") }
                                }
                            }
                        }
                    }
                }
            }
        }
        disk.flush()
        let t = tally.withLock { $0 }
        print(
            "engine stress: \(Self.seconds) s, \(t.served) served, \(t.wrong) wrong, \(t.cancelled) cancelled, \(t.missing) missing, "
                + "\(t.prefetches) prefetches, \(t.removals) removals, \(t.reconfigurations) reconfigurations, "
                + "\(t.memoryHits) memory hits, \(cache.statistics.engine.renderAheads) render-aheads, "
                + "\(source.fetches.load(ordering: .relaxed)) source fetches")
        #expect(t.wrong == 0, "images that are not their key's")
        #expect(t.unexpected.isEmpty, "unexpected errors: \(t.unexpected.prefix(5))")
        #expect(
            t.served >= 8 && t.missing >= 8 && t.removals >= 8 && t.reconfigurations >= 8 && t.prefetches >= 8,
            "every kind of operation ran")
        #expect(memory.indexIsConsistent())
        // The engine still serves every key right after the storm.
        for n in 0..<Self.keys {
            let served = try await cache.image(for: ImageRequest(key: CacheKey("s/\(n)"), box: PixelSize(width: 100, height: 100)))
            #expect(KeyColourSource.isKeyColour(served.image, n: n), "s/\(n) after the stress")
        }
    }
}
