import ArgumentParser
import Dispatch
import Foundation
import Strata
import StrataConfiguration
import Synchronization

/// `strata warm DIR --size WxH [--size WxH …] [--iiif] [--mode fit|fill] [--cache DIR]
/// [--in-flight N] [--config FILE] [--KEY VALUE …]`
struct WarmCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "warm",
        abstract: "Prefetch a directory of originals into the cache's tiers.",
        discussion: """
            Builds the engine from the configuration as `strata get` does (DIR is \
            source.directory, --cache is disk.path; --config FILE, STRATA_… variables and \
            configuration flags apply; see `strata config`) and requests every image under DIR \
            at every --size through the engine's prefetch lane (lanes.prefetch jobs at once, \
            paused while urgent work waits), at most --in-flight requests at a time. Keys are \
            paths relative to DIR, as `strata get KEY --source DIR` asks for them.

            Which files: DIR is walked recursively; names starting with a dot (files and \
            directories), symbolic links and anything that is not a regular file are skipped. A \
            file whose extension is .jpg, .jpeg, .png, .webp, .avif, .jxl, .heic, .heif, .gif, .tif or .tiff (any \
            case) is requested; any other file only when its first bytes are the signature of one \
            of those formats. Skipped files are counted in the summary.

            Progress goes to standard error: a bar with done/total, images/s and the time left \
            when it is a terminal, else one line at most every second. The summary goes to \
            standard output: requests (files × sizes), warmed (served by a source render made now; \
            requests within tolerance of each other share one render and one file), already \
            cached (served from memory, disk or table), failed (with the first few reasons), not \
            done (after a signal), skipped files, elapsed time and rate (requests done per \
            second).

            --iiif builds the tile pyramid of every original above iiif.tiledAbove into \
            iiif.pyramidPath (which it needs), one original at a time after the --size \
            requests (--size may then be left out), skipping tiles already built: what \
            `strata serve`'s IIIF routes cut a big image's tiles from. Its progress (tiles of \
            the pyramid being built) goes to standard error, its counts to the summary.

            A single image that cannot be read or decoded is counted as failed and never stops \
            the run. SIGINT or SIGTERM cancels what is outstanding, prints the summary of what \
            was done, publishes the disk tier's queued writes and exits with 130 or 143 (a \
            second signal exits at once). Exit status: 0 when every request succeeded, 1 when \
            some failed, 2 on a usage or configuration error (nothing warmed).
            """
    )

    @Argument(help: "Directory of originals (source.directory); keys are paths relative to it.")
    var directory: String

    @Option(help: "A bounding box, WxH; repeat for several sizes.", transform: { try PixelSize.parseOption($0) })
    var size: [PixelSize] = []

    @Option(help: "fit (inside the box, default) or fill (cover the box and centre-crop).")
    var mode: ContentMode = .fit

    @Option(help: "Disk tier directory (disk.path; created if needed).")
    var cache: String?

    @Option(help: "Most requests in flight at once (default: 4 per prefetch lane, at least 8).")
    var inFlight: Int?

    @Flag(help: "Also build the tile pyramids of originals above iiif.tiledAbove (into iiif.pyramidPath).")
    var iiif = false

    @OptionGroup var configurationOptions: ConfigurationOptions

    func validate() throws {
        guard !size.isEmpty || iiif else { throw ValidationError("give at least one --size WxH, or --iiif") }
        if let inFlight, !(1...10_000).contains(inFlight) { throw ValidationError("--in-flight must be 1…10000") }
    }

    func run() async throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory), isDirectory.boolValue else {
            fail("warm: \(directory): no such directory (give the directory of originals)", code: 2)
        }
        var overrides: [String: ConfigurationRawValue] = ["source.directory": .scalar(directory)]
        if let cache { overrides["disk.path"] = .scalar(cache) }
        var (_, configuration) = await configurationOptions.load(overrides: overrides)
        if iiif, configuration.iiif.pyramidPath == nil {
            fail(
                "warm: --iiif builds pyramids into iiif.pyramidPath: set it (--iiif-pyramid-path DIR), or pass --cache DIR (they then go beside it)",
                code: 2)
        }
        guard configuration.diskPath != nil || configuration.tablesPath != nil || (iiif && size.isEmpty) else {
            fail(
                "warm: nothing to warm into: pass --cache DIR or set disk.path (or tables.path); the memory tier ends with the process",
                code: 2)
        }
        configuration.disk.useInotify = false  // this process is the writer: nothing to watch

        let listing: OriginalsListing
        do {
            listing = try OriginalsListing(root: directory)
        } catch {
            fail("warm: \(directory): cannot list the directory: \(error.reason)", code: 2)
        }
        for problem in listing.problems { FileHandle.standardError.write(Data("strata: warm: \(problem) (skipped)\n".utf8)) }

        let run = WarmRun(keys: listing.keys, sizes: size, mode: mode, skipped: listing.skipped)
        // From here on a signal is a cancellation (before the work starts, it starts nothing).
        let signals = SignalWatch { signal in run.interrupt(by: signal) }
        let configured: ConfiguredImageCache
        do {
            configured = try ConfiguredImageCache(configuration)
        } catch {
            fail("warm: \(error)", code: 2)
        }
        let limit = inFlight ?? max(8, 4 * configuration.prefetchWidth)
        let progress = WarmProgress(run: run, isTerminal: isatty(STDERR_FILENO) == 1)
        let droppedBefore = configured.cache.disk?.statistics.droppedStores ?? 0
        // Write-behind pacing: the disk tier drops a store when its queue is full, so after a
        // quarter of the queue's worth of renders, wait until it has written them.
        let pacing = WarmRun.Pacing(
            renders: max(1, configuration.disk.writeQueueCapacity / 4), bytes: max(1, configuration.disk.writeQueueByteLimit / 4))

        let pyramids =
            iiif
            ? configured.pyramids.map { WarmPyramids(pyramids: $0, keys: listing.keys, tiledAbove: configuration.iiif.tiledAbove) } : nil
        let built = Lock<WarmPyramids.Summary?>(nil)
        let work = Task {
            await run.perform(on: configured.cache, inFlight: limit, pacing: pacing)
            if let pyramids, !Task.isCancelled {
                let summary = await pyramids.run()
                built.withLock { $0 = summary }
            }
        }
        run.cancelOnInterrupt(work)
        // Only --iiif: no sized requests to report (the pyramids report their own progress).
        let reporter = Task { if !size.isEmpty { await progress.report() } }
        await work.value
        reporter.cancel()
        await reporter.value
        if !size.isEmpty { progress.finish() }
        await configured.shutdown()
        let dropped = (configured.cache.disk?.statistics.droppedStores ?? 0) - droppedBefore
        if !size.isEmpty { print(run.summary(droppedStores: dropped), terminator: "") }
        let pyramidSummary = built.withLock { $0 }
        if let pyramidSummary { print(WarmPyramids.text(pyramidSummary), terminator: "") }
        signals.stop()
        if let signal = run.interruptingSignal { Foundation.exit(128 + signal) }
        Foundation.exit(run.failedCount > 0 || (pyramidSummary?.failed ?? 0) > 0 ? 1 : 0)
    }
}

