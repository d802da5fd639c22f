import Strata

/// The image memory tier's operations (`ImageMemoryTier`, what the engine and `strata serve`
/// look up): `n` keys with one 4×4 variant each (each its own pixels), looked up by their exact
/// box through `entry(forKey:matching:)`; misses ask for absent keys; insert+evict adds new
/// keys to the full tier. Each hit reads a field of the image it gets, as `measureOps` does.
func measureTierOps(entries n: Int, threads: Int, ops: Int) -> OpRow {
    let size = PixelSize(width: 4, height: 4)
    let cost = PixelImage(width: 4, height: 4).byteCount
    let tier = ImageMemoryTier(configuration: .init(costLimit: n * cost, countLimit: n, maxEntryShare: 1))
    for k in 0..<n { tier.insert(PixelImage(width: 4, height: 4), forKey: CacheKey("k\(k)"), mode: .fit) }
    func keySets(_ seed: UInt64) -> (hit: [String], miss: [String], insert: [String]) {
        var rng = SplitMix64(seed: seed)
        let hit = (0..<ops).map { _ in "k\(rng.next() % UInt64(n))" }
        let miss = (0..<ops).map { _ in "k\(UInt64(n) + rng.next() % UInt64(n))" }
        let insert = (0..<ops).map { i in "k\(2 * n + Int(seed) * ops + i)" }
        return (hit, miss, insert)
    }
    let sets = (0..<threads).map { keySets(UInt64($0 + 1)) }
    let hit = KeyArrays(strings: sets.map(\.hit))
    let miss = KeyArrays(strings: sets.map(\.miss))
    let ins = KeyArrays(strings: sets.map(\.insert))
    let query = SizeQuery(box: size)
    let fresh = PixelImage(width: 4, height: 4)
    let hitT = timeRounds(threads, ops) { t, r in
        var found = 0, widths = 0
        for k in hit.cacheKeys[t][r] {
            if let entry = tier.entry(forKey: k, matching: query) { (found, widths) = (found + 1, widths &+ entry.image.width) }
        }
        precondition(found > 0 && widths >= 0)
    }
    let missT = timeRounds(threads, ops) { t, r in
        var found = 0
        for k in miss.cacheKeys[t][r] where tier.entry(forKey: k, matching: query) != nil { found += 1 }
        precondition(found == 0)
    }
    let insT = timeRounds(threads, ops) { t, r in
        for k in ins.cacheKeys[t][r] { tier.insert(fresh, forKey: k, mode: .fit) }
    }
    precondition(tier.statistics.count <= n)
    return OpRow(impl: .tier, entries: n, threads: threads, hitNs: hitT, missNs: missT, insertNs: insT)
}
