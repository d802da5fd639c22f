import Foundation
import Synchronization
import Testing
@testable import Strata

/// The charge of one `side`×`side` default-style file against the byte limit.
func charge(side: Int) -> Int {
    DiskIndexEntry(digest: ImageEntityID(hashing: "x"), variant: VariantDescriptor(size: PixelSize(width: side, height: side))).chargedBytes
}

/// A box of `side`×`side`.
func box(_ side: Int) -> SizeQuery { SizeQuery(box: PixelSize(width: side, height: side)) }

/// The file name the disk tier uses for `key` stored as a `side`×`side` `.fit` default-style image.
func cacheName(_ key: String, side: Int) -> String {
    DiskFileName(digest: ImageEntityID(hashing: key), variant: VariantDescriptor(size: PixelSize(width: side, height: side))).string
}

/// `count` empty files named like `side`×`side` variants (the index reads names only), and one
/// real file for `survivor` when given.
private func fillDirectory(_ path: String, count: Int, side: Int, survivor: String? = nil) throws {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    for i in 0..<count {
        let fd = open(path + "/" + cacheName("filler/\(i)", side: side), O_CREAT | O_WRONLY | O_CLOEXEC, 0o644)
        #expect(fd >= 0)
        if fd >= 0 { close(fd) }
    }
    if let survivor {
        let bytes = DiskFileEncoder.encode(patternImage(width: side, height: side, seed: 9), key: survivor, mode: .fit, sourceVersion: 0)
        try Data(bytes).write(to: URL(fileURLWithPath: path + "/" + cacheName(survivor, side: side)))
    }
}

/// Runs `body` on a new thread; returns whether it finished within `seconds` (a generous bound
/// for work that must not block, never a performance threshold).
private func returnsWithin(seconds: Int, _ body: @escaping @Sendable () -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    Thread {
        body()
        done.signal()
    }.start()
    return done.wait(timeout: .now() + .seconds(seconds)) == .success
}

/// The hardening defects of the disk tier: eviction cost and locking, paths that alias their
/// parent, name-based deletion races, use after close, injected syscall failures.
@Suite("Disk tier hardening", .serialized)
struct DiskHardeningTests {
    // MARK: Defect 6 — eviction cost

    @Test("Evicting thousands of files for one store examines each victim about once, not the index once per 64 victims")
    func evictionWorkIsProportionalToVictims() throws {
        let scratch = ScratchDirectory()
        let files = 4000, keep = 50
        try fillDirectory(scratch.path, count: files, side: 8)
        // As after a restart with a smaller limit: the directory is far over it.
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = keep * charge(side: 8) })
        defer { tier.close() }
        #expect(tier.statistics.entries == files)
        try tier.storeSynchronously(patternImage(width: 8, height: 8, seed: 1), forKey: "new")
        // The watcher evicts too once the index is over the limit (another writer's files), so
        // its batch may still be deleting when the store returns: wait for the count.
        #expect(waitUntil { tier.statistics.evictions >= files - keep } != nil, "\(tier.statistics)")
        let statistics = tier.statistics
        #expect(statistics.bytes <= keep * charge(side: 8))
        let examined = tier.evictionExamined
        #expect(
            examined <= 2 * statistics.evictions + 64,
            "examined \(examined) index entries to choose \(statistics.evictions) victims")
        #expect(try tier.image(forKey: "new", matching: box(8)) != nil)
    }

    @Test("A lookup completes while an eviction of thousands of files is held between two batches")
    func lookupsProceedDuringALargeEviction() throws {
        let scratch = ScratchDirectory()
        try fillDirectory(scratch.path, count: 4000, side: 8, survivor: "survivor")
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = 50 * charge(side: 8) })
        defer { tier.close() }
        #expect(try tier.image(forKey: "survivor", matching: box(8)) != nil)  // now the most recently used
        let reached = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let first = Atomic<Bool>(true)
        var hooks = DiskTier.TestHooks()
        hooks.evictionBatchChosen = { _ in
            guard first.exchange(false, ordering: .relaxed) else { return }
            reached.signal()
            _ = release.wait(timeout: .now() + 60)  // bounded even if the test gives up
        }
        tier.setTestHooks(hooks)
        let stored = DispatchSemaphore(value: 0)
        Thread {
            _ = try? tier.storeSynchronously(patternImage(width: 8, height: 8, seed: 1), forKey: "new")
            stored.signal()
        }.start()
        try #require(reached.wait(timeout: .now() + 60) == .success, "the eviction never chose a batch")
        let hit = Lock<Bool?>(nil)
        let proceeded = returnsWithin(seconds: 10) {
            let found = (try? tier.image(forKey: "survivor", matching: box(8))) != nil
            hit.withLock { $0 = found && tier.contains(key: "survivor", matching: box(8)) }
        }
        release.signal()
        #expect(proceeded, "a lookup waited for the eviction to finish")
        #expect(stored.wait(timeout: .now() + 60) == .success)
        if proceeded { #expect(hit.withLock { $0 } == true) }
        // The watcher may have taken a batch too, still being deleted when the store returns.
        #expect(waitUntil { tier.statistics.evictions >= 3950 } != nil, "\(tier.statistics)")
    }
}

