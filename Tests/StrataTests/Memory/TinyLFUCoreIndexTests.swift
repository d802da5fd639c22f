import Testing
@testable import Strata

/// White-box checks of ``TinyLFUCore``'s index: each entry's key, value and hit state sit beside
/// its index word and must move with it when a removal shifts a probe run back or the index grows.
@Suite("TinyLFUCore index")
struct TinyLFUCoreIndexTests {
    /// A key whose hash takes 8 values: probe runs are long and every removal shifts entries.
    struct Colliding: Hashable {
        let id: Int
        func hash(into hasher: inout Hasher) { hasher.combine(id % 8) }
        static func == (a: Colliding, b: Colliding) -> Bool { a.id == b.id }
    }

    @Test("key, value and hit state stay with their entry through shifts and growth", arguments: [1, 2, 3])
    func entriesMoveWhole(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        var core = TinyLFUCore<Colliding, Int>(costLimit: 100_000, countLimit: 100_000, maxEntryShare: 1)
        let epoch = core.sketch.epoch
        // Model: value and hits since the last insert, per resident key (the limits never evict).
        var model: [Int: (value: Int, hits: Int)] = [:]
        for step in 0..<2_000 {
            let id = Int.random(in: 0..<200, using: &rng)
            let key = Colliding(id: id)
            switch Int.random(in: 0..<10, using: &rng) {
            case 0..<4:
                let admitted = core.insert(step, forKey: key, cost: 1, evicted: { _, _ in Issue.record("evicted") })
                #expect(admitted)
                // A replacement counts as an access of the resident entry.
                model[id] = (step, model[id].map { $0.hits + 1 } ?? 0)
            case 4..<7:
                let value = core.value(forKey: key)
                #expect(value == model[id]?.value)
                if value != nil { model[id]!.hits += 1 }
            default:
                let removed = core.remove(key)
                #expect(removed == model[id]?.value)
                model[id] = nil
            }
            let count = core.count
            #expect(count == model.count)
            core.forEachPosition { p in
                let key = core.indexKeys[p]
                let slot = TinyLFUCore<Colliding, Int>.slot(core.table[p])
                let (hash, value) = (core.nodes[Int(slot)].hash, core.indexValues[p])
                let (hits, referenced, position) = (core.agedHits(at: p), core.indexHot[p].referenced, core.position(ofSlot: slot))
                #expect(hash == key.hashValue, "the word points at its key's node")
                #expect(value == model[key.id]?.value, "the value moved with its key")
                #expect(hits == min(15, model[key.id]?.hits ?? -1), "the hit count moved with its key")
                #expect(referenced == (model[key.id]?.hits ?? 0 > 0), "the referenced bit moved with its key")
                #expect(position == p)
            }
        }
        let (finalEpoch, size) = (core.sketch.epoch, core.tableMask + 1)
        #expect(finalEpoch == epoch, "no halving ran, so hit counts are exact")
        #expect(size >= 256, "the index grew on the way")
    }
}
