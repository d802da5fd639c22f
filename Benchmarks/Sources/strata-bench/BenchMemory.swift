import ArgumentParser
import Dispatch
import Foundation
import Strata
import Synchronization

/// `strata-bench memory`: Strata's ``MemoryCache`` against Foundation's `NSCache` (ns per hit,
/// miss and insert-with-eviction) and W-TinyLFU against plain LRU (miss ratio on Zipf traces).
struct BenchMemoryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "memory",
        abstract: "Memory tier: ns per operation vs NSCache, miss ratio vs LRU (release build).",
        discussion: """
            Operations: both caches hold `entries` Payload objects under Int keys (NSCache: the \
            same values as NSNumber, built before timing), count limit = entries, cost 1 each. \
            Hits and misses look up uniformly random resident / absent keys (each hit reads a \
            field of the value it gets, as a caller would, so no implementation's retain of it \
            can be optimised away); insert+evict adds \
            new keys to the full cache. Each figure is the fastest of 5 rounds (mean over \
            threads of thread time / operations), which filters out descheduling on a shared \
            machine. With equal costs NSCache inserts at the head of its cost-sorted list and \
            evicts the entry it just inserted, so its insert is O(1) here; with distinct costs \
            it walks the list. The `floor` (`floors` in JSON) is a bare Lock + Dictionary \
            lookup of the same keys: the memory latency any hash-map hit pays on this machine.
            Traces: Zipf 1.0 and 0.8 over `keys` keys, `requests` requests, and Zipf 1.0 with a \
            one-pass scan of 10 000 new keys every 100 000 requests; cache of 1 % and 10 % of \
            the keys (count-limited), miss = lookup failed then insert.
            """)

    @Flag(help: "Print one JSON object instead of tables.")
    var json = false

    @Option(parsing: .upToNextOption, help: "Entry counts for the operation timings.")
    var entries: [Int] = [10_000, 100_000, 1_000_000]

    @Option(help: "Timed operations per thread per measurement.")
    var ops = 400_000

    @Option(help: "Requests per miss-ratio trace.")
    var requests = 5_000_000

    @Option(help: "Distinct keys of the Zipf traces.")
    var keys = 100_000

    @Option(
        help: "Only time this: strata (default stripes), exact (one stripe), nscache, tier (ImageMemoryTier's lookups) or floor."
    )
    var only: String?

    @Option(parsing: .upToNextOption, help: "Thread counts for the operation timings.")
    var threads: [Int] = [1, 2]

    @Flag(help: "Skip the operation timings.")
    var skipOps = false

    @Flag(help: "Skip the miss-ratio traces.")
    var skipTraces = false

    func run() throws {
        var opRows: [OpRow] = []
        var floorRows: [String] = []
        if !skipOps {
            for n in entries {
                for threads in threads {
                    for impl in [Impl.strata, .exact, .nscache, .tier]
                    where only == impl.rawValue || (only == nil && impl != .exact && impl != .tier) {
                        let row = measureOps(impl: impl, entries: n, threads: threads, ops: ops)
                        opRows.append(row)
                        if !json { log(row.text) }
                    }
                }
                if only == nil || only == "floor" {
                    let floor = measureFloor(entries: n, ops: ops)
                    floorRows.append(String(format: "{\"entries\":%d,\"hit_ns\":%.1f}", n, floor))
                    if !json {
                        log(
                            String(
                                format: "floor    %8d entries 1 thr: hit %8.1f ns  (Lock + Dictionary<Int, object>, no policy)",
                                n, floor))
                    }
                }
            }
        }
        var traceRows: [TraceRow] = []
        if !skipTraces {
            let traces: [(String, [Int])] = [
                ("zipf1.0", TraceGenerator.zipf(alpha: 1.0, keys: keys, requests: requests, seed: 1)),
                ("zipf0.8", TraceGenerator.zipf(alpha: 0.8, keys: keys, requests: requests, seed: 2)),
                ("zipf1.0+scan", TraceGenerator.zipfWithScans(alpha: 1.0, keys: keys, requests: requests, seed: 3)),
            ]
            for (name, trace) in traces {
                for pct in [1, 10] {
                    let capacity = keys * pct / 100
                    let lru = TraceGenerator.lruMissRatio(trace, capacity: capacity)
                    let strata = TraceGenerator.strataMissRatio(trace, capacity: capacity)
                    let row = TraceRow(trace: name, cachePct: pct, lruMiss: lru, strataMiss: strata)
                    traceRows.append(row)
                    if !json {
                        log(row.text)
                        let exact = TraceGenerator.strataMissRatio(trace, capacity: capacity, stripes: 1)
                        let stripes = MemoryCache<Int, Int>.defaultStripes(costLimit: capacity, countLimit: capacity)
                        log(
                            String(
                                format: "%-13@ cache %2d%%: (default %d stripes above) one stripe miss %.4f  (%+.1f %%)",
                                name, pct, stripes, exact, (exact - lru) / lru * 100))
                    }
                }
            }
        }
        if json {
            let ops = opRows.map(\.json).joined(separator: ",")
            let traces = traceRows.map(\.json).joined(separator: ",")
            print("{\"ops\":[\(ops)],\"floors\":[\(floorRows.joined(separator: ","))],\"traces\":[\(traces)]}")
        }
    }

    private func log(_ line: String) {
        print(line)
        fflush(nil)
    }
}