extension DiskHardeningTests {
    // MARK: Defect 7 — paths whose parent watch is the directory itself

    @Test(
        "A tier opened through dir/., dir/sub/.. or dir/ sees other writers' files and recovers its deleted directory",
        arguments: ["/.", "/sub/..", "/", "//./"])
    func unnormalisedPathsAreWatched(suffix: String) throws {
        let scratch = ScratchDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path + "/sub", withIntermediateDirectories: true)
        let tier = try DiskTier(directory: scratch.path + suffix, configuration: quietConfiguration())
        defer { tier.close() }
        #expect(tier.statistics.watching)
        let image = patternImage(width: 24, height: 24, seed: 3)
        do {
            let other = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
            defer { other.close() }
            try other.storeSynchronously(image, forKey: "renamed-in")
            #expect(
                waitUntil(seconds: 10) { tier.contains(key: "renamed-in", matching: box(24)) } != nil,
                "a file renamed into \(suffix) was not seen")
            #expect(try tier.image(forKey: "renamed-in", matching: box(24))?.hasSamePixels(as: image) == true)
            other.remove(key: "renamed-in")
            #expect(
                waitUntil(seconds: 10) { !tier.contains(key: "renamed-in", matching: box(24)) } != nil,
                "a file deleted from \(suffix) stayed indexed")
        }
        // Written in place by another writer: IN_CLOSE_WRITE.
        let bytes = DiskFileEncoder.encode(image, key: "in-place", mode: .fit, sourceVersion: 0)
        try Data(bytes).write(to: URL(fileURLWithPath: scratch.path + "/" + cacheName("in-place", side: 24)))
        #expect(
            waitUntil(seconds: 10) { tier.contains(key: "in-place", matching: box(24)) } != nil,
            "a file written in place in \(suffix) was not seen")
        // The parent watch sees the directory go.
        try run("/bin/rm", ["-rf", scratch.path])
        #expect(
            waitUntil(seconds: 10) { tier.statistics.recoveries >= 1 && FileManager.default.fileExists(atPath: scratch.path) } != nil,
            "the deletion of \(suffix) was not noticed")
        try tier.storeSynchronously(image, forKey: "after")
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/" + cacheName("after", side: 24)))
    }
}

extension DiskHardeningTests {
    // MARK: Defect 8 — deleting by name what someone else has just published

