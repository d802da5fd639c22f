import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// The disk tier on a real, small file system: full (ENOSPC), read-only (EROFS), and its
/// directory replaced by a file. It reports a typed error, keeps serving what it has, leaves
/// no partial file, keeps its accounting right, and works again once the cause is gone.
@Suite(.serialized, .enabled(if: SmallFilesystem.canMount, "\(SmallFilesystem.skipMessage)"))
struct DiskFullDiskTests {
    static let size = PixelSize(width: 300, height: 240)

    static func image(_ n: Int) -> PixelImage {
        var image = PixelImage(width: size.width, height: size.height)
        TableTestPattern.draw(&image, n: n, version: UInt64(n) + 1)
        return image
    }

    static func names(in directory: String) throws -> (published: Int, temporaries: Int) {
        let dir = try FileDescriptor(directory: directory)
        var published = 0, temporaries = 0
        try DirectoryScan.forEachName(in: dir) { bytes, _ in
            if DiskFileName(bytes: bytes) != nil { published += 1 }
            if bytes.starts(with: Array(DiskFileName.temporaryPrefix.utf8)) { temporaries += 1 }
        }
        return (published, temporaries)
    }

    /// Every key in `stored` is served with its exact pattern.
    static func expectServed(_ tier: DiskTier, _ stored: [Int], _ context: String) throws {
        for n in stored {
            let hit = try tier.hit(forKey: "k\(n)", matching: SizeQuery(box: size, tolerance: 0))
            #expect(hit.map { TableTestPattern.matches($0.image, n: n, version: $0.sourceVersion) } == true, "\(context): k\(n)")
        }
    }

    @Test func aFullFileSystemFailsStoresWithATypedErrorAndTheTierKeepsServingAndRecovers() throws {
        let fs = try #require(SmallFilesystem(megabytes: 4))
        let dir = fs.path + "/cache"
        let tier = try DiskTier(
            directory: dir,
            configuration: unwatchedConfiguration {
                $0.byteLimit = 64 << 20  // far above the file system: it fills before the limit
                $0.durable = true
                $0.checksumPolicy = .everyHit
            })
        #expect(fs.ballast("ballast", bytes: 1 << 20) == 1 << 20)
        var stored: [Int] = []
        var failure: DiskTierError?
        for n in 0..<40 {
            do {
                try tier.storeSynchronously(Self.image(n), forKey: "k\(n)", sourceVersion: UInt64(n) + 1)
                stored.append(n)
            } catch {
                failure = error
                break
            }
        }
        guard case .io(let error) = failure else {
            Issue.record("expected DiskTierError.io(ENOSPC) once the file system is full, got \(String(describing: failure))")
            return
        }
        #expect(error.errno == ENOSPC)
        #expect("\(DiskTierError.io(error))".contains("No space left on device"))
        #expect(stored.count >= 4, "some stores fit before the file system filled up")

        // More failing stores, synchronous and write-behind: nothing partial stays, the index
        // and its byte count match the directory, and everything stored is still served.
        for n in 100..<104 { #expect(throws: DiskTierError.self) { try tier.storeSynchronously(Self.image(n), forKey: "k\(n)") } }
        for n in 200..<204 { tier.store(Self.image(n), forKey: "k\(n)") }
        tier.flush()
        #expect(tier.statistics.failedStores == 4)
        let onDisk = try Self.names(in: dir)
        #expect(onDisk.temporaries == 0, "a failed store left a temporary file")
        #expect(onDisk.published == stored.count)
        let stats = tier.statistics
        #expect(stats.entries == stored.count)
        #expect(
            stats.bytes == stored.count
                * DiskIndexEntry(digest: ImageEntityID(hashing: "k0"), variant: VariantDescriptor(size: Self.size)).chargedBytes)
        try Self.expectServed(tier, stored, "after ENOSPC")
        #expect(try tier.image(forKey: "k100", matching: SizeQuery(box: Self.size)) == nil)

        // Space returns: stores work again.
        try FileDescriptor.unlink(path: fs.path + "/ballast")
        try tier.storeSynchronously(Self.image(300), forKey: "k300", sourceVersion: 301)
        try Self.expectServed(tier, stored + [300], "after space returned")
        // A fresh tier over the directory agrees.
        tier.close()
        let reopened = try DiskTier(directory: dir, configuration: unwatchedConfiguration { $0.checksumPolicy = .everyHit })
        try Self.expectServed(reopened, stored + [300], "reopened")
        #expect(reopened.statistics.invalidFiles == 0)
    }

    @Test func aReadOnlyFileSystemFailsStoresAndRemovalsWithATypedErrorAndKeepsServing() throws {
        let fs = try #require(SmallFilesystem(megabytes: 4))
        let dir = fs.path + "/cache"
        let tier = try DiskTier(directory: dir, configuration: unwatchedConfiguration())
        for n in 0..<3 { try tier.storeSynchronously(Self.image(n), forKey: "k\(n)", sourceVersion: UInt64(n) + 1) }
        #expect(fs.remount(readOnly: true))
        do {
            try tier.storeSynchronously(Self.image(9), forKey: "k9")
            Issue.record("a store on a read-only file system succeeded")
        } catch {
            guard case .io(let error) = error else {
                Issue.record("expected DiskTierError.io(EROFS), got \(error)")
                return
            }
            #expect(error.errno == EROFS)
        }
        tier.remove(key: "k0")  // logged, not thrown; the file stays
        try Self.expectServed(tier, [1, 2], "read-only")
        #expect(try Self.names(in: dir) == (3, 0))
        #expect(fs.remount(readOnly: false))
        try tier.storeSynchronously(Self.image(9), forKey: "k9", sourceVersion: 10)
        try Self.expectServed(tier, [1, 2, 9], "writable again")
    }

    @Test func aDirectoryReplacedByAFileFailsStoresWithATypedErrorUntilItIsBack() throws {
        let fs = try #require(SmallFilesystem(megabytes: 4))
        let dir = fs.path + "/cache"
        let tier = try DiskTier(directory: dir, configuration: quietConfiguration { $0.logger.logLevel = .critical })
        try tier.storeSynchronously(Self.image(1), forKey: "k1", sourceVersion: 2)
        // Paused, so that the watcher cannot recreate the directory before the file takes its name.
        tier.pauseWatcher(true)
        _ = system("rm -rf '\(dir)'")
        #expect(fs.ballast("cache", bytes: 10) == 10)  // a regular file where the directory was
        #expect(throws: DiskTierError.self) { try tier.storeSynchronously(Self.image(2), forKey: "k2") }
        #expect(try tier.image(forKey: "k1", matching: SizeQuery(box: Self.size)) == nil)
        // The watcher learns of it and retries, but cannot recreate the directory over a file.
        tier.pauseWatcher(false)
        usleep(300_000)
        #expect(tier.statistics.recoveries == 0, "nothing can be recreated while a file holds the name")
        #expect(throws: DiskTierError.self) { try tier.storeSynchronously(Self.image(2), forKey: "k2") }
        // The file goes away: the watcher recreates the directory and stores work again.
        try FileDescriptor.unlink(path: dir)
        try waitUntilSynchronously("the tier recreated its directory") { tier.statistics.recoveries >= 1 }
        try tier.storeSynchronously(Self.image(3), forKey: "k3", sourceVersion: 4)
        try Self.expectServed(tier, [3], "recreated")
        #expect(try Self.names(in: dir) == (1, 0))
    }
}