// MARK: - The files to warm

/// The image files under a directory, as keys relative to it (sorted), and how many files
/// were skipped.
struct OriginalsListing {
    /// Extensions always requested (any case); other files only when their magic says image.
    static let imageExtensions: Set<String> = ["jpg", "jpeg", "png", "webp", "avif", "jxl", "heic", "heif", "gif", "tif", "tiff"]

    var keys: [String] = []
    var skipped = 0
    /// Subdirectories that could not be listed (one line each).
    var problems: [String] = []

    /// Walks `root` recursively. Throws when `root` itself cannot be listed.
    init(root: String) throws(SystemCallError) {
        try walk(root, prefix: "", isRoot: true)
        keys.sort()
    }

    private mutating func walk(_ path: String, prefix: String, isRoot: Bool) throws(SystemCallError) {
        var names: [String] = []
        var unreadable = 0
        let handle: FileDescriptor
        do {
            handle = try FileDescriptor(directory: path)
        } catch {
            if isRoot { throw error }
            problems.append("\(path): cannot list the directory: \(error.reason)")
            return
        }
        do {
            try DirectoryScan.forEachName(in: handle) { bytes, _ in
                // A name that is not UTF-8 cannot be a key.
                if let name = String(validating: bytes, as: UTF8.self) { names.append(name) } else { unreadable += 1 }
            }
        } catch {
            if isRoot { throw error }
            problems.append("\(path): cannot list the directory: \(error.reason)")
            return
        }
        skipped += unreadable
        names.sort()
        for name in names {
            guard !name.hasPrefix("."), let st = try? handle.status(of: name) else {
                skipped += 1
                continue
            }
            switch st.st_mode & S_IFMT {
            case S_IFDIR:
                try walk(path + "/" + name, prefix: prefix + name + "/", isRoot: false)
            case S_IFREG:
                if Self.isImage(name: name, in: handle) { keys.append(prefix + name) } else { skipped += 1 }
            default:
                skipped += 1
            }
        }
    }

    /// Whether a file is requested: an image extension, or an image signature in its first bytes.
    static func isImage(name: String, in directory: borrowing FileDescriptor) -> Bool {
        if let dot = name.lastIndex(of: "."), imageExtensions.contains(name[name.index(after: dot)...].lowercased()) {
            return true
        }
        guard let file = try? FileDescriptor(openAt: directory, name: name, flags: O_RDONLY | O_NOFOLLOW) else { return false }
        var head = [UInt8](repeating: 0, count: ImageFormatDetector.bytesNeeded)
        guard let n = try? head.withUnsafeMutableBytes({ try file.read(into: $0, at: 0) }) else { return false }
        return ImageFormatDetector.detect(head[0..<n]) != nil
    }
}