    @Test(
        "A store of the same variant published between choosing an eviction victim and deleting it survives",
        arguments: [false, true])  // true: published by another instance (as another process would)
    func aStoreBetweenVictimChoiceAndUnlinkSurvives(byAnotherInstance: Bool) throws {
        let scratch = ScratchDirectory()
        let side = 64
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = 2 * charge(side: side) })
        let other = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        defer {
            tier.setTestHooks(DiskTier.TestHooks())  // the hook holds the tier
            tier.close()
            other.close()
        }
        let newer = patternImage(width: side, height: side, seed: 2)
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 1), forKey: "a")
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 3), forKey: "b")
        let interleaved = Atomic<Bool>(false)
        var hooks = DiskTier.TestHooks()
        hooks.evictionBatchChosen = { victims in
            guard victims.contains(where: { $0.digest == ImageEntityID(hashing: "a") }),
                !interleaved.exchange(true, ordering: .relaxed)
            else { return }
            // "a" was chosen as a victim; before its file is deleted, a writer publishes it anew.
            do {
                try (byAnotherInstance ? other : tier).storeSynchronously(newer, forKey: "a")
            } catch {
                Issue.record("the interleaved store failed: \(error)")
            }
        }
        tier.setTestHooks(hooks)
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 4), forKey: "c")
        let didInterleave = interleaved.load(ordering: .relaxed)
        #expect(didInterleave)
        #expect(
            FileManager.default.fileExists(atPath: scratch.path + "/" + cacheName("a", side: side)),
            "the eviction deleted the acknowledged store of a")
        // Another instance's file is indexed through its inotify event.
        #expect(waitUntil(seconds: 10) { tier.contains(key: "a", matching: box(side)) } != nil)
        #expect(try tier.image(forKey: "a", matching: box(side))?.hasSamePixels(as: newer) == true)
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/" + cacheName("b", side: side)))
    }

    @Test("removeAll deletes every listed file and its entry, including files the index never knew")
    func removeAllDeletesListedFiles() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: unwatchedConfiguration())
        defer { tier.close() }
        for key in ["a", "b"] { try tier.storeSynchronously(patternImage(width: 16, height: 16, seed: 1), forKey: key) }
        let foreign = DiskFileEncoder.encode(patternImage(width: 16, height: 16, seed: 2), key: "c", mode: .fit, sourceVersion: 0)
        try Data(foreign).write(to: URL(fileURLWithPath: scratch.path + "/" + cacheName("c", side: 16)))
        try tier.removeAll()
        #expect(scratch.names().isEmpty)
        #expect(tier.statistics.entries == 0)
        try tier.storeSynchronously(patternImage(width: 16, height: 16, seed: 3), forKey: "a")
        #expect(try tier.image(forKey: "a", matching: box(16)) != nil)
    }

    @Test("Late events of files chosen for eviction do not bring them back into the index before they are deleted")
    func lateEventsDoNotResurrectVictims() throws {
        let scratch = ScratchDirectory()
        let side = 64
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = 2 * charge(side: side) })
        defer {
            tier.setTestHooks(DiskTier.TestHooks())  // the hook holds the tier
            tier.close()
        }
        tier.pauseWatcher(true)  // the IN_MOVED_TO events of a and b wait in the queue
        for key in ["a", "b"] { try tier.storeSynchronously(patternImage(width: side, height: side, seed: 1), forKey: key) }
        let resurrected = Lock<[String]?>(nil)
        let (parent, path) = (scratch.parent, scratch.path)
        var hooks = DiskTier.TestHooks()
        hooks.evictionBatchChosen = { victims in
            guard resurrected.withLock({ $0 == nil }) else { return }
            // a and b are chosen and out of the index, not yet deleted: now let the watcher
            // handle their late events, and wait until it has (a marker published after them).
            tier.pauseWatcher(false)
            let marker = DiskFileEncoder.encode(patternImage(width: 8, height: 8, seed: 2), key: "marker", mode: .fit, sourceVersion: 0)
            _ = try? Data(marker).write(to: URL(fileURLWithPath: parent + "/marker"))
            _ = rename(parent + "/marker", path + "/" + cacheName("marker", side: 8))
            let seen = waitUntil(seconds: 10) { tier.contains(key: "marker", matching: box(8)) } != nil
            if !seen { Issue.record("the marker was not indexed") }
            let back = ["a", "b"].filter { key in
                victims.contains { $0.digest == ImageEntityID(hashing: key) } && tier.contains(key: key, matching: box(side))
            }
            resurrected.withLock { $0 = back }
        }
        tier.setTestHooks(hooks)
        try tier.storeSynchronously(patternImage(width: side, height: side, seed: 3), forKey: "c")
        #expect(resurrected.withLock { $0 } == [], "victims came back into the index from their late events")
        #expect(try tier.image(forKey: "c", matching: box(side)) != nil)
    }

    @Test("remove(key:) does not delete a file published under the key after the index forgot it")
    func removeDoesNotDeleteANewerFile() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: unwatchedConfiguration())  // so that the index does not learn of the newer file on its own
        defer { tier.close() }
        try tier.storeSynchronously(patternImage(width: 16, height: 16, seed: 1), forKey: "k")
        // Another process replaces the file; this tier has not seen it yet.
        let newer = DiskFileEncoder.encode(patternImage(width: 16, height: 16, seed: 2), key: "k", mode: .fit, sourceVersion: 2)
        try Data(newer).write(to: URL(fileURLWithPath: scratch.parent + "/newer"))
        #expect(rename(scratch.parent + "/newer", scratch.path + "/" + cacheName("k", side: 16)) == 0)
        tier.remove(key: "k")
        #expect(
            FileManager.default.fileExists(atPath: scratch.path + "/" + cacheName("k", side: 16)),
            "remove deleted a file it had never indexed")
        try tier.rescanNow()
        #expect(try tier.hit(forKey: "k", matching: box(16))?.sourceVersion == 2)
    }
}

