import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// Monotonic nanoseconds (`CLOCK_MONOTONIC`).
func monotonicNanoseconds() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// One reader call: when it started and ended, and whether it hit.
struct TimedLookup: Sendable {
    var start: UInt64
    var end: UInt64
    var hit: Bool
}

/// A thread that calls `lookup` in a loop, timing every call, until stopped.
final class LoopingReader: Sendable {
    private final class Progress: Sendable {
        let stop = Atomic<Bool>(false)
        let count = Atomic<Int>(0)
        let results = Lock<[TimedLookup]>([])
    }
    private let progress = Progress()
    private let thread: OSThread

    /// Starts the thread. At most `capacity` calls are kept, in a buffer written before the
    /// loop starts (so that recording never allocates or faults pages in while timing).
    init(capacity: Int = 1 << 20, _ lookup: @escaping @Sendable () -> Bool) throws {
        thread = try OSThread(name: "table-reader") { [progress] in
            let buffer = UnsafeMutableBufferPointer<TimedLookup>.allocate(capacity: capacity)
            buffer.initialize(repeating: TimedLookup(start: 0, end: 0, hit: false))
            defer { buffer.deallocate() }
            var kept = 0
            while !progress.stop.load(ordering: .acquiring) {
                let start = monotonicNanoseconds()
                let hit = lookup()
                let end = monotonicNanoseconds()
                if kept < capacity {
                    buffer[kept] = TimedLookup(start: start, end: end, hit: hit)
                    kept += 1
                }
                progress.count.add(1, ordering: .relaxed)
            }
            progress.results.withLock { $0 = Array(buffer[0..<kept]) }
        }
    }

    /// Lookups completed so far.
    var completed: Int { progress.count.load(ordering: .relaxed) }

    /// Stops the loop and returns every call it timed.
    func stop() -> [TimedLookup] {
        progress.stop.store(true, ordering: .releasing)
        thread.join()
        return progress.results.withLock { $0 }
    }
}

