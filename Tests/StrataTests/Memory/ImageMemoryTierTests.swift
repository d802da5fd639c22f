#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import Testing
@testable import Strata

@Suite("ImageMemoryTier")
struct ImageMemoryTierTests {
    func image(_ w: Int, _ h: Int, style: PixelStyle = .default) -> PixelImage {
        PixelImage(width: w, height: h, style: style)
    }

    @Test("a tolerance lookup returns the variant the shared rule picks")
    func toleranceLookup() {
        let tier = ImageMemoryTier(configuration: .init(costLimit: 64 << 20))
        let sizes = [(90, 60), (100, 66), (118, 79), (160, 107), (60, 40)]
        for (w, h) in sizes { #expect(tier.insert(image(w, h), forKey: "k", mode: .fit)) }
        tier.insert(image(100, 100), forKey: "k", mode: .fill)
        tier.insert(image(100, 66, style: .gray8), forKey: "k", mode: .fit)
        tier.insert(image(100, 66), forKey: "other", mode: .fit)
        let held = tier.variants(forKey: "k")
        #expect(held.count == 7)
        let queries = [
            SizeQuery(box: PixelSize(width: 100, height: 100)),
            SizeQuery(box: PixelSize(width: 110, height: 110)),
            SizeQuery(box: PixelSize(width: 150, height: 150)),
            SizeQuery(box: PixelSize(width: 200, height: 200), tolerance: 0.1),
            SizeQuery(box: PixelSize(width: 100, height: 66), tolerance: 0),
            SizeQuery(box: PixelSize(width: 105, height: 105), mode: .fill),
            SizeQuery(box: PixelSize(width: 100, height: 66), style: .gray8),
            SizeQuery(box: PixelSize(width: 100, height: 66), style: .rgb565),
        ]
        for query in queries {
            let expected = VariantMatcher.bestMatch(in: held, for: query)
            let found = tier.image(forKey: "k", matching: query)
            #expect(found?.1 == expected, "query \(query.box) \(query.mode) \(query.style)")
            if let (img, variant) = found {
                #expect(img.size == variant.size && img.style == variant.style)
            }
        }
        // Spot checks of the rule itself: closest fill ratio wins, the larger wins a tie.
        #expect(
            tier.image(forKey: "k", matching: SizeQuery(box: PixelSize(width: 100, height: 100)))?.1.size
                == PixelSize(width: 100, height: 66))
        let tie = ImageMemoryTier()
        tie.insert(image(90, 90), forKey: "t", mode: .fit)
        tie.insert(image(110, 110), forKey: "t", mode: .fit)
        #expect(
            tie.image(forKey: "t", matching: SizeQuery(box: PixelSize(width: 100, height: 100)))?.1.size
                == PixelSize(width: 110, height: 110))
        #expect(tie.image(forKey: "t", matching: SizeQuery(box: PixelSize(width: 150, height: 150))) == nil)
        #expect(tie.image(forKey: "missing", matching: SizeQuery(box: PixelSize(width: 100, height: 100))) == nil)
        let s = tie.statistics
        #expect(s.hits == 1 && s.misses == 2)
    }

    @Test("the tier is indexed by the key's identity, yet two keys with one identity never share images")
    func identityAndKeyString() {
        let tier = ImageMemoryTier(configuration: .init(costLimit: 64 << 20))
        let first = CacheKey("photo/a"), forged = CacheKey("photo/b", forgedEntityID: first.entityID)
        let query = SizeQuery(box: PixelSize(width: 100, height: 100))
        tier.insert(image(100, 66), forKey: first, mode: .fit)
        #expect(tier.entry(forKey: forged, matching: query) == nil, "another key's image was served")
        #expect(tier.records(forKey: forged).isEmpty && tier.records(forKey: first).count == 1)
        #expect(tier.remove(key: forged) { _ in true } == 0 && tier.records(forKey: first).count == 1)
        // The later key takes the identity's place: the earlier one's images leave with it.
        tier.insert(image(90, 60), forKey: forged, mode: .fit)
        #expect(tier.entry(forKey: first, matching: query) == nil)
        #expect(tier.entry(forKey: forged, matching: query)?.image.size == PixelSize(width: 90, height: 60))
        #expect(tier.statistics.count == 1 && tier.indexIsConsistent())
        // A removal by identity alone (a disk file another process deleted) finds the images.
        #expect(tier.remove(entity: first.entityID) { _ in true } == 1)
        #expect(tier.statistics.count == 0 && tier.indexIsConsistent())
    }

    @Test("cost: heap and table slots count their bytes, file mappings one page by default")
    func costs() {
        let heap = image(100, 10)
        #expect(ImageMemoryTier.cost(of: heap) == heap.byteCount)
        let bytes = 64 * 1024
        let raw = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        let mapped = PixelStorage(borrowing: raw, count: bytes, kind: .fileMapping, writable: false) { p, _ in p.deallocate() }
        let mappedImage = PixelImage(width: 64, height: 64, bytesPerRow: 256, style: .default, storage: mapped, offset: 0)
        #expect(ImageMemoryTier.cost(of: mappedImage) == 4096)
        #expect(ImageMemoryTier.cost(of: mappedImage, fileMappingShare: 0.5) == mappedImage.byteCount / 2)
        let raw2 = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        let slot = PixelStorage(borrowing: raw2, count: bytes, kind: .tableSlot, writable: true) { p, _ in p.deallocate() }
        let slotImage = PixelImage(width: 64, height: 64, bytesPerRow: 256, style: .default, storage: slot, offset: 0)
        #expect(ImageMemoryTier.cost(of: slotImage) == slotImage.byteCount)
        let tier = ImageMemoryTier(configuration: .init(costLimit: 1 << 20))
        tier.insert(heap, forKey: "a", mode: .fit)
        tier.insert(mappedImage, forKey: "b", mode: .fit)
        tier.insert(slotImage, forKey: "c", mode: .fit)
        #expect(tier.totalCost == heap.byteCount + 4096 + slotImage.byteCount)
    }

    @Test("an image above the per-entry share is refused and an older equal variant dropped")
    func oversize() {
        let tier = ImageMemoryTier(configuration: .init(costLimit: 100_000))
        let small = image(16, 16)  // 64 B rows × 16 = 1 KiB
        #expect(tier.insert(small, forKey: "k", mode: .fit))
        let big = image(64, 64)  // 16 KiB > 10 KB
        #expect(!tier.insert(big, forKey: "k", mode: .fit))
        #expect(tier.variants(forKey: "k").map(\.size) == [small.size])
        #expect(tier.statistics.rejections == 1)
        #expect(tier.indexIsConsistent())
    }

    @Test("evictions, remove(key), trim and removeAll keep the variant index exact")
    func indexConsistency() {
        let tier = ImageMemoryTier(configuration: .init(costLimit: 200_000, countLimit: 40))
        var rng = MemoryCacheTests.Rng(state: 9)
        for i in 0..<600 {
            let key = CacheKey("img\(Int.random(in: 0..<30, using: &rng))")
            let side = [16, 20, 24, 32, 40][Int.random(in: 0..<5, using: &rng)]
            switch i % 7 {
            case 0..<4:
                tier.insert(image(side, side), forKey: key, mode: Bool.random(using: &rng) ? .fit : .fill)
            case 4, 5:
                if let (img, v) = tier.image(forKey: key, matching: SizeQuery(box: PixelSize(width: side, height: side))) {
                    #expect(img.size == v.size)
                    #expect(tier.variants(forKey: key).contains(v))
                }
            default:
                if i % 21 == 6 { tier.trim(toCost: 50_000) } else { tier.remove(key: key) }
                if i % 21 != 6 { #expect(tier.variants(forKey: key).isEmpty) }
            }
            #expect(tier.indexIsConsistent())
            let s = tier.statistics
            #expect(s.totalCost <= 200_000 && s.count <= 40)
        }
        #expect(tier.statistics.evictions > 0)
        tier.removeAll()
        #expect(tier.statistics.count == 0 && tier.statistics.keyCount == 0 && tier.indexIsConsistent())
    }

    @Test("evicted mapped images are released once the tier drops them")
    func releasesEvictedStorage() {
        final class Counter: Sendable { let released = Atomic<Int>(0) }
        let counter = Counter()
        let tier = ImageMemoryTier(configuration: .init(costLimit: 1 << 20, countLimit: 4))
        for i in 0..<10 {
            let raw = UnsafeMutableRawPointer.allocate(byteCount: 4096, alignment: 64)
            let storage = PixelStorage(borrowing: raw, count: 4096, kind: .fileMapping, writable: false) { p, _ in
                p.deallocate()
                counter.released.add(1, ordering: .relaxed)
            }
            tier.insert(
                PixelImage(width: 16, height: 16, bytesPerRow: 64, style: .default, storage: storage, offset: 0),
                forKey: CacheKey("m\(i)"), mode: .fit)
        }
        #expect(tier.statistics.count == 4)
        #expect(counter.released.load(ordering: .relaxed) == 6)
        tier.removeAll()
        #expect(counter.released.load(ordering: .relaxed) == 10)
    }

    @Test("bad configuration values name the key")
    func configurationErrors() {
        #expect(throws: MemoryTierConfigurationError(key: "maxEntryShare", reason: "must be within 0...1, got 2.0")) {
            try ImageMemoryTier.Configuration(maxEntryShare: 2).validate()
        }
        let tier = ImageMemoryTier()
        #expect(throws: MemoryTierConfigurationError.self) {
            try tier.reconfigure(.init(costLimit: -1))
        }
        #expect(tier.configuration.costLimit == 256 << 20, "a rejected reload changes nothing")
    }

    @Test("a smaller limit on reload evicts at once")
    func reconfigureEvicts() throws {
        let tier = ImageMemoryTier(configuration: .init(costLimit: 1 << 20, countLimit: 100))
        for i in 0..<50 { tier.insert(image(16, 16), forKey: CacheKey("k\(i)"), mode: .fit) }
        try tier.reconfigure(.init(costLimit: 1 << 20, countLimit: 10))
        #expect(tier.statistics.count == 10 && tier.indexIsConsistent())
    }

    @Test("concurrent tasks: lookups, inserts, removals and trims keep the index exact")
    func concurrentStress() async {
        let tier = ImageMemoryTier(configuration: .init(costLimit: 300_000, countLimit: 64))
        let images = [16, 24, 32, 48].map { PixelImage(width: $0, height: $0) }
        await withTaskGroup(of: Void.self) { group in
            for t in 0..<4 {
                group.addTask {
                    var rng = MemoryCacheTests.Rng(state: UInt64(t) + 40)
                    for i in 0..<1_500 {
                        let key = CacheKey("k\(Int.random(in: 0..<40, using: &rng))")
                        let img = images[Int.random(in: 0..<images.count, using: &rng)]
                        switch i % 10 {
                        case 0..<4: tier.insert(img, forKey: key, mode: .fit)
                        case 4..<8:
                            if let (found, v) = tier.image(forKey: key, matching: SizeQuery(box: img.size)) {
                                precondition(found.size == v.size)
                            }
                        case 8: tier.remove(key: key)
                        default: if i % 100 == 9 { tier.trim(toCost: 100_000) } else { _ = tier.statistics }
                        }
                    }
                }
            }
        }
        #expect(tier.indexIsConsistent())
        let s = tier.statistics
        #expect(s.totalCost <= 300_000 && s.count <= 64)
    }

    /// Lookups on three threads take no lock while a writer inserts, replaces, removes and
    /// trims: each image served is the one held for its key (its width encodes the key), and
    /// the hits and misses counted add up to the lookups made.
    @Test func lockFreeLookupsBesideAWriter() throws {
        let tier = ImageMemoryTier(configuration: .init(costLimit: 400_000, countLimit: 48))
        let images = (0..<64).map { PixelImage(width: 16 + $0, height: 16) }
        let (lookupCount, wrongImages) = try ConcurrentReaders.run(seed: 70) { rng in
            let i = Int.random(in: 0..<images.count, using: &rng)
            guard let (found, variant) = tier.image(forKey: CacheKey("k\(i)"), matching: SizeQuery(box: images[i].size)) else {
                return true
            }
            return found.width == 16 + i && variant.size == found.size
        } writer: {
            var rng = MemoryCacheTests.Rng(state: 5)
            for step in 0..<30_000 {
                let i = Int.random(in: 0..<images.count, using: &rng)
                switch step % 12 {
                case 0..<8: tier.insert(images[i], forKey: CacheKey("k\(i)"), mode: .fit)
                case 8..<11: tier.remove(key: CacheKey("k\(i)"))
                default: tier.trim(toCost: 100_000)
                }
            }
        }
        #expect(wrongImages == 0)
        let s = tier.statistics
        #expect(s.hits + s.misses == UInt64(lookupCount))
        #expect(s.hits > 0 && s.misses > 0)
        #expect(tier.indexIsConsistent())
    }
}
