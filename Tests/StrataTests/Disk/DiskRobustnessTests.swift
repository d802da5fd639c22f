import Foundation
import Testing
@testable import Strata

/// Robustness against what other processes (or attackers) leave in the directory, and against
/// failing deletions.
@Suite("Disk tier robustness", .serialized)
struct DiskRobustnessTests {
    @Test("A FIFO named like a cache file is a miss, does not block the lookup, and is left on disk")
    func fifoUnderACacheNameDoesNotHangALookup() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        defer { tier.close() }
        let fifo = scratch.path + "/" + cacheName("victim", side: 8)
        #expect(mkfifo(scratch.path + "/fifo", 0o644) == 0)
        #expect(rename(scratch.path + "/fifo", fifo) == 0)  // IN_MOVED_TO indexes it
        #expect(waitUntil(seconds: 5) { tier.contains(key: "victim", matching: box(8)) } != nil)
        let done = DispatchSemaphore(value: 0)
        let outcome = Lock<Result<PixelImage?, DiskTierError>?>(nil)
        let thread = Thread {
            let result = Result { () throws(DiskTierError) in try tier.image(forKey: "victim", matching: box(8)) }
            outcome.withLock { $0 = result }
            done.signal()
        }
        thread.start()
        let returned = done.wait(timeout: .now() + 5) == .success
        #expect(returned, "lookup blocked opening a FIFO")
        if !returned {
            releaseReaders(of: fifo)
            _ = done.wait(timeout: .now() + 5)
            return
        }
        let result = try #require(outcome.withLock { $0 })
        #expect(try result.get() == nil)
        #expect(!tier.contains(key: "victim", matching: box(8)), "the FIFO stays indexed")
        var st = stat()
        #expect(lstat(fifo, &st) == 0 && st.st_mode & S_IFMT == S_IFIFO, "the FIFO was removed")
        #expect(tier.statistics.invalidFiles == 1)