/// `strata` is ``MemoryCache`` with its default stripes; `exact` (`--only exact`) with one.
enum Impl: String { case strata, exact, nscache, tier }

struct OpRow {
    var impl: Impl
    var entries: Int
    var threads: Int
    var hitNs: Double
    var missNs: Double
    var insertNs: Double

    /// Hits per second, all threads together (each thread's hit takes `hitNs`).
    var hitsPerSecond: Double { Double(threads) / hitNs * 1e9 }

    var json: String {
        String(
            format:
                "{\"impl\":\"%@\",\"entries\":%d,\"threads\":%d,\"hit_ns\":%.1f,\"hits_per_s\":%.0f,\"miss_ns\":%.1f,\"insert_ns\":%.1f}",
            impl.rawValue, entries, threads, hitNs, hitsPerSecond, missNs, insertNs)
    }

    var text: String {
        String(
            format: "%-8@ %8d entries %2d thr: hit %8.1f ns (%6.2f M hits/s)  miss %8.1f ns  insert+evict %8.1f ns",
            impl.rawValue, entries, threads, hitNs, hitsPerSecond / 1e6, missNs, insertNs)
    }
}

struct TraceRow {
    var trace: String
    var cachePct: Int
    var lruMiss: Double
    var strataMiss: Double

    var json: String {
        String(
            format: "{\"trace\":\"%@\",\"cache_pct\":%d,\"lru_miss\":%.4f,\"strata_miss\":%.4f}",
            trace, cachePct, lruMiss, strataMiss)
    }

    var text: String {
        String(
            format: "%-13@ cache %2d%%: LRU miss %.4f  strata miss %.4f  (%+.1f %%)",
            trace, cachePct, lruMiss, strataMiss, (strataMiss - lruMiss) / lruMiss * 100)
    }
}

/// The value stored by both caches: a small object, so both retain and release the same way.
final class Payload: Sendable {
    let id: Int
    init(_ id: Int) { self.id = id }
}

/// Runs `body(thread)` on `threads` threads released together; returns each thread's seconds.
func runThreads(_ threads: Int, _ body: @escaping @Sendable (Int) -> Void) -> [Double] {
    final class Shared: Sendable {
        let ready = Atomic<Int>(0)
        let times = Strata.Lock<[Double]>([])
    }
    let shared = Shared()
    let done = DispatchSemaphore(value: 0)
    for t in 0..<threads {
        let thread = Thread {
            shared.ready.add(1, ordering: .acquiringAndReleasing)
            while shared.ready.load(ordering: .acquiring) < threads {}
            let start = DispatchTime.now().uptimeNanoseconds
            body(t)
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            shared.times.withLock { $0.append(elapsed) }
            done.signal()
        }
        thread.start()
    }
    for _ in 0..<threads { done.wait() }
    return shared.times.withLock { $0 }
}

/// NSCache is not marked Sendable; it is documented as thread-safe.
struct SendableNSCache: @unchecked Sendable {
    let cache: NSCache<NSNumber, Payload>
}

/// Immutable key arrays shared by the benchmark threads.
struct KeyArrays: @unchecked Sendable {
    let ints: [[ArraySlice<Int>]]
    let numbers: [[ArraySlice<NSNumber>]]
    let strings: [[ArraySlice<String>]]
    /// The strings as ``CacheKey``s (made before timing: a caller holds its key's digest).
    let cacheKeys: [[ArraySlice<CacheKey>]]

    init(ints: [[Int]] = [], numbers: [[NSNumber]] = [], strings: [[String]] = []) {
        self.ints = ints.map(Self.rounds)
        self.numbers = numbers.map(Self.rounds)
        self.strings = strings.map(Self.rounds)
        self.cacheKeys = strings.map { Self.rounds($0.map { CacheKey($0) }) }
    }

    static func rounds<T>(_ keys: [T]) -> [ArraySlice<T>] {
        let size = keys.count / benchRounds
        return (0..<benchRounds).map { keys[$0 * size..<($0 + 1) * size] }
    }
}

/// Each measurement runs in this many rounds over consecutive slices of its keys; the fastest
/// round is reported, which filters out time the thread spent descheduled on a shared machine.
let benchRounds = 5

