import Synchronization
import Testing
@testable import Strata

@Suite("MemoryCache")
struct MemoryCacheTests {
    /// A seeded generator so failures reproduce.
    typealias Rng = SplitMix64

    @Test(
        "limits hold after any operation sequence; contents agree with a reference model",
        arguments: [1, 2, 3, 4, 5, 6])
    func randomisedAgainstModel(seed: UInt64) {
        var rng = Rng(state: seed)
        var costLimit = Int.random(in: 50...2_000, using: &rng)
        var countLimit = Int.random(in: 1...60, using: &rng)
        let share = [0.1, 0.5, 1.0][Int.random(in: 0...2, using: &rng)]
        let cache = MemoryCache<Int, Int>(costLimit: costLimit, countLimit: countLimit, maxEntryShare: share)
        // Model: the last value and cost stored per key that was not removed since. The cache
        // may have evicted any of them, but must never return anything else.
        var model: [Int: (value: Int, cost: Int)] = [:]
        var lookups: UInt64 = 0, hits: UInt64 = 0, insertions: UInt64 = 0, rejections: UInt64 = 0
        for step in 0..<3_000 {
            let key = Int.random(in: 0..<120, using: &rng)
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<45:
                let cost = Int.random(in: 0...(costLimit / 4 + 2), using: &rng)
                let admitted = cache.insert(step, forKey: key, cost: cost)
                let allowed = Double(cost) <= Double(costLimit) * share && countLimit > 0
                #expect(admitted == allowed, "insert of cost \(cost) with limit \(costLimit)×\(share)")
                if admitted {
                    insertions += 1
                    model[key] = (step, cost)
                    #expect(cache.contains(key), "a just-inserted entry is resident")
                } else {
                    rejections += 1
                    model[key] = nil
                    #expect(!cache.contains(key), "a refused insert leaves no stale value")
                }
            case 45..<85:
                lookups += 1
                if let v = cache.value(forKey: key) {
                    hits += 1
                    #expect(model[key]?.value == v, "served value must be the last one stored")
                }
            case 85..<93:
                let removed = cache.removeValue(forKey: key)
                if let removed { #expect(model[key]?.value == removed) }
                model[key] = nil
                #expect(!cache.contains(key))
            case 93..<97:
                let target = Int.random(in: 0...costLimit, using: &rng)
                cache.trim(toCost: target)
                #expect(cache.totalCost <= target)
            case 97..<99:
                costLimit = Int.random(in: 50...2_000, using: &rng)
                countLimit = Int.random(in: 1...60, using: &rng)
                cache.setLimits(costLimit: costLimit, countLimit: countLimit)
            default:
                cache.removeAll()
                model.removeAll()
                #expect(cache.count == 0 && cache.totalCost == 0)
            }
            let stats = cache.statistics
            #expect(stats.totalCost <= costLimit && stats.count <= countLimit)
            // Resident keys are model keys, and the total cost is exactly theirs.
            let resident = cache.keys
            #expect(resident.allSatisfy { model[$0] != nil })
            #expect(stats.totalCost == resident.reduce(0) { $0 + model[$1]!.cost })
            #expect(stats.count == resident.count)
        }
        let stats = cache.statistics
        #expect(stats.hits == hits && stats.misses == lookups - hits)
        #expect(stats.insertions == insertions && stats.rejections == rejections)
    }

    @Test("an entry above the per-entry share is refused; the default share is 10 %")
    func oversizeRefused() {
        let cache = MemoryCache<String, Int>(costLimit: 1_000, countLimit: 100)
        #expect(cache.insert(1, forKey: "a", cost: 100))
        #expect(!cache.insert(2, forKey: "b", cost: 101))
        #expect(cache.value(forKey: "b") == nil)
        // A refused replacement removes the older value instead of keeping a stale one.
        #expect(!cache.insert(3, forKey: "a", cost: 500))
        #expect(cache.value(forKey: "a") == nil)
        #expect(cache.statistics.rejections == 2)
        #expect(cache.totalCost == 0)
    }

    @Test("statistics count hits, misses, insertions and evictions")
    func statistics() {
        let cache = MemoryCache<Int, String>(costLimit: 100, countLimit: 3, maxEntryShare: 1)
        for k in 0..<5 { cache.insert("v\(k)", forKey: k, cost: 10) }
        var found = 0
        for k in 0..<5 where cache.value(forKey: k) != nil { found += 1 }
        let s = cache.statistics
        #expect(s.insertions == 5)
        #expect(s.count == 3 && s.totalCost == 30)
        #expect(s.evictions == 2)
        #expect(s.hits == UInt64(found) && s.misses == UInt64(5 - found) && found == 3)
        cache.removeValue(forKey: cache.keys[0])
        #expect(cache.statistics.evictions == 2, "explicit removal is not an eviction")
        #expect(cache.count == 2)
    }

