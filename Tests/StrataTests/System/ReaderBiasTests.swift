import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata

@Suite struct ReaderBiasTests {
    @Test("readers get in while biased and are turned away while revoked; hits and misses are handed over once")
    func enterRevokeRestore() {
        let bias = ReaderBias(structures: 3)
        for hit in [true, true, false, true] {
            guard let cell = bias.enter(1) else {
                Issue.record("a reader was turned away with no writer about")
                return
            }
            bias.leave(cell, hit: hit)
        }
        for _ in 0..<2 {
            if let cell = bias.enter(1) { bias.leaveMissing(cell) } else { Issue.record("a reader was turned away") }
        }
        let first = bias.revoke(1)
        #expect(first.hits == 3 && first.misses == 2)
        if let cell = bias.enter(1) {
            Issue.record("a reader got in while a writer holds the structure")
            bias.leave(cell, hit: false)
        }
        if let cell = bias.enter(2) { bias.leave(cell, hit: true) } else { Issue.record("another structure was turned away") }
        bias.restore(1)
        let second = bias.revoke(1)
        #expect(second.hits == 0 && second.misses == 0, "the same counts were handed over twice")
        bias.restore(1)
        #expect(bias.revoke(2).hits == 1)
        bias.restore(2)
        #expect(bias.enter(1) != nil)
    }

    /// A writer's revoke waits while a reader is inside, and returns once it leaves.
    @Test func revokeWaitsForReadersInside() throws {
        let bias = ReaderBias(structures: 1)
        let inside = Atomic<Bool>(false)
        let release = Atomic<Bool>(false)
        let revoked = Atomic<Bool>(false)
        let reader = try OSThread(name: "reader") {
            guard let cell = bias.enter(0) else { return }
            inside.store(true, ordering: .releasing)
            while !release.load(ordering: .acquiring) { usleep(100) }
            bias.leave(cell, hit: true)
        }
        for _ in 0..<50_000 where !inside.load(ordering: .acquiring) { usleep(100) }
        let readerEntered = inside.load(ordering: .acquiring)
        #expect(readerEntered)
        let writer = try OSThread(name: "writer") {
            _ = bias.revoke(0)
            revoked.store(true, ordering: .releasing)
        }
        usleep(20_000)  // time enough for a revoke that does not wait to return
        let revokedEarly = revoked.load(ordering: .acquiring)
        #expect(!revokedEarly, "revoke returned with a reader inside")
        release.store(true, ordering: .releasing)
        writer.join()
        reader.join()
        let revokedAfter = revoked.load(ordering: .acquiring)
        #expect(revokedAfter)
    }
}

@Suite("MemoryCache lock-free hits")
struct MemoryCacheSharedHitTests {
    final class Box: Sendable {
        let key: String
        init(_ key: String) { self.key = key }
    }

    /// Readers hit without the lock while a writer inserts, replaces, removes and trims (index
    /// shifts, growth and evictions free keys and values): every value served belongs to its key,
    /// and the hits and misses counted add up to the lookups made. Heap-allocated keys and values
    /// make a read of freed memory crash here (and show under the sanitizers).
    @Test(arguments: [1, 4])
    func readersAndAWriter(stripes: Int) throws {
        let cache = MemoryCache<String, Box>(costLimit: 600, countLimit: 600, maxEntryShare: 0.01, stripes: stripes)
        let keys = (0..<1_000).map { "key-\($0)-" + String(repeating: "x", count: 24) }
        for key in keys.prefix(500) { cache.insert(Box(key), forKey: key, cost: 1) }
        let (lookupCount, wrongValues) = try ConcurrentReaders.run(seed: 900) { rng in
            let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
            return cache.value(forKey: key).map { $0.key == key } ?? true
        } writer: {
            var rng = MemoryCacheTests.Rng(state: 77)
            for i in 0..<30_000 {
                let key = keys[Int.random(in: 0..<keys.count, using: &rng)]
                switch i % 16 {
                case 0..<11: cache.insert(Box(key), forKey: key, cost: 1)
                case 11..<15: cache.removeValue(forKey: key)
                default: cache.trim(toCost: 300)
                }
            }
        }
        #expect(wrongValues == 0)
        let s = cache.statistics
        #expect(s.hits + s.misses == UInt64(lookupCount))
        #expect(s.hits > 0 && s.misses > 0)
        #expect(s.count <= 600 && s.count == cache.keys.count)
    }
}

/// Three reader threads looping over `lookup` (which says whether what it was served is right)
/// while `writer` runs on the calling thread, each reader at least `minimumLookups` times.
enum ConcurrentReaders {
    static func run(
        seed: UInt64, minimumLookups: Int = 20_000, _ lookup: @escaping @Sendable (inout MemoryCacheTests.Rng) -> Bool,
        writer: () -> Void
    ) throws -> (lookups: Int, wrong: Int) {
        let done = Atomic<Bool>(false)
        let lookups = Atomic<Int>(0)
        let wrong = Atomic<Int>(0)
        let readers = try (0..<3).map { t in
            try OSThread(name: "reader-\(t)") {
                var rng = MemoryCacheTests.Rng(state: seed + UInt64(t))
                var n = 0
                while !done.load(ordering: .relaxed) || n < minimumLookups {
                    if !lookup(&rng) { wrong.add(1, ordering: .relaxed) }
                    n += 1
                }
                lookups.add(n, ordering: .relaxed)
            }
        }
        writer()
        done.store(true, ordering: .relaxed)
        for reader in readers { reader.join() }
        return (lookups.load(ordering: .relaxed), wrong.load(ordering: .relaxed))
    }
}