/// Runs `body(thread, round)` for each round on `threads` threads released together; returns
/// the best round's mean nanoseconds per operation (`ops` operations per thread in all).
func timeRounds(_ threads: Int, _ ops: Int, _ body: @escaping @Sendable (Int, Int) -> Void) -> Double {
    var best = Double.infinity
    for r in 0..<benchRounds {
        let times = runThreads(threads) { t in body(t, r) }
        best = Swift.min(best, perOp(times, ops / benchRounds))
    }
    return best
}

func measureOps(impl: Impl, entries n: Int, threads: Int, ops: Int) -> OpRow {
    if impl == .tier { return measureTierOps(entries: n, threads: threads, ops: ops) }
    // Per thread: random resident keys (hits), absent keys (misses), new keys (inserts).
    func keySets(_ seed: UInt64) -> (hit: [Int], miss: [Int], insert: [Int]) {
        var rng = SplitMix64(seed: seed)
        let hit = (0..<ops).map { _ in Int(rng.next() % UInt64(n)) }
        let miss = (0..<ops).map { _ in n + Int(rng.next() % UInt64(n)) }
        let insert = (0..<ops).map { i in 2 * n + Int(seed) * ops + i }
        return (hit, miss, insert)
    }
    let sets = (0..<threads).map { keySets(UInt64($0 + 1)) }
    let payloads = (0..<n).map { Payload($0) }
    let fresh = Payload(-1)

    switch impl {
    case .strata, .exact:
        let cache = MemoryCache<Int, Payload>(costLimit: n, countLimit: n, maxEntryShare: 1, stripes: impl == .exact ? 1 : nil)
        for k in 0..<n { cache.insert(payloads[k], forKey: k, cost: 1) }
        let hit = KeyArrays(ints: sets.map(\.hit))
        let miss = KeyArrays(ints: sets.map(\.miss))
        let ins = KeyArrays(ints: sets.map(\.insert))
        let hitT = timeRounds(threads, ops) { t, r in
            var found = 0, ids = 0
            for k in hit.ints[t][r] {
                if let v = cache.value(forKey: k) { (found, ids) = (found + 1, ids &+ v.id) }
            }
            precondition(found > 0 && ids >= 0)
        }
        let missT = timeRounds(threads, ops) { t, r in
            var found = 0
            for k in miss.ints[t][r] where cache.value(forKey: k) != nil { found += 1 }
            precondition(found == 0)
        }
        let insT = timeRounds(threads, ops) { t, r in
            for k in ins.ints[t][r] { cache.insert(fresh, forKey: k, cost: 1) }
        }
        precondition(cache.count <= n)
        return OpRow(
            impl: impl, entries: n, threads: threads, hitNs: hitT,
            missNs: missT, insertNs: insT)
    case .tier:
        preconditionFailure("measured by measureTierOps")
    case .nscache:
        let cache = NSCache<NSNumber, Payload>()
        cache.countLimit = n
        // NSNumber keys are built before timing so both caches time only their own work.
        let residentKeys = (0..<n).map { NSNumber(value: $0) }
        for k in 0..<n { cache.setObject(payloads[k], forKey: residentKeys[k], cost: 1) }
        let hit = KeyArrays(numbers: sets.map { $0.hit.map { residentKeys[$0] } })
        let miss = KeyArrays(numbers: sets.map { $0.miss.map { NSNumber(value: $0) } })
        let ins = KeyArrays(numbers: sets.map { $0.insert.map { NSNumber(value: $0) } })
        let shared = SendableNSCache(cache: cache)
        let hitT = timeRounds(threads, ops) { t, r in
            var found = 0, ids = 0
            for k in hit.numbers[t][r] {
                if let v = shared.cache.object(forKey: k) { (found, ids) = (found + 1, ids &+ v.id) }
            }
            precondition(found > 0 && ids >= 0)
        }
        let missT = timeRounds(threads, ops) { t, r in
            var found = 0
            for k in miss.numbers[t][r] where shared.cache.object(forKey: k) != nil { found += 1 }
            precondition(found == 0)
        }
        let insT = timeRounds(threads, ops) { t, r in
            for k in ins.numbers[t][r] { shared.cache.setObject(fresh, forKey: k, cost: 1) }
        }
        return OpRow(
            impl: impl, entries: n, threads: threads, hitNs: hitT,
            missNs: missT, insertNs: insT)
    }
}

/// The cost of the bare minimum a locked hash-map lookup pays on this machine (the memory
/// latency of a uniformly random key), as a yardstick for the hit timings.
func measureFloor(entries n: Int, ops: Int) -> Double {
    var rng = SplitMix64(seed: 99)
    let keys = (0..<ops).map { _ in Int(rng.next() % UInt64(n)) }
    var dict = [Int: Payload](minimumCapacity: n)
    for k in 0..<n { dict[k] = Payload(k) }
    let map = Strata.Lock(dict)
    dict = [:]
    let slices = KeyArrays(ints: [keys])
    return timeRounds(1, ops) { _, r in
        var found = 0, ids = 0
        for k in slices.ints[0][r] {
            if let v = map.withLock({ $0[k] }) { (found, ids) = (found + 1, ids &+ v.id) }
        }
        precondition(found == slices.ints[0][r].count && ids >= 0)
    }
}