    @Test("frequently used entries survive a one-pass scan of new keys")
    func scanResistance() {
        let cache = MemoryCache<Int, Int>(costLimit: 1_000, countLimit: 100, maxEntryShare: 1)
        for k in 0..<100 { cache.insert(k, forKey: k, cost: 1) }
        for _ in 0..<5 { for k in 0..<100 { _ = cache.value(forKey: k) } }
        for k in 1_000..<3_000 where cache.value(forKey: k) == nil { cache.insert(k, forKey: k, cost: 1) }
        let survivors = (0..<100).filter { cache.contains($0) }.count
        #expect(survivors >= 90, "hot entries kept: \(survivors)/100")
        #expect(cache.count == 100)
    }

    @Test("trim(toCost:) and removeAll() free what they say")
    func trimAndRemoveAll() {
        let cache = MemoryCache<Int, Int>(costLimit: 10_000, maxEntryShare: 0.5)
        for k in 0..<100 { cache.insert(k, forKey: k, cost: 50) }
        #expect(cache.totalCost == 5_000)
        cache.trim(toCost: 1_234)
        #expect(cache.totalCost <= 1_234 && cache.totalCost > 1_234 - 50)
        #expect(cache.statistics.evictions == UInt64(100 - cache.count))
        cache.removeAll()
        #expect(cache.count == 0 && cache.totalCost == 0 && cache.keys.isEmpty)
        #expect(cache.insert(7, forKey: 7, cost: 50) && cache.value(forKey: 7) == 7)
    }