/// Readers never wait for writers: not for a compaction, a reset, a store's disk reservation or
/// its draw (the doc of ``ImageTable``).
@Suite(.serialized, .timeLimit(.minutes(5))) struct ImageTableReaderLatencyTests {
    static let side = 64

    /// A table of `count` entries of 64×64 (each one byte value, cheap to draw).
    static func filledTable(_ dir: TempDirectory, count: Int) throws -> ImageTable {
        let table = try ImageTable(directory: dir.path, format: testFormat(size: PixelSize(width: side, height: side), max: count))
        for n in 0..<count {
            try table.store(TableTestPattern.entityID(n), sourceVersion: 1) { canvas in
                canvas.image.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: n)) }
            }
        }
        return table
    }

    /// A reader thread loops on a present entry while this thread compacts a table of a few
    /// thousand entries. Structural check, no time threshold: lookups that started and ended
    /// inside the middle half of the compaction exist (a reader blocked by the compaction
    /// completes none there). The worst single-call latency is printed beside the compaction's
    /// duration.
    @Test func aReaderKeepsHittingWhileTheTableIsCompacted() throws {
        let dir = TempDirectory()
        let count = 3000
        let table = try Self.filledTable(dir, count: count)
        // Holes, so that the compaction moves entries.
        for n in stride(from: 0, to: count, by: 3) { try table.delete(TableTestPattern.entityID(n)) }
        let present = TableTestPattern.entityID(count - 1)
        #expect(table.image(for: present, sourceVersion: 1) != nil)
        let reader = try LoopingReader { table.image(for: present, sourceVersion: 1) != nil }
        // The same loop without the table: its worst pause is what scheduling alone costs here.
        let control = try LoopingReader { withExtendedLifetime(present) { true } }
        try waitUntilSynchronously("the reader has started") { reader.completed > 100 }
        let begin = monotonicNanoseconds()
        try table.compact()
        let end = monotonicNanoseconds()
        let lookups = reader.stop()
        let controlWorst = control.stop().filter { $0.end >= begin && $0.start <= end }.map { $0.end - $0.start }.max() ?? 0
        let duration = end - begin
        let middle = (begin + duration / 4)...(end - duration / 4)
        let insideMiddle = lookups.filter { middle.contains($0.start) && middle.contains($0.end) }.count
        let overlapping = lookups.filter { $0.end >= begin && $0.start <= end }
        let latencies = overlapping.map { $0.end - $0.start }.sorted()
        func percentile(_ p: Double) -> UInt64 {
            latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
        let worst = latencies.last ?? 0
        print(
            """
            reader during a compaction of \(count * 2 / 3) entries: compaction \(duration / 1000) µs, \
            \(overlapping.count) lookups overlapping it, \(insideMiddle) inside its middle half; lookup median \
            \(percentile(0.5)) ns, p99.9 \(percentile(0.999) / 1000) µs, worst \(worst / 1000) µs \
            (a control loop without the table: worst pause \(controlWorst / 1000) µs)
            """)
        #expect(lookups.allSatisfy { $0.hit }, "the present entry was a miss during the compaction")
        #expect(
            insideMiddle > 0,
            "the reader completed no lookup in the middle half of a \(duration / 1000) µs compaction (worst lookup \(worst / 1000) µs)")
        #expect(table.image(for: present, sourceVersion: 1) != nil)
    }

    /// Runs `body` on a new thread; the returned thread is joined by the caller.
    static func onThread(_ name: String, _ body: @escaping @Sendable () -> Void) throws -> OSThread {
        try OSThread(name: name, body)
    }

    /// A hook that parks the thread calling it until released (or 30 s pass), once.
    final class Pause: Sendable {
        private let state = Lock<(reached: Bool, released: Bool, calls: Int)>((false, false, 0))

        /// Parks the first caller; later callers go on at once.
        func park() {
            let first = state.withLock { s -> Bool in
                s.calls += 1
                guard s.calls == 1 else { return false }
                s.reached = true
                return true
            }
            guard first else { return }
            _ = try? waitUntilSynchronously("the test releases the paused work") { state.withLock { $0.released } }
        }

        var reached: Bool { state.withLock { $0.reached } }
        func release() { state.withLock { $0.released = true } }
    }

    /// Deterministic: a compaction parked half-way (writer gate and flock held, old files still
    /// in place) does not keep a reader from completing, and the reader is served.
    @Test func aReaderCompletesWhileACompactionIsPausedHalfway() throws {
        let dir = TempDirectory()
        let count = 64
        let table = try Self.filledTable(dir, count: count)
        let present = TableTestPattern.entityID(count - 1)
        let pause = Pause()
        table.hooks.afterCompactingEntry.withLock { $0 = { copied in if copied == count / 2 { pause.park() } } }
        let compacted = Lock<Result<Int, ImageTableError>?>(nil)
        let compactor = try Self.onThread("compactor") {
            let result = Result { () throws(ImageTableError) -> Int in try table.compact() }
            compacted.withLock { $0 = result }
        }
        defer {
            pause.release()
            compactor.join()
        }
        try waitUntilSynchronously("the compaction is paused half-way") { pause.reached }
        let served = Lock<Int?>(nil)
        let reader = try Self.onThread("reader") {
            let image = table.image(for: present, sourceVersion: 1)
            served.withLock { $0 = image.map { Int($0.pixelBytes(x: 0, y: 0)[0]) } }
        }
        defer { reader.join() }
        try waitUntilSynchronously("the reader is served while the compaction is paused", seconds: 10) { served.withLock { $0 } != nil }
        #expect(compacted.withLock { $0 } == nil, "the compaction was still paused when the reader was served")
        #expect(served.withLock { $0 } == (count - 1) % 256)
        pause.release()
        compactor.join()
        #expect(try compacted.withLock { $0 }?.get() != nil)
        #expect(table.image(for: present, sourceVersion: 1) != nil)
    }

    /// Deterministic: while one reader re-reads the whole metadata (after another instance
    /// wrote), other readers of this instance are served at once, and a miss does not queue
    /// behind the scan.
    @Test func readersDoNotWaitForAnotherReadersMetadataScan() throws {
        let dir = TempDirectory()
        let a = try ImageTable(directory: dir.path, format: testFormat(max: 8))
        let b = try ImageTable(directory: dir.path, format: testFormat(max: 8))
        try storePattern(a, 1)
        try storePattern(b, 2)  // a's index no longer reflects the shared metadata
        let pause = Pause()
        a.hooks.duringIndexScan.withLock { $0 = { pause.park() } }
        let scanned = Lock<Bool?>(nil)
        let scanner = try Self.onThread("scanner") {
            let image = hit(a, 2)
            scanned.withLock { $0 = image.map { TableTestPattern.matches($0, n: 2, version: 1) } ?? false }
        }
        defer {
            pause.release()
            scanner.join()
        }
        try waitUntilSynchronously("a reader is scanning the metadata") { pause.reached }
        let served = Lock<(hit: Bool, miss: Bool)?>(nil)
        let reader = try Self.onThread("reader") {
            let present = hit(a, 1).map { TableTestPattern.matches($0, n: 1, version: 1) } ?? false
            let absent = hit(a, 3) == nil
            served.withLock { $0 = (present, absent) }
        }
        defer { reader.join() }
        try waitUntilSynchronously("the other reader is answered during the scan", seconds: 10) { served.withLock { $0 } != nil }
        #expect(scanned.withLock { $0 } == nil, "the scan was still paused")
        #expect(served.withLock { $0 }?.hit == true)
        #expect(served.withLock { $0 }?.miss == true)
        pause.release()
        scanner.join()
        #expect(scanned.withLock { $0 } == true, "the scanning reader found the other instance's entry")
    }
}

/// Polls `condition` every 100 µs until it holds; throws ``WaitTimedOut`` after `seconds`.
func waitUntilSynchronously(_ what: String, seconds: Double = 30, _ condition: () -> Bool) throws {
    let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
    while !condition() {
        guard monotonicNanoseconds() < deadline else { throw WaitTimedOut(what: what, seconds: seconds) }
        usleep(100)
    }
}
