#if canImport(Glibc)
import Glibc
#endif
import Testing
@testable import Strata

@Suite("PixelMemory")
struct PixelMemoryTests {
    @Test("size classes are whole pages, at most a quarter above the size asked, and few")
    func sizeClasses() {
        let page = MappedRegion.pageSize
        var classes = Set<Int>()
        for count in stride(from: PixelMemory.threshold, through: 64 << 20, by: 12_345) {
            let size = PixelMemory.sizeClass(count)
            #expect(size >= count)
            #expect(size % page == 0)
            #expect(Double(size) <= Double(count) * 1.25 + Double(page))
            classes.insert(size)
        }
        // 256 KiB to 64 MiB: 8 doublings of 4 steps each.
        #expect(classes.count <= 8 * 4 + 1)
    }

    @Test("a cached mapping up to twice the size asked serves it; a larger one does not")
    func bestFit() {
        let memory = PixelMemory(cacheLimit: 64 << 20)
        let big = memory.allocate(6 << 20, zeroed: false)
        memory.release(big.base, length: big.length)
        let smaller = memory.allocate(4 << 20, zeroed: false)
        #expect(smaller.base == big.base && smaller.length == big.length)
        let other = memory.allocate(1 << 20, zeroed: false)
        #expect(other.base != big.base)
        #expect(memory.statistics.reused == 1 && memory.statistics.mapped == 2)
        memory.release(smaller.base, length: smaller.length)
        memory.release(other.base, length: other.length)
        memory.trim()
    }

    @Test("a freed buffer is reused from the cache, zeroed when asked, and counted")
    func reuse() {
        let memory = PixelMemory(cacheLimit: 8 << 20)
        let count = 1 << 20
        let first = memory.allocate(count, zeroed: false)
        first.base.storeBytes(of: 0xAB, as: UInt8.self)
        #expect(memory.statistics.inUseBytes == first.length)
        memory.release(first.base, length: first.length)
        #expect(memory.statistics.cachedBytes == first.length)
        #expect(memory.statistics.inUseBytes == 0)
        let second = memory.allocate(count, zeroed: true)
        #expect(second.base == first.base)
        #expect(second.base.load(as: UInt8.self) == 0)
        let stats = memory.statistics
        #expect(stats.mapped == 1 && stats.reused == 1 && stats.cachedBytes == 0)
        memory.release(second.base, length: second.length)
        memory.trim()
        #expect(memory.statistics.cachedBytes == 0)
        #expect(memory.statistics.unmapped == 1)
    }

    @Test("the cache keeps at most its limit; a lower limit unmaps the excess at once")
    func bounded() {
        let memory = PixelMemory(cacheLimit: 3 << 20)
        let buffers = (0..<6).map { _ in memory.allocate(1 << 20, zeroed: false) }
        for buffer in buffers { memory.release(buffer.base, length: buffer.length) }
        #expect(memory.statistics.cachedBytes <= 3 << 20)
        #expect(memory.statistics.cachedBytes >= 2 << 20)
        #expect(memory.statistics.unmapped >= 3)
        memory.cacheLimit = 1 << 20
        #expect(memory.statistics.cachedBytes <= 1 << 20)
        memory.cacheLimit = 0
        #expect(memory.statistics.cachedBytes == 0)
        // With no cache every release unmaps.
        let one = memory.allocate(1 << 20, zeroed: false)
        memory.release(one.base, length: one.length)
        #expect(memory.statistics.cachedBytes == 0)
    }

    @Test("mappings unused for the cache's age go back to the kernel on a later release")
    func decay() async throws {
        let memory = PixelMemory(cacheLimit: 64 << 20, cacheAge: .milliseconds(1))
        let old = memory.allocate(2 << 20, zeroed: false)
        memory.release(old.base, length: old.length)
        #expect(memory.statistics.cachedBytes == old.length)
        // The decay looks at most once a second, on a release.
        try await Task.sleep(for: .milliseconds(1100))
        // Larger than twice the cached one: a fresh mapping, not a reuse of it.
        let fresh = memory.allocate(5 << 20, zeroed: false)
        memory.release(fresh.base, length: fresh.length)
        #expect(memory.statistics.cachedBytes == fresh.length)
        #expect(memory.statistics.unmapped == 1)
        memory.trim()
    }

    @Test(
        "large pixel storage comes from the shared mappings and goes back to them; small from malloc",
        .enabled(if: PixelMemory.threshold < .max, "under the address sanitizer every buffer is malloc's"))
    func storage() {
        let before = PixelMemory.shared.statistics
        let heapBefore = PixelStorageCounters.liveBytes(.heap)
        do {
            let big = PixelStorage(zeroedByteCount: 3 << 20)
            #expect(Int(bitPattern: big.base) % MappedRegion.pageSize == 0)
            #expect(PixelMemory.shared.statistics.inUseBytes >= before.inUseBytes + (3 << 20))
            #expect(PixelStorageCounters.liveBytes(.heap) >= heapBefore + (3 << 20))
            let small = PixelStorage(uninitializedByteCount: 1024)
            #expect(small.count == 1024)
        }
        // Other suites run beside this one: the shared pool's counts only move together.
        let after = PixelMemory.shared.statistics
        #expect(after.mapped + after.reused > before.mapped + before.reused)
    }
}