        // A writer closing the FIFO sends IN_CLOSE_WRITE: the watcher must not block opening it.
        let writer = open(fifo, O_RDWR | O_NONBLOCK)
        #expect(writer >= 0)
        if writer >= 0 { close(writer) }
        let published = DiskFileEncoder.encode(patternImage(width: 8, height: 8, seed: 3), key: "later", mode: .fit, sourceVersion: 0)
        try Data(published).write(to: URL(fileURLWithPath: scratch.parent + "/later"))
        #expect(rename(scratch.parent + "/later", scratch.path + "/" + cacheName("later", side: 8)) == 0)
        let watcherAlive = waitUntil(seconds: 5) { tier.contains(key: "later", matching: box(8)) } != nil
        #expect(watcherAlive, "the watcher thread blocked on the FIFO")
        if !watcherAlive { releaseReaders(of: fifo) }
    }

    /// Opens and closes `fifo` for writing a few times, so that readers blocked opening it return
    /// (only needed when the code under test regressed).
    private func releaseReaders(of fifo: String) {
        for _ in 0..<20 {
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
            usleep(50_000)
        }
    }

    @Test(
        "A directory named like a cache file is a miss, not an error on every lookup, and is not removed",
        arguments: [8, 256])  // 8: read path; 256: mapped path
    func directoryUnderACacheNameIsAMiss(side: Int) throws {
        let scratch = ScratchDirectory()
        let planted = scratch.path + "/" + cacheName("victim", side: side)
        try FileManager.default.createDirectory(atPath: planted, withIntermediateDirectories: true)
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        defer { tier.close() }
        #expect(tier.contains(key: "victim", matching: box(side)))  // indexed by name at open
        #expect(try tier.image(forKey: "victim", matching: box(side)) == nil)
        #expect(!tier.contains(key: "victim", matching: box(side)))
        #expect(try tier.image(forKey: "victim", matching: box(side)) == nil)
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: planted, isDirectory: &isDirectory) && isDirectory.boolValue)
    }

    @Test("Keys longer than the 4 KiB header allowance are stored and found again, and long keys' files stay within the byte limit")
    func longKeysDoNotExceedTheByteLimit() throws {
        let scratch = ScratchDirectory()
        let limit = 256 << 10
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = limit })
        defer { tier.close() }
        let image = patternImage(width: 8, height: 8, seed: 1)
        // 64 KiB keys are stored by digest: their files fit the per-file allowance.
        for n in 0..<40 {
            let key = String(repeating: "k", count: 64 << 10) + "\(n)"
            try tier.storeSynchronously(image, forKey: key)
            #expect(try tier.image(forKey: key, matching: box(8))?.hasSamePixels(as: image) == true)
        }
        // The longest verbatim key, many times: files stay within the limit.
        for n in 0..<80 {
            let suffix = "\(n)"
            let key = String(repeating: "k", count: DiskTier.maximumKeyLength - suffix.utf8.count) + suffix
            try tier.storeSynchronously(image, forKey: key)
            #expect(try tier.image(forKey: key, matching: box(8))?.hasSamePixels(as: image) == true)
        }
        var total = 0
        for name in scratch.names() {
            var st = stat()
            #expect(stat(scratch.path + "/" + name, &st) == 0)
            total += Int(st.st_size)
        }
        #expect(total <= limit, "files use \(total) bytes with byteLimit \(limit); index charges \(tier.statistics.bytes)")
        #expect(tier.statistics.evictions > 0)
    }

    @Test("A file replaced behind a rescan is checksummed again with .firstHit")
    func aFileReplacedBehindARescanIsVerifiedAgain() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: quietConfiguration {
                $0.useInotify = false
                $0.rescanInterval = .seconds(3600)
                $0.checksumPolicy = .firstHit
            })
        defer { tier.close() }
        try tier.storeSynchronously(patternImage(width: 64, height: 64, seed: 1), forKey: "k")  // indexed as verified
        var bytes = DiskFileEncoder.encode(patternImage(width: 64, height: 64, seed: 2), key: "k", mode: .fit, sourceVersion: 0)
        bytes[bytes.count - 1] ^= 0xFF  // pixels no longer match the checksum
        let name = try #require(scratch.names().first { !$0.hasPrefix(".") })
        try Data(bytes).write(to: URL(fileURLWithPath: scratch.parent + "/other"))
        #expect(rename(scratch.parent + "/other", scratch.path + "/" + name) == 0)
        try tier.rescanNow()
        #expect(try tier.image(forKey: "k", matching: box(64)) == nil, "a replaced file with a bad pixel checksum was served unverified")
    }

    @Test("The index marks verified only the file that was hashed, not a replacement under the same name")
    func verificationOfAnOlderFileDoesNotCarryOver() {
        let variant = VariantDescriptor(size: PixelSize(width: 8, height: 8), mode: .fit, style: .default)
        let entry = DiskIndexEntry(digest: ImageEntityID(hashing: "k"), variant: variant)
        var index = DiskIndex()
        index.insert(entry)
        let hashed = index[index.slot(of: entry)!]  // what a lookup works on
        index.insert(entry, replacedFile: true)  // IN_MOVED_TO: another file now
        index.setVerified(hashed)
        #expect(!index[index.slot(of: entry)!].isVerified)

        let again = index[index.slot(of: entry)!]
        index.remove(entry)  // IN_DELETE, then a new file
        index.insert(entry)
        index.setVerified(again)
        #expect(!index[index.slot(of: entry)!].isVerified)

        let current = index[index.slot(of: entry)!]
        index.setVerified(current)
        #expect(index[index.slot(of: entry)!].isVerified)
    }

    @Test("A lookup that finds its file gone leaves the entry alone, so a newer file under the name stays indexed")
    func aVanishedFileDoesNotUnindexANewerOne() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: unwatchedConfiguration())
        defer { tier.close() }
        try tier.storeSynchronously(patternImage(width: 16, height: 16, seed: 1), forKey: "k")
        let name = scratch.path + "/" + cacheName("k", side: 16)
        // Another process replaces the file: unlink, our lookup runs in between, then the rename.
        let newer = DiskFileEncoder.encode(patternImage(width: 16, height: 16, seed: 2), key: "k", mode: .fit, sourceVersion: 7)
        try Data(newer).write(to: URL(fileURLWithPath: scratch.parent + "/newer"))
        #expect(unlink(name) == 0)
        #expect(try tier.image(forKey: "k", matching: box(16)) == nil)
        #expect(rename(scratch.parent + "/newer", name) == 0)
        let hit = try tier.hit(forKey: "k", matching: box(16))
        #expect(hit?.sourceVersion == 7, "the newer file is not indexed until the next rescan")
        #expect(hit?.image.hasSamePixels(as: patternImage(width: 16, height: 16, seed: 2)) == true)
    }

    @Test("Eviction keeps in the index (and does not count) a victim that cannot be deleted, and evicts others instead")
    func evictionOfAnUndeletableVictim() throws {
        let scratch = ScratchDirectory()
        // A non-empty directory under a cache name: unlinkat fails with EISDIR (as EPERM would).
        let planted = scratch.path + "/" + cacheName("planted", side: 8)
        try FileManager.default.createDirectory(atPath: planted, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: planted + "/inside", contents: Data([1])))
        let limit = 64 << 10
        // Without inotify, so that late events of our own stores do not move the index's count.
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: quietConfiguration {
                $0.byteLimit = limit
                $0.useInotify = false
                $0.rescanInterval = .seconds(3600)
            })
        defer { tier.close() }
        let stores = 6
        for n in 0..<stores {
            try tier.storeSynchronously(patternImage(width: 64, height: 64, seed: UInt8(n)), forKey: "k\(n)")
            #expect(tier.statistics.bytes <= limit)
        }
        let files = scratch.names().filter { !$0.hasPrefix(".") && $0 != cacheName("planted", side: 8) }
        let statistics = tier.statistics
        #expect(statistics.evictions > 0)
        #expect(statistics.evictions == stores - files.count, "evictions counted that deleted nothing")
        #expect(tier.indexEntries.contains { $0.digest == ImageEntityID(hashing: "planted") }, "an undeletable victim left the index")
        #expect(FileManager.default.fileExists(atPath: planted + "/inside"))
    }

    @Test("Crafted names with huge sizes are not cache files, so they cannot inflate the byte count")
    func hugeSizesInNamesAreIgnored() throws {
        let digest = ImageEntityID(hashing: "crafted")
        let side = DiskFileName.maximumSide
        let huge = ["\(digest)-\(side)x\(side)-fa.px", "\(digest)-\(side)x257-fa.px", "\(digest)-16385x16384-fa.px"]
        for name in huge { #expect(DiskFileName(name) == nil, "\(name)") }
        let largest = "\(digest)-16384x16384-fa.px"  // exactly maximumPixelCount
        #expect(DiskFileName(largest) != nil)

        let scratch = ScratchDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
        for name in huge + [largest] {
            #expect(FileManager.default.createFile(atPath: scratch.path + "/" + name, contents: Data()))
        }
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        defer { tier.close() }
        let statistics = tier.statistics
        #expect(statistics.entries == 1)
        #expect(statistics.bytes == DiskIndexEntry(digest: digest, variant: DiskFileName(largest)!.variant).chargedBytes)
        #expect(statistics.bytes < 2 << 30)
    }

    @Test("Late inotify echoes of our own stores do not count as uses and do not reorder the LRU")
    func lateEventsOfOwnStoresKeepTheLRUOrder() throws {
        let scratch = ScratchDirectory()
        let image = patternImage(width: 100, height: 100, seed: 11)
        let marker = patternImage(width: 8, height: 8, seed: 12)
        func charge(_ image: PixelImage) -> Int {
            DiskIndexEntry(digest: ImageEntityID(hashing: "x"), variant: VariantDescriptor(size: image.size)).chargedBytes
        }
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: quietConfiguration {
                $0.byteLimit = 3 * charge(image) + charge(marker)
            })
        defer { tier.close() }
        let q = SizeQuery(box: image.size)
        tier.pauseWatcher(true)  // the events of these stores arrive after the lookup below
        for key in ["a", "b", "c"] { try tier.storeSynchronously(image, forKey: key) }
        #expect(try tier.image(forKey: "a", matching: q) != nil)  // "b" is now the least recently used
        tier.pauseWatcher(false)
        // Another process publishes a file; once it is indexed, the earlier events were handled.
        let bytes = DiskFileEncoder.encode(marker, key: "marker", mode: .fit, sourceVersion: 0)
        try Data(bytes).write(to: URL(fileURLWithPath: scratch.parent + "/marker"))
        #expect(rename(scratch.parent + "/marker", scratch.path + "/" + cacheName("marker", side: 8)) == 0)
        #expect(waitUntil(seconds: 5) { tier.contains(key: "marker", matching: box(8)) } != nil)
        try tier.storeSynchronously(image, forKey: "d")
        #expect(!tier.contains(key: "b", matching: q))
        #expect(tier.contains(key: "a", matching: q), "the late events of b and c made a look older than them")
    }

    @Test("A failure reading a hit names the file, not the directory")
    func hitErrorsNameTheFile() {
        let name = DiskFileName(digest: ImageEntityID(hashing: "k"), variant: VariantDescriptor(size: PixelSize(width: 8, height: 8)))
        let fromDescriptor = SystemCallError(call: "pread", path: "/cache", errno: EIO)
        let named = DiskTier.Core.naming(fromDescriptor, file: name, in: "/cache")
        #expect(named.path == "/cache/" + name.string)
        #expect(named.call == "pread" && named.errno == EIO)
        #expect(DiskTierError.io(named).description.contains(name.string))
    }
}