extension DiskHardeningTests {
    // MARK: Defect 10 — watcher control after close

    @Test("pauseWatcher after close returns instead of waiting forever for a stopped watcher")
    func pauseAfterCloseReturns() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        #expect(tier.statistics.watching)
        tier.close()
        #expect(returnsWithin(seconds: 10) { tier.pauseWatcher(true) }, "pauseWatcher(true) after close() did not return")
        #expect(returnsWithin(seconds: 10) { tier.pauseWatcher(false) })
        #expect(!tier.statistics.watching)
    }

    @Test("pauseWatcher racing close returns either way")
    func pauseRacingCloseReturns() throws {
        for _ in 0..<20 {
            let scratch = ScratchDirectory()
            let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
            let started = DispatchSemaphore(value: 0)
            let paused = returnsWithin(seconds: 10) {
                Thread {
                    started.wait()
                    tier.close()
                }.start()
                started.signal()
                tier.pauseWatcher(true)
                tier.pauseWatcher(false)
            }
            #expect(paused)
            if !paused { return }
        }
    }
}

/// A syscall failure to inject into a publish.
struct PublishFault: Sendable, CustomTestStringConvertible {
    var call: String
    var errno: Int32
    /// Matching calls to let through first (the directory's fsync follows the file's).
    var after = 0
    /// The file is renamed into place before the call fails: published, but not durable.
    var published = false
    var testDescription: String { "\(call)#\(after + 1) \(String(cString: strerror(errno)))" }
}

extension DiskHardeningTests {
    // MARK: Injected failures