    @Test("the hash index finds every resident key through growth and many removals")
    func indexThroughRemovals() {
        let cache = MemoryCache<String, Int>(costLimit: 1 << 30, countLimit: 1 << 20, maxEntryShare: 1)
        for k in 0..<5_000 { cache.insert(k, forKey: "key-\(k)", cost: 1) }
        for k in stride(from: 0, to: 5_000, by: 3) { #expect(cache.removeValue(forKey: "key-\(k)") == k) }
        for k in stride(from: 1, to: 5_000, by: 7) { cache.insert(k + 1, forKey: "key-\(k)", cost: 1) }
        for k in 0..<5_000 {
            let expected: Int? = k % 7 == 1 ? k + 1 : (k % 3 == 0 ? nil : k)
            #expect(cache.value(forKey: "key-\(k)") == expected)
        }
        #expect(cache.count == 5_000 - (0..<5_000).filter { $0 % 3 == 0 && $0 % 7 != 1 }.count)
        #expect(Set(cache.keys).count == cache.count)
    }

    /// Counts the live ``Tracked`` values of one test.
    final class LiveCounter: Sendable {
        let live = Atomic<Int>(0)
        var value: Int { live.load(ordering: .relaxed) }
    }

    final class Tracked: Sendable {
        let id: Int
        let counter: LiveCounter
        init(_ id: Int, _ counter: LiveCounter) {
            self.id = id
            self.counter = counter
            counter.live.add(1, ordering: .relaxed)
        }
        deinit { counter.live.subtract(1, ordering: .relaxed) }
    }

    @Test("values are released on eviction, removal, removeAll and with the cache, past 2 MiB arrays")
    func releasesValuesThroughLargeArrays() {
        let counter = LiveCounter()
        do {
            // 60 000 entries: the node array and the sketch pass 2 MiB (their own mappings).
            let n = 60_000
            let cache = MemoryCache<Int, Tracked>(costLimit: n, countLimit: n, maxEntryShare: 1)
            for k in 0..<n { cache.insert(Tracked(k, counter), forKey: k, cost: 1) }
            #expect(cache.count == n && counter.value == n)
            for k in stride(from: 0, to: n, by: 97) { #expect(cache.value(forKey: k)?.id == k) }
            for k in n..<(n + 1_000) { cache.insert(Tracked(k, counter), forKey: k, cost: 1) }
            #expect(cache.count == n && counter.value == n)
            #expect(cache.removeValue(forKey: n + 999)?.id == n + 999)  // the newest is resident
            #expect(counter.value == n - 1)
            cache.removeAll()
            #expect(cache.count == 0 && counter.value == 0)
            for k in 0..<100 { cache.insert(Tracked(k, counter), forKey: k, cost: 1) }
            #expect(counter.value == 100)
        }
        #expect(counter.value == 0)
    }

    @Test("unbounded limits work (count-only and cost-only caches)")
    func unboundedLimits() {
        let countOnly = MemoryCache<Int, Int>(costLimit: .max, countLimit: 3, maxEntryShare: 1)
        for k in 0..<10 { #expect(countOnly.insert(k, forKey: k, cost: 1)) }
        #expect(countOnly.count == 3)
        let costOnly = MemoryCache<Int, Int>(costLimit: 100)
        for k in 0..<100 { costOnly.insert(k, forKey: k, cost: 10) }
        #expect(costOnly.totalCost == 100 && costOnly.count == 10)
    }

    @Test("a zero count limit admits nothing")
    func zeroCountLimit() {
        let cache = MemoryCache<Int, Int>(costLimit: 100, countLimit: 0)
        #expect(!cache.insert(1, forKey: 1, cost: 1))
        #expect(cache.count == 0)
    }

    @Test("concurrent tasks keep the limits and the statistics consistent")
    func concurrentStress() async {
        let cache = MemoryCache<Int, [Int]>(costLimit: 5_000, countLimit: 200, maxEntryShare: 0.05)
        await withTaskGroup(of: (UInt64, UInt64).self) { group in
            for t in 0..<4 {
                group.addTask {
                    var rng = Rng(state: UInt64(t) + 100)
                    var lookups: UInt64 = 0, inserts: UInt64 = 0
                    for i in 0..<4_000 {
                        let key = Int.random(in: 0..<600, using: &rng)
                        switch i % 10 {
                        case 0..<4:
                            if cache.insert([key, i], forKey: key, cost: Int.random(in: 1...250, using: &rng)) { inserts += 1 }
                        case 4..<9:
                            lookups += 1
                            if let v = cache.value(forKey: key) { precondition(v[0] == key) }
                        default:
                            if i % 100 == 9 { cache.trim(toCost: 2_500) } else { cache.removeValue(forKey: key) }
                        }
                    }
                    return (lookups, inserts)
                }
            }
            var lookups: UInt64 = 0, inserts: UInt64 = 0
            for await (l, i) in group {
                lookups += l
                inserts += i
            }
            let s = cache.statistics
            #expect(s.hits + s.misses == lookups)
            #expect(s.insertions == inserts)
        }
        let s = cache.statistics
        #expect(s.totalCost <= 5_000 && s.count <= 200)
        #expect(s.count == cache.keys.count)
    }
}

@Suite("MemoryCache stripes")
struct StripedMemoryCacheTests {
    @Test("limits hold and served values are the last stored, across stripes", arguments: [1, 2, 4, 8])
    func randomised(stripes: Int) {
        var rng = MemoryCacheTests.Rng(state: UInt64(stripes) * 7)
        let costLimit = 4_000, countLimit = 200
        let cache = MemoryCache<Int, Int>(
            costLimit: costLimit, countLimit: countLimit, maxEntryShare: 0.05,
            stripes: stripes)
        var model: [Int: Int] = [:]
        var lookups: UInt64 = 0
        for step in 0..<4_000 {
            let key = Int.random(in: 0..<500, using: &rng)
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<5:
                let cost = Int.random(in: 0...300, using: &rng)
                let admitted = cache.insert(step, forKey: key, cost: cost)
                if cost > 200 { #expect(!admitted, "cost \(cost) is above 5 % of \(costLimit)") }
                model[key] = admitted ? step : nil
            case 5..<9:
                lookups += 1
                if let v = cache.value(forKey: key) { #expect(model[key] == v) }
            default:
                cache.removeValue(forKey: key)
                model[key] = nil
            }
            let s = cache.statistics
            #expect(s.totalCost <= costLimit && s.count <= countLimit)
        }
        let s = cache.statistics
        #expect(s.hits + s.misses == lookups)
        #expect(s.count == cache.keys.count && cache.keys.allSatisfy { model[$0] != nil })
        cache.trim(toCost: 1_000)
        #expect(cache.totalCost <= 1_000)
        cache.removeAll()
        #expect(cache.count == 0)
    }

    @Test("concurrent tasks on a striped cache keep the limits")
    func concurrentStress() async {
        let cache = MemoryCache<Int, Int>(costLimit: 8_000, countLimit: 400, maxEntryShare: 0.02, stripes: 4)
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<4 {
                group.addTask {
                    var rng = MemoryCacheTests.Rng(state: UInt64(t) + 500)
                    for i in 0..<3_000 {
                        let key = Int.random(in: 0..<1_000, using: &rng)
                        switch i % 8 {
                        case 0..<3: cache.insert(key, forKey: key, cost: Int.random(in: 1...160, using: &rng))
                        case 3..<7: if let v = cache.value(forKey: key) { precondition(v == key) }
                        default: if i % 80 == 7 { cache.trim(toCost: 4_000) } else { cache.removeValue(forKey: key) }
                        }
                    }
                }
            }
        }
        let s = cache.statistics
        #expect(s.totalCost <= 8_000 && s.count <= 400)
    }

    /// A stripe's share of the limits does not cap an entry: one worth 40 % of the whole cache
    /// is admitted into a 16-stripe cache, the others in its way are evicted from any stripe.
    @Test func largeEntriesUseTheWholeBudget() {
        let cache = MemoryCache<Int, Int>(costLimit: 1_000, countLimit: 1_000, maxEntryShare: 0.5, stripes: 16)
        for k in 0..<100 { cache.insert(k, forKey: k, cost: 10) }
        #expect(cache.totalCost == 1_000)
        #expect(cache.insert(-1, forKey: 1_000, cost: 400))
        #expect(cache.value(forKey: 1_000) == -1)
        #expect(cache.totalCost <= 1_000 && cache.count == 61)
        #expect(cache.statistics.evictions == 40)
    }

    @Test func defaultStripesFollowTheLimits() {
        #expect(MemoryCache<Int, Int>.defaultStripes(costLimit: 100, countLimit: 100) == 1)
        let big = MemoryCache<Int, Int>.defaultStripes(costLimit: 1 << 30, countLimit: .max)
        #expect(big >= 2 && big <= 64 && big & (big - 1) == 0)
    }
}