/// Mean over threads of (thread time / operations): the latency of one operation while the
/// other threads run the same loop.
func perOp(_ times: [Double], _ ops: Int) -> Double {
    times.reduce(0, +) / Double(times.count) / Double(ops) * 1e9
}

enum TraceGenerator {
    /// Zipf(alpha) over `keys` keys; rank r is key `permutation[r]` so popularity is not
    /// correlated with the key's value.
    static func zipf(alpha: Double, keys: Int, requests: Int, seed: UInt64) -> [Int] {
        var rng = SplitMix64(seed: seed)
        var cdf = [Double](repeating: 0, count: keys)
        var sum = 0.0
        for r in 0..<keys {
            sum += 1 / pow(Double(r + 1), alpha)
            cdf[r] = sum
        }
        let permutation = Array(0..<keys).shuffled(using: &rng)
        var trace = [Int]()
        trace.reserveCapacity(requests)
        for _ in 0..<requests {
            let u = Double(rng.next() >> 11) / Double(1 << 53) * sum
            var lo = 0, hi = keys - 1
            while lo < hi {
                let mid = (lo + hi) / 2
                if cdf[mid] < u { lo = mid + 1 } else { hi = mid }
            }
            trace.append(permutation[lo])
        }
        return trace
    }

    /// The Zipf trace with, every 100 000 requests, a one-pass scan of 10 000 never-seen keys
    /// replacing 10 000 requests (10 % of the traffic is a scan).
    static func zipfWithScans(alpha: Double, keys: Int, requests: Int, seed: UInt64) -> [Int] {
        var trace = zipf(alpha: alpha, keys: keys, requests: requests, seed: seed)
        var nextCold = keys
        var start = 90_000
        while start < trace.count {
            for i in start..<Swift.min(trace.count, start + 10_000) {
                trace[i] = nextCold
                nextCold += 1
            }
            start += 100_000
        }
        return trace
    }

    /// Miss ratio of Strata's MemoryCache (unit costs, count limit = capacity).
    static func strataMissRatio(_ trace: [Int], capacity: Int) -> Double {
        let cache = MemoryCache<Int, Int>(costLimit: capacity, countLimit: capacity, maxEntryShare: 1)
        var misses = 0
        for k in trace where cache.value(forKey: k) == nil {
            misses += 1
            cache.insert(k, forKey: k, cost: 1)
        }
        return Double(misses) / Double(trace.count)
    }

    /// The same with a given number of stripes.
    static func strataMissRatio(_ trace: [Int], capacity: Int, stripes: Int) -> Double {
        let cache = MemoryCache<Int, Int>(costLimit: capacity, countLimit: capacity, maxEntryShare: 1, stripes: stripes)
        var misses = 0
        for k in trace where cache.value(forKey: k) == nil {
            misses += 1
            cache.insert(k, forKey: k, cost: 1)
        }
        return Double(misses) / Double(trace.count)
    }

    /// Miss ratio of a textbook LRU (hash map + doubly-linked list) of `capacity` entries.
    static func lruMissRatio(_ trace: [Int], capacity: Int) -> Double {
        var index = [Int: Int32](minimumCapacity: capacity)
        var keys = [Int](repeating: 0, count: capacity)
        var prev = [Int32](repeating: -1, count: capacity)
        var next = [Int32](repeating: -1, count: capacity)
        var head: Int32 = -1, tail: Int32 = -1, used = 0
        func unlink(_ i: Int32) {
            if prev[Int(i)] >= 0 { next[Int(prev[Int(i)])] = next[Int(i)] } else { head = next[Int(i)] }
            if next[Int(i)] >= 0 { prev[Int(next[Int(i)])] = prev[Int(i)] } else { tail = prev[Int(i)] }
        }
        func pushTail(_ i: Int32) {
            prev[Int(i)] = tail
            next[Int(i)] = -1
            if tail >= 0 { next[Int(tail)] = i } else { head = i }
            tail = i
        }
        var misses = 0
        for k in trace {
            if let i = index[k] {
                unlink(i)
                pushTail(i)
                continue
            }
            misses += 1
            let slot: Int32
            if used < capacity {
                slot = Int32(used)
                used += 1
            } else {
                slot = head
                unlink(slot)
                index.removeValue(forKey: keys[Int(slot)])
            }
            keys[Int(slot)] = k
            index[k] = slot
            pushTail(slot)
        }
        return Double(misses) / Double(trace.count)
    }
}