    @Test(
        "A failing syscall in a publish gives a typed error naming call and path, leaves no temporary file and the rest intact",
        arguments: [
            PublishFault(call: "openat", errno: EMFILE),
            PublishFault(call: "pwrite", errno: ENOSPC),
            PublishFault(call: "pwrite", errno: EIO),
            PublishFault(call: "fsync", errno: EIO),
            PublishFault(call: "fstat", errno: EIO),
            PublishFault(call: "renameat", errno: EIO),
            PublishFault(call: "renameat", errno: ENOSPC),
            PublishFault(call: "fsync", errno: EIO, after: 1, published: true),
        ])
    func injectedPublishFailures(fault: PublishFault) throws {
        let scratch = ScratchDirectory()
        // Without inotify: the watcher's own calls (fstatat of files that appear) stay out of the
        // way of the rule.
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: unwatchedConfiguration { $0.durable = true })
        defer { tier.close() }
        let earlier = patternImage(width: 32, height: 32, seed: 1)
        try tier.storeSynchronously(earlier, forKey: "earlier")
        let image = patternImage(width: 32, height: 32, seed: 2)
        let rule = SyscallFaults.Rule(call: fault.call, pathContains: scratch.parent, errno: fault.errno, times: 1, after: fault.after)
        let (result, failures) = SyscallFaults.injecting(rule) {
            Result { () throws(DiskTierError) in try tier.storeSynchronously(image, forKey: "failing") }
        }
        #expect(failures == 1)
        guard case .failure(.io(let error)) = result else {
            Issue.record("expected DiskTierError.io, got \(result)")
            return
        }
        #expect(error.call == fault.call && error.errno == fault.errno)
        let path = try #require(error.path)
        #expect(path.contains(scratch.parent.split(separator: "/").last!), "\(error) does not name the cache directory")
        let description = DiskTierError.io(error).description
        #expect(description.contains(fault.call) && description.contains(path))
        // No temporary file left; the earlier file and its entry intact.
        #expect(!scratch.names().contains { $0.hasPrefix(DiskFileName.temporaryPrefix) }, "\(scratch.names())")
        #expect(try tier.image(forKey: "earlier", matching: box(32))?.hasSamePixels(as: earlier) == true)
        #expect(FileManager.default.fileExists(atPath: scratch.path + "/" + cacheName("earlier", side: 32)))
        let failing = scratch.path + "/" + cacheName("failing", side: 32)
        if fault.published {
            #expect(FileManager.default.fileExists(atPath: failing) && tier.contains(key: "failing", matching: box(32)))
        } else {
            #expect(!FileManager.default.fileExists(atPath: failing))
            #expect(!tier.contains(key: "failing", matching: box(32)))
            #expect(tier.statistics.entries == 1 && tier.statistics.stores == 1)
        }
        // The tier keeps serving.
        let later = patternImage(width: 32, height: 32, seed: 3)
        try tier.storeSynchronously(later, forKey: "later")
        #expect(try tier.image(forKey: "later", matching: box(32))?.hasSamePixels(as: later) == true)
    }

    @Test("The tier's own publish is not validated again by its watcher and stays verified")
    func ownPublishIsNotRevalidated() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.checksumPolicy = .firstHit })
        defer { tier.close() }
        try tier.storeSynchronously(patternImage(width: 32, height: 32, seed: 1), forKey: "own")
        // Another writer publishes a marker; once it is indexed, the events of our store were handled.
        let marker = DiskFileEncoder.encode(patternImage(width: 8, height: 8, seed: 2), key: "marker", mode: .fit, sourceVersion: 0)
        try Data(marker).write(to: URL(fileURLWithPath: scratch.parent + "/marker"))
        #expect(rename(scratch.parent + "/marker", scratch.path + "/" + cacheName("marker", side: 8)) == 0)
        #expect(waitUntil(seconds: 10) { tier.contains(key: "marker", matching: box(8)) } != nil)
        let own = try #require(tier.indexEntries.first { $0.digest == ImageEntityID(hashing: "own") })
        #expect(own.isVerified, "the watcher validated our own file again (IN_CLOSE_WRITE under its final name)")
    }

    @Test(
        "A failing read or open on a hit is a typed error naming the file, and the entry stays",
        arguments: [
            PublishFault(call: "openat", errno: EMFILE), PublishFault(call: "pread", errno: EIO),
        ])
    func injectedHitFailures(fault: PublishFault) throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        defer { tier.close() }
        let image = patternImage(width: 32, height: 32, seed: 1)
        try tier.storeSynchronously(image, forKey: "k")
        let rule = SyscallFaults.Rule(call: fault.call, pathContains: scratch.parent, errno: fault.errno)
        let (result, failures) = SyscallFaults.injecting(rule) {
            Result { () throws(DiskTierError) in try tier.image(forKey: "k", matching: box(32)) }
        }
        #expect(failures == 1)
        guard case .failure(.io(let error)) = result else {
            Issue.record("expected DiskTierError.io, got \(result)")
            return
        }
        #expect(error.call == fault.call && error.errno == fault.errno)
        #expect(error.path?.hasSuffix("/" + cacheName("k", side: 32)) == true, "\(error)")
        #expect(try tier.image(forKey: "k", matching: box(32))?.hasSamePixels(as: image) == true)
    }

    @Test("An eviction whose unlink fails keeps the victim indexed and the store goes ahead")
    func injectedEvictionFailure() throws {
        let scratch = ScratchDirectory()
        // Unwatched: a watcher would evict the files left over the limit as soon as the fault
        // is gone, before the checks below.
        let tier = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration { $0.byteLimit = 2 * charge(side: 32) })
        defer { tier.close() }
        for key in ["a", "b"] { try tier.storeSynchronously(patternImage(width: 32, height: 32, seed: 1), forKey: key) }
        let rule = SyscallFaults.Rule(call: "unlinkat", pathContains: scratch.parent, errno: EIO, times: nil)
        let (_, failures) = try SyscallFaults.injecting(rule) { () throws(DiskTierError) in
            try tier.storeSynchronously(patternImage(width: 32, height: 32, seed: 2), forKey: "c")
        }
        #expect(failures > 0)
        #expect(tier.statistics.evictions == 0)
        for key in ["a", "b", "c"] { #expect(try tier.image(forKey: key, matching: box(32)) != nil, "\(key)") }
        try tier.storeSynchronously(patternImage(width: 32, height: 32, seed: 3), forKey: "d")
        #expect(tier.statistics.evictions > 0 && tier.statistics.bytes <= 2 * charge(side: 32))
    }
}
