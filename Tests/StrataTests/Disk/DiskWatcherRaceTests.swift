import Dispatch
import Foundation
import Synchronization
import Testing

@testable import Strata

/// Races between the watcher's view of the directory and this tier's own stores and
/// deletions, made deterministic with ``DiskTier/TestHooks`` and a paused watcher.
@Suite("Disk tier: the watcher against stores and deletions")
struct DiskWatcherRaceTests {
    @Test("A store at the byte limit evicts what it needs and no more (its own rename does not make the watcher evict)")
    func aStoreAtTheLimitEvictsOnlyWhatItNeeds() throws {
        let scratch = ScratchDirectory()
        let side = 32
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = 2 * charge(side: side) })
        defer {
            tier.setTestHooks(DiskTier.TestHooks())  // the hooks hold the tier
            tier.close()
        }
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 1), forKey: "a")
        // b fills the limit exactly (no eviction). Before its store returns, let the watcher
        // handle b's rename: b must not be counted twice (indexed and still reserved), which
        // took the index over the limit and made the watcher evict a.
        let name = cacheName("b", side: side)
        let looked = Atomic<Bool>(false)
        let handled = DispatchSemaphore(value: 0)
        var hooks = DiskTier.TestHooks()
        hooks.watcherLookedAt = { if $0 == name { looked.store(true, ordering: .relaxed) } }
        hooks.watcherHandledEvents = { if looked.load(ordering: .relaxed) { handled.signal() } }
        hooks.storePublished = { published in
            guard published == name else { return }
            if handled.wait(timeout: .now() + 10) == .timedOut { Issue.record("the watcher did not handle the rename of b") }
        }
        tier.setTestHooks(hooks)
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 2), forKey: "b")
        tier.setTestHooks(DiskTier.TestHooks())
        #expect(tier.statistics.evictions == 0, "\(tier.statistics)")
        for key in ["a", "b"] { #expect(tier.contains(key: key, matching: box(side)), "\(key)") }
    }

    @Test("A file the watcher looked at and this tier deleted before its entry went in is not indexed")
    func aFileDeletedWhileTheWatcherLooksIsNotIndexed() throws {
        let scratch = ScratchDirectory()
        let side = 16
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = 3 * charge(side: side) })
        defer {
            tier.setTestHooks(DiskTier.TestHooks())  // the hook holds the tier
            tier.close()
        }
        for key in ["y1", "y2"] { try tier.storeSynchronously(patternImage(width: side, height: side, seed: 1), forKey: key) }
        // One batch of events: the rename of our x, then another writer's w. The limit holds
        // y1, y2 and one more.
        tier.pauseWatcher(true)
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 2), forKey: "x")
        try publishAsAnotherWriter(patternImage(width: side, height: side, seed: 3), key: "w", into: scratch)
        let name = cacheName("x", side: side)
        let removed = Atomic<Bool>(false)
        let once = Atomic<Bool>(true)
        var hooks = DiskTier.TestHooks()
        hooks.watcherLookedAt = { looked in
            guard looked == name, once.exchange(false, ordering: .relaxed) else { return }
            // The watcher has seen x on disk. Remove x now, from another thread: x must not be
            // indexed again once deleted (a phantom entry that, with w, would take the index
            // over the limit and evict y1). The removal may wait for the watcher to finish with
            // the name: give it a second.
            Thread {
                tier.remove(key: "x")
                removed.store(true, ordering: .releasing)
            }.start()
            _ = waitUntil(seconds: 1) { removed.load(ordering: .acquiring) }
        }
        tier.setTestHooks(hooks)
        tier.pauseWatcher(false)
        #expect(waitUntil(seconds: 10) { tier.contains(key: "w", matching: box(side)) } != nil)
        #expect(waitUntil(seconds: 10) { removed.load(ordering: .acquiring) } != nil)
        let looked = !once.load(ordering: .relaxed)
        #expect(looked, "the watcher never looked at x")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/" + name))
        #expect(!tier.contains(key: "x", matching: box(side)), "x was indexed after its deletion")
        #expect(tier.statistics.evictions == 0, "\(tier.statistics)")
        for key in ["y1", "y2", "w"] { #expect(tier.contains(key: key, matching: box(side)), "\(key)") }
    }

    @Test("A file a rescan listed and this tier deleted before the rescan merged is not indexed")
    func aFileDeletedDuringARescanIsNotIndexed() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        defer {
            tier.setTestHooks(DiskTier.TestHooks())  // the hook holds the tier
            tier.close()
        }
        for key in ["x", "y"] { try tier.storeSynchronously(patternImage(width: 16, height: 16, seed: 1), forKey: key) }
        var hooks = DiskTier.TestHooks()
        hooks.rescanListed = { tier.remove(key: "x") }  // listed, then deleted
        tier.setTestHooks(hooks)
        try tier.rescanNow()
        tier.setTestHooks(DiskTier.TestHooks())
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/" + cacheName("x", side: 16)))
        #expect(!tier.contains(key: "x", matching: box(16)), "the rescan indexed x after its deletion")
        #expect(tier.contains(key: "y", matching: box(16)))
        #expect(tier.statistics.entries == 1, "\(tier.statistics)")
    }

    /// Found by Scripts/soak.sh: files being deleted were remembered by inode number alone, and
    /// the file system gives a deleted file's number to the next file created, so another
    /// writer's file published with a victim's number during an eviction batch was never indexed
    /// (never counted against the limit). A hard link stands in for the reused number here.
    @Test("Another file with the inode number of a file being evicted is indexed")
    func aFileWithAVictimsInodeNumberIsIndexed() throws {
        let scratch = ScratchDirectory()
        let side = 16
        let tier = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration { $0.byteLimit = 2 * charge(side: side) })
        defer {
            tier.setTestHooks(DiskTier.TestHooks())  // the hook holds the tier
            tier.close()
        }
        for key in ["a", "b"] { try tier.storeSynchronously(patternImage(width: side, height: side, seed: 1), forKey: key) }
        let path = scratch.path
        let linked = Atomic<Bool>(false)
        var hooks = DiskTier.TestHooks()
        hooks.evictionBatchChosen = { victims in
            guard let victim = victims.first, !linked.exchange(true, ordering: .relaxed) else { return }
            // While the batch is being deleted: a file under another name with the victim's
            // number appears, and a rescan lists it.
            let name = victim.name.string
            guard link(path + "/" + name, path + "/" + cacheName("other", side: side)) == 0 else {
                Issue.record("link failed: errno \(errno)")
                return
            }
            do { try tier.rescanNow() } catch { Issue.record("rescan failed: \(error)") }
        }
        tier.setTestHooks(hooks)
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 2), forKey: "c")
        tier.setTestHooks(DiskTier.TestHooks())
        let didLink = linked.load(ordering: .relaxed)
        #expect(didLink)
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/" + cacheName("other", side: side)))
        #expect(tier.contains(key: "other", matching: box(side)), "the file with a victim's inode number was not indexed")
    }

    /// Found by the 3-minute soak: a victim stayed "being deleted" until its whole batch was
    /// done, and a file published under its name right after its deletion, with its inode
    /// number (the file system reuses them at once), was skipped by the watcher — never counted,
    /// and the directory went over its limit. Renaming a hard link of the victim back in makes
    /// such a file.
    @Test("A file published under a victim's name with its inode number right after its deletion is indexed")
    func aFileWithTheDeletedVictimsNameAndNumberIsIndexed() throws {
        let scratch = ScratchDirectory()
        let side = 16
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = 3 * charge(side: side) })
        defer {
            tier.setTestHooks(DiskTier.TestHooks())  // the hooks hold the tier
            tier.close()
        }
        for key in ["a", "b", "c"] { try tier.storeSynchronously(patternImage(width: side, height: side, seed: 1), forKey: key) }
        let name = cacheName("a", side: side)
        let kept = scratch.parent + "/kept"
        try #require(link(scratch.path + "/" + name, kept) == 0)  // a's inode outlives its deletion
        let path = scratch.path
        let looked = Atomic<Bool>(false)
        let handled = Atomic<Bool>(false)
        var hooks = DiskTier.TestHooks()
        hooks.watcherLookedAt = { if $0 == name { looked.store(true, ordering: .relaxed) } }
        hooks.watcherHandledEvents = { if looked.load(ordering: .relaxed) { handled.store(true, ordering: .relaxed) } }
        hooks.victimDeleted = { deleted in
            guard deleted == name, rename(kept, path + "/" + name) == 0 else { return }
            // Published again, same name and number, while the batch goes on; the watcher
            // handles it before the batch ends.
            if waitUntil(seconds: 10, { handled.load(ordering: .relaxed) }) == nil { Issue.record("the watcher did not see a again") }
        }
        tier.setTestHooks(hooks)
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 2), forKey: "d")
        tier.setTestHooks(DiskTier.TestHooks())
        let renamed = !FileManager.default.fileExists(atPath: kept)
        #expect(renamed, "a was not chosen for eviction")
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/" + name))
        #expect(tier.contains(key: "a", matching: box(side)), "the file published again under a was not indexed")
    }
}

/// Writes `image` as a cache file for `key` beside the directory and renames it in, as another
/// process would.
private func publishAsAnotherWriter(_ image: PixelImage, key: String, into scratch: ScratchDirectory) throws {
    let staged = scratch.parent + "/staged-" + key
    try Data(DiskFileEncoder.encode(image, key: key, mode: .fit, sourceVersion: 0)).write(to: URL(fileURLWithPath: staged))
    guard rename(staged, scratch.path + "/" + cacheName(key, side: image.width)) == 0 else {
        throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }
}