// MARK: - The run

/// One warm run: the requests (every key × every size, key by key), what became of them, and
/// the interruption.
final class WarmRun: Sendable {
    /// What became of one request.
    enum Outcome: Sendable {
        case served(ServingTier, bytes: Int)
        case failed(String)
        case cancelled
    }

    struct Counts {
        var byTier: [ServingTier: Int] = [:]
        var failed = 0
        var cancelled = 0
        /// The first few failures' messages.
        var failures: [String] = []
        var renderedSinceFlush = 0
        var renderedBytesSinceFlush = 0
    }

    /// When to wait for the disk tier's write queue: after this many renders or bytes of them.
    struct Pacing: Sendable {
        var renders: Int
        var bytes: Int
    }

    static let failuresShown = 5

    let keys: [String]
    let sizes: [PixelSize]
    let mode: ContentMode
    let skipped: Int
    let started = ContinuousClock.now
    let counts = Lock(Counts())
    let signal = Atomic<Int32>(0)
    /// The work to cancel on a signal (set once it runs).
    let work = Lock<Task<Void, Never>?>(nil)

    init(keys: [String], sizes: [PixelSize], mode: ContentMode, skipped: Int) {
        self.keys = keys
        self.sizes = sizes
        self.mode = mode
        self.skipped = skipped
    }

    var total: Int { keys.count * sizes.count }
    var done: Int { counts.withLock { c in c.byTier.values.reduce(0, +) + c.failed } }
    var failedCount: Int { counts.withLock { $0.failed } }
    var interruptingSignal: Int32? {
        let s = signal.load(ordering: .acquiring)
        return s == 0 ? nil : s
    }

    /// Records the signal and cancels the work, if it runs yet.
    func interrupt(by signal: Int32) {
        _ = self.signal.compareExchange(expected: 0, desired: signal, ordering: .acquiringAndReleasing)
        work.withLock { $0?.cancel() }
    }

    /// Cancels `task` on a signal, at once if one came already.
    func cancelOnInterrupt(_ task: Task<Void, Never>) {
        work.withLock { $0 = task }
        if interruptingSignal != nil { task.cancel() }
    }

    /// The request `index` (key-major: every size of a key, then the next key).
    func request(_ index: Int) -> ImageRequest {
        ImageRequest(key: CacheKey(keys[index / sizes.count]), box: sizes[index % sizes.count], mode: mode, priority: .prefetch)
    }

    /// Runs every request through `engine`'s prefetch lane, at most `inFlight` at once; returns
    /// when all are done or, after cancellation, when the outstanding ones have let go.
    func perform(on engine: ImageCache, inFlight: Int, pacing: Pacing) async {
        await withTaskGroup(of: Outcome.self) { group in
            var next = 0
            func startNext() {
                guard next < total, !Task.isCancelled, interruptingSignal == nil else { return }
                let request = self.request(next)
                next += 1
                group.addTask { await Self.run(request, on: engine) }
            }
            for _ in 0..<inFlight { startNext() }
            while let outcome = await group.next() {
                let mustFlush = record(outcome, pacing: pacing)
                if mustFlush, let disk = engine.disk, !Task.isCancelled { await Self.flush(disk) }
                startNext()
            }
        }
    }

    /// Records `outcome`; returns whether the disk tier's queue should be drained now.
    private func record(_ outcome: Outcome, pacing: Pacing) -> Bool {
        counts.withLock { c in
            switch outcome {
            case .served(let tier, let bytes):
                c.byTier[tier, default: 0] += 1
                if tier == .source {
                    c.renderedSinceFlush += 1
                    c.renderedBytesSinceFlush += bytes
                }
            case .failed(let message):
                c.failed += 1
                if c.failures.count < Self.failuresShown { c.failures.append(message) }
            case .cancelled:
                c.cancelled += 1
            }
            guard c.renderedSinceFlush >= pacing.renders || c.renderedBytesSinceFlush >= pacing.bytes else { return false }
            c.renderedSinceFlush = 0
            c.renderedBytesSinceFlush = 0
            return true
        }
    }

    /// One request in the prefetch lane; cancelling the calling task cancels it.
    private static func run(_ request: ImageRequest, on engine: ImageCache) async -> Outcome {
        let task = engine.prefetch([request])[0]
        return await withTaskCancellationHandler {
            do throws(ImageCacheError) {
                let served = try await task.value
                return .served(served.tier, bytes: served.image.byteCount)
            } catch {
                if case .cancelled = error { return .cancelled }
                if case .shutDown = error { return .cancelled }
                return .failed("\(GetCommand.oneLine(error.description)) (\(request.box))")
            }
        } onCancel: {
            task.cancel()
        }
    }

