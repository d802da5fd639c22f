import Foundation
import Testing

@testable import Strata

/// `DiskTier.hitWithoutWaiting`: hits served from the dentry and page caches on the caller's
/// thread, and `.wouldWait` whenever serving would need the disk.
@Suite("Disk tier: hits that do not wait for the disk", .serialized)
struct DiskTierWithoutWaitingTests {
    let query = SizeQuery(box: PixelSize(width: 600, height: 600))

    /// Drops `path`'s clean pages from the page cache and waits a moment for any readahead in
    /// flight to land; true when its first page is then out of the cache (`mincore` tells
    /// without reading, so it brings nothing back). Tries a few times: a readahead started by an
    /// earlier non-waiting read may refill the page just after it was dropped.
    static func evictFromPageCache(_ path: String) throws -> Bool {
        let fd = open(path, O_RDONLY)
        try #require(fd >= 0)
        defer { close(fd) }
        fsync(fd)
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapping = try #require(mmap(nil, page, PROT_READ, MAP_SHARED, fd, 0))
        try #require(mapping != MAP_FAILED)
        defer { munmap(mapping, page) }
        for _ in 0..<10 {
            posix_fadvise(fd, 0, 0, Int32(POSIX_FADV_DONTNEED))
            usleep(20_000)
            var resident: UInt8 = 0
            try #require(mincore(mapping, page, &resident) == 0)
            if resident & 1 == 0 { return true }
        }
        return false
    }

    @Test(arguments: [(600, 400), (40, 30)])  // mapped, and read into the heap
    func aWarmFileIsServedWithoutWaitingAndAColdOneIsNot(width: Int, height: Int) throws {
        let dir = ScratchDirectory()
        let tier = try DiskTier(directory: dir.path, configuration: unwatchedConfiguration())
        defer { tier.close() }
        let image = patternImage(width: width, height: height, seed: 9)
        let query = SizeQuery(box: PixelSize(width: width, height: width))
        try tier.storeSynchronously(image, forKey: "warm", sourceVersion: 5)
        // Just written by this tier: in the page cache, and verified (its own bytes).
        do {
            let answer = tier.hitWithoutWaiting(forKey: "warm", matching: query)
            guard case .hit(let hit) = answer else {
                Issue.record("a file just written is served without waiting, got \(answer)")
                return
            }
            #expect(hit.image.hasSamePixels(as: image))
            #expect(hit.sourceVersion == 5)
        }  // the mapping goes: mapped pages cannot be dropped from the page cache
        #expect(tier.statistics.hitsWithoutWaiting == 1)
        if case .miss = tier.hitWithoutWaiting(forKey: "absent", matching: query) {} else { Issue.record("no match is a miss") }

        let name = dir.names().first { !$0.hasPrefix(".") } ?? ""
        let file = dir.path + "/" + name
        // Deterministic: when the page cache does not hold the file's bytes, `preadv2` with
        // `RWF_NOWAIT` fails with EAGAIN, and the lookup must give the work to a thread that may
        // block. A path that ignored the page cache would not call it, or would answer `.hit`.
        let (injected, failures) = SyscallFaults.injecting(
            SyscallFaults.Rule(call: "preadv2", pathContains: dir.path, errno: EAGAIN, times: nil)  // names the directory
        ) { tier.hitWithoutWaiting(forKey: "warm", matching: query) }
        if case .wouldWait = injected {} else { Issue.record("EAGAIN from the cached read is .wouldWait, got \(injected)") }
        #expect(failures >= 1, "the lookup asked the page cache with preadv2(RWF_NOWAIT)")

        if try Self.evictFromPageCache(file) {
            // The real kernel. `RWF_NOWAIT` never waits, but it does start the readahead of what
            // it misses, and on a fast (virtual) disk that I/O can complete before the read
            // looks again, which is a legitimate hit without waiting. Evict and ask again until
            // the lookup sees the file cold; a path that ignored the page cache would answer
            // `.hit` every time, which the injected EAGAIN above already rules out.
            var answer = tier.hitWithoutWaiting(forKey: "warm", matching: query)
            for _ in 0..<20 {
                if case .wouldWait = answer { break }
                _ = try Self.evictFromPageCache(file)
                answer = tier.hitWithoutWaiting(forKey: "warm", matching: query)
            }
            guard case .wouldWait = answer else {
                print(
                    "page cache: the kernel's readahead completed before every one of 21 non-waiting reads; cold path checked by fault injection only"
                )
                return
            }
            let servedWithoutWaiting = tier.statistics.hitsWithoutWaiting
            // The blocking path reads it (back into the page cache) …
            #expect(try tier.hit(forKey: "warm", matching: query)?.image.hasSamePixels(as: image) == true)
            #expect(tier.statistics.hitsWithoutWaiting == servedWithoutWaiting, "the cold hit went the blocking way")
            // … after which it is warm again.
            let again = tier.hitWithoutWaiting(forKey: "warm", matching: query)
            if case .hit = again {} else { Issue.record("warm again, got \(again)") }
        } else {
            // A file system that keeps every page (tmpfs): always warm.
            if case .hit = tier.hitWithoutWaiting(forKey: "warm", matching: query) {} else { Issue.record("tmpfs is warm") }
        }
    }

    @Test func aFileThatMustBeVerifiedWaitsForTheBlockingPath() throws {
        let dir = ScratchDirectory()
        let writer = try DiskTier(directory: dir.path, configuration: unwatchedConfiguration())
        let image = patternImage(width: 600, height: 400, seed: 3)
        try writer.storeSynchronously(image, forKey: "k")
        writer.close()
        // Another process's file: its first hit here verifies every pixel (checksumPolicy firstHit).
        let reader = try DiskTier(directory: dir.path, configuration: unwatchedConfiguration())
        defer { reader.close() }
        guard case .wouldWait = reader.hitWithoutWaiting(forKey: "k", matching: query) else {
            Issue.record("a first hit to verify is for a blocking thread")
            return
        }
        #expect(try reader.hit(forKey: "k", matching: query)?.image.hasSamePixels(as: image) == true)
        guard case .hit(let hit) = reader.hitWithoutWaiting(forKey: "k", matching: query) else {
            Issue.record("verified and warm: served without waiting")
            return
        }
        #expect(hit.image.hasSamePixels(as: image))
        // With every hit verified, no hit is served without waiting.
        let strict = try DiskTier(directory: dir.path, configuration: unwatchedConfiguration { $0.checksumPolicy = .everyHit })
        defer { strict.close() }
        _ = try strict.hit(forKey: "k", matching: query)
        if case .wouldWait = strict.hitWithoutWaiting(forKey: "k", matching: query) {} else { Issue.record("everyHit always waits") }
    }

    @Test func aDamagedFileIsLeftToTheBlockingPathWhichDiscardsIt() throws {
        let dir = ScratchDirectory()
        let tier = try DiskTier(directory: dir.path, configuration: unwatchedConfiguration())
        defer { tier.close() }
        try tier.storeSynchronously(patternImage(width: 600, height: 400, seed: 1), forKey: "k")
        let name = try #require(dir.names().first { !$0.hasPrefix(".") })
        // Truncate it: the length no longer matches the name.
        #expect(truncate(dir.path + "/" + name, 100) == 0)
        if case .wouldWait = tier.hitWithoutWaiting(forKey: "k", matching: query) {
        } else {
            Issue.record("no cleanup on the caller's thread")
        }
        #expect(dir.names().contains(name), "nothing deleted by the non-waiting path")
        #expect(try tier.hit(forKey: "k", matching: query) == nil)
        #expect(!dir.names().contains(name), "the blocking path discards it")
    }
}