    /// Waits on a thread of its own (not Swift's pool) until the disk tier wrote what is queued.
    private static func flush(_ disk: DiskTier) async {
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                disk.flush()
                done.resume()
            }
            thread.start()
        }
    }

    var elapsed: Double { (ContinuousClock.now - started).seconds }

    /// The summary printed at the end (several lines, each `label: value`).
    func summary(droppedStores: Int) -> String {
        let c = counts.withLock { $0 }
        let cached = (c.byTier[.memory] ?? 0) + (c.byTier[.disk] ?? 0) + (c.byTier[.table] ?? 0)
        let done = c.byTier.values.reduce(0, +) + c.failed
        let seconds = elapsed
        var lines: [String] = []
        if let signal = interruptingSignal {
            lines.append(
                "interrupted:    by \(signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "signal \(signal)"), \(done) of \(total) requests done"
            )
        }
        lines.append(
            "requests:       \(total) (\(keys.count) \(keys.count == 1 ? "file" : "files") × \(sizes.count) \(sizes.count == 1 ? "size" : "sizes"))"
        )
        lines.append("warmed:         \(c.byTier[.source] ?? 0)")
        lines.append(
            "already cached: \(cached) (memory \(c.byTier[.memory] ?? 0), disk \(c.byTier[.disk] ?? 0), table \(c.byTier[.table] ?? 0))")
        lines.append("failed:         \(c.failed)")
        for failure in c.failures { lines.append("  \(failure)") }
        if c.failed > c.failures.count { lines.append("  … and \(c.failed - c.failures.count) more") }
        if interruptingSignal != nil || done < total { lines.append("not done:       \(total - done) (cancelled)") }
        lines.append("skipped:        \(skipped) \(skipped == 1 ? "file" : "files") (hidden, not an image, or not a regular file)")
        if droppedStores > 0 {
            lines.append("not on disk:    \(droppedStores) renders (the disk tier's write queue was full; warm again)")
        }
        lines.append("elapsed:        \(String(format: "%.2f", seconds)) s")
        lines.append("rate:           \(String(format: "%.1f", seconds > 0 ? Double(done) / seconds : 0)) images/s")
        return lines.joined(separator: "\n") + "\n"
    }
}

// MARK: - Progress

/// Progress on standard error: a redrawn bar on a terminal, else a plain line at most once a
/// second (and only when something changed).
struct WarmProgress: Sendable {
    let run: WarmRun
    let isTerminal: Bool

    func report() async {
        var lastShown = -1
        while !Task.isCancelled {
            try? await Task.sleep(for: isTerminal ? .milliseconds(200) : .seconds(1))
            if Task.isCancelled { break }
            let done = run.done
            if isTerminal {
                write("\r" + line(done: done) + "\u{1B}[K")
            } else if done != lastShown {
                write("strata: warm: " + line(done: done) + "\n")
            }
            lastShown = done
        }
    }

    /// Ends the bar's line on a terminal.
    func finish() {
        if isTerminal { write("\r" + line(done: run.done) + "\u{1B}[K\n") }
    }

    func line(done: Int) -> String {
        let total = max(run.total, 1)
        let seconds = run.elapsed
        let rate = seconds > 0 ? Double(done) / seconds : 0
        let eta = rate > 0 ? Self.duration(Double(run.total - done) / rate) : "?"
        let counts = "\(done)/\(run.total) \(String(format: "%.1f", rate)) images/s ETA \(eta)"
        guard isTerminal else { return counts }
        let width = 30
        let filled = min(width, done * width / total)
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] " + counts
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m\(String(format: "%02d", s % 60))s" }
        return "\(s / 3600)h\(String(format: "%02d", s / 60 % 60))m"
    }

    private func write(_ text: String) { FileHandle.standardError.write(Data(text.utf8)) }
}

// MARK: - Signals

/// SIGINT and SIGTERM delivered to `handler` (once, on a dispatch queue) instead of ending the
/// process; a second signal exits at once with 128 + its number.
final class SignalWatch: Sendable {
    private let sources: Lock<[any DispatchSourceSignal]>

    /// Whether a signal came already.
    private final class Seen: Sendable {
        let flag = Atomic<Bool>(false)
    }

    init(_ handler: @escaping @Sendable (Int32) -> Void) {
        let seen = Seen()
        var made: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                if seen.flag.exchange(true, ordering: .acquiringAndReleasing) { _exit(128 + number) }
                handler(number)
            }
            source.resume()
            made.append(source)
        }
        sources = Lock(made)
    }

    func stop() {
        sources.withLock { all in
            for source in all { source.cancel() }
            all = []
        }
    }
}
