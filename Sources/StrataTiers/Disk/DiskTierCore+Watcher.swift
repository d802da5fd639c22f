import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging

/// The watcher thread: keeps the index current from inotify events (or periodic rescans
/// without inotify), rescans after a queue overflow, and recreates a deleted directory.
extension DiskTier.Core {
    package static let parentMask = UInt32(IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR)
    package static let watchMask = UInt32(
        IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_DELETE
            | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

    package struct WatcherControl {
        /// The watcher thread runs its loop (from before it starts until it returns).
        package var running = false
        package var stopping = false
        package var paused = false
        /// The watcher is parked because of `paused` (reads no events).
        package var parked = false
    }

    /// Watches the directory and its parent. Both watches merge their masks into an existing
    /// watch of the same inode (`IN_MASK_ADD`): for `/` the parent is the directory, and a
    /// replaced mask would silently drop the directory's own events. Returns false when the
    /// directory cannot be watched (logged).
    package func startWatching(_ inotify: Inotify) -> Bool {
        let directoryWatch: Int32
        do {
            directoryWatch = try inotify.addWatch(path, mask: Self.watchMask, merge: true)
        } catch {
            logger.warning("cannot watch cache directory", metadata: ["directory": "\(path)", "error": "\(error)"])
            return false
        }
        var parent: Int32 = -1
        do {
            parent = try inotify.addWatch(parentPath, mask: Self.parentMask, merge: true)
        } catch {
            logger.warning(
                "cannot watch the cache directory's parent; its deletion goes unnoticed",
                metadata: ["directory": "\(path)", "error": "\(error)"])
        }
        parentWatch.store(parent == directoryWatch ? -1 : parent, ordering: .releasing)
        watch.store(directoryWatch, ordering: .releasing)
        return true
    }

    /// Stops (true) or resumes reading inotify events. Pausing returns once the watcher is
    /// parked, or at once when it is not running (before start, after close).
    package func pauseWatcher(_ pause: Bool) {
        let running = control.withLock { c in
            c.paused = pause
            return c.running
        }
        guard running else { return }
        control.broadcast()  // a parked watcher re-checks `paused`
        wake()  // a watcher in poll() looks at `paused`
        if pause { control.withLock(waitingUntil: { $0.parked || !$0.running }) { _ in } }
    }

    /// Whether the watcher should go on; parks it (sleeping) while it is paused.
    private func watcherShouldContinue() -> Bool {
        let parked = control.withLock { c -> Bool in
            guard c.paused, !c.stopping else { return false }
            c.parked = true
            return true
        }
        if parked {
            control.broadcast()  // the pauser waits for `parked`
            control.withLock(waitingUntil: { !$0.paused || $0.stopping }) { $0.parked = false }
        }
        return !control.withLock { $0.stopping }
    }

    /// Interrupts the watcher's `poll`.
    package func wake() {
        var one: UInt64 = 1
        do {
            _ = try withUnsafeBytes(of: &one) { raw throws(SystemCallError) in try wakeEvent.writeOnce(raw) }
        } catch {
            // EAGAIN: the counter is already non-zero, a wake-up is pending.
            if error.errno != EAGAIN { logger.error("cannot wake the directory watcher", metadata: ["error": "\(error)"]) }
        }
    }

    package func watcherLoop() {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 8)
        defer { buffer.deallocate() }
        defer {
            control.withLock { $0.running = false }
            control.broadcast()
        }
        var recoverPending = false
        let pollMilliseconds = Int32(
            clamping: configuration.rescanInterval.components.seconds * 1000
                + configuration.rescanInterval.components.attoseconds / 1_000_000_000_000_000)
        while watcherShouldContinue() {
            let watching = watch.load(ordering: .acquiring) >= 0
            var descriptors = [Poll.input(wakeEvent.rawValue), Poll.input(watching ? inotify?.descriptor.rawValue ?? -1 : -1)]
            let timeout: Int32 = recoverPending ? 100 : (watching ? -1 : max(pollMilliseconds, 10))
            let ready: Int
            do {
                ready = try Poll.wait(&descriptors, timeout: timeout)
            } catch {
                logger.error("poll failed in directory watcher", metadata: ["error": "\(error)"])
                var none: [pollfd] = []
                _ = try? Poll.wait(&none, timeout: 100)  // not a busy loop
                continue
            }
            if descriptors[0].revents != 0 {
                var value: UInt64 = 0
                _ = try? withUnsafeMutableBytes(of: &value) { raw throws(SystemCallError) in try wakeEvent.readOnce(into: raw) }
                continue
            }
            if recoverPending {
                recoverPending = !recoverDirectory()
                continue
            }
            guard watching, let inotify else {
                if ready == 0 {
                    rescanLogging()
                    evictIfOverLimit()
                }
                continue
            }
            guard descriptors[1].revents != 0 else { continue }
            let n: Int
            do {
                n = try inotify.readEvents(into: buffer)
            } catch {
                logger.error("cannot read inotify events; rescanning", metadata: ["directory": "\(path)", "error": "\(error)"])
                rescanLogging()
                continue
            }
            var needRescan = false
            var needRecover = false
            processEvents(UnsafeRawBufferPointer(rebasing: buffer[..<n]), rescan: &needRescan, recover: &needRecover)
            if needRecover {
                recoverPending = !recoverDirectory()
            } else if needRescan {
                logger.notice("inotify queue overflowed; rescanning", metadata: ["directory": "\(path)"])
                rescanLogging()
            }
            evictIfOverLimit()
            testHooks.withLock { $0.watcherHandledEvents }?()
        }
    }

    /// Files another writer published (`strata warm` beside a server) enter the index here,
    /// not through a store of this tier, which is where the byte limit is enforced: once they
    /// take the index over the limit, the least recently used files go now (found by
    /// Scripts/soak.sh: the directory stayed over the limit until this process stored again).
    private func evictIfOverLimit() {
        let limit = byteLimit.load(ordering: .relaxed)
        if state.withLock({ $0.index.chargedBytes + $0.reserved > limit }) { evictToLimit() }
    }

    private func processEvents(_ events: UnsafeRawBufferPointer, rescan: inout Bool, recover: inout Bool) {
        let current = watch.load(ordering: .acquiring)
        let parent = parentWatch.load(ordering: .acquiring)
        Inotify.forEachEvent(in: events) { event in
            if event.has(IN_Q_OVERFLOW) {
                rescan = true
            } else if event.watch == parent && event.watch != current {
                // Our directory deleted or renamed away?
                if event.has(IN_ISDIR) && event.name.elementsEqual(baseName) { recover = true }
            } else if event.watch == current {
                if event.has(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT) {
                    recover = true
                } else if let name = DiskFileName(bytes: event.name) {
                    if event.has(IN_MOVED_TO) {
                        indexAppearedFile(name)
                    } else if event.has(IN_CLOSE_WRITE) {
                        // A writer that does not rename: index only a complete, valid file (new
                        // content even if the inode is the same).
                        if let inode = validateClosedFile(name) { indexAppearedFile(name, inode: inode, rewritten: true) }
                    } else if event.has(IN_DELETE | IN_MOVED_FROM) {
                        // Still indexed: not one of our own deletions (they leave the index first).
                        let foreign = state.withLock { $0.index.remove(DiskIndexEntry(name)) }
                        if foreign, let observer = externalRemovalObserver.withLock({ $0 }) { observer(name.digest, name.variant) }
                    }
                }
            }
        }
    }

    /// Indexes a file that appeared under `name`: a new name counts as just used; a name
    /// already indexed keeps its place in the recency order (the event may be the late echo
    /// of our own publish, arriving after later lookups, and must not reorder the LRU) and is
    /// unverified again, unless it is the very file indexed (same inode, not `rewritten` in
    /// place): the echo of our own publish keeps its verification. The file's inode is `inode`,
    /// or looked up (`fstatat`); a name that is gone again is not indexed.
    ///
    /// The look and the entry are one step under the name's lock, as deletions are: a file
    /// looked at here and deleted before its entry went in would leave a phantom entry (bytes
    /// counted against the limit for a file that is not there).
    private func indexAppearedFile(_ name: DiskFileName, inode known: UInt64? = nil, rewritten: Bool = false) {
        nameLock(name.digest).withLock { _ in
            var inode: UInt64 = 0
            let directory = state.withLock { $0.directory }
            do throws(SystemCallError) {
                inode = UInt64(try directory.resource.status(of: name.string).st_ino)
                // Replaced since it was validated: the replacement's own event follows.
                if let known, known != inode { return }
            } catch  where error.errno == ENOENT {
                return  // its IN_DELETE/IN_MOVED_FROM follows
            } catch {
                // Unknown inode: eviction leaves the file alone until a rescan learns it.
                logger.warning("cannot stat a file another writer published", metadata: ["error": "\(error)"])
                inode = known ?? 0
            }
            testHooks.withLock { $0.watcherLookedAt }?(name.string)
            let entry = DiskIndexEntry(name, inode: inode)
            state.withLock { s in
                guard Self.mayIndex(entry, in: s) else { return }  // the late event of a file being deleted
                if !rewritten, inode != 0, let id = s.index.slot(of: entry), s.index[id].inode == inode { return }
                s.index.insert(entry, replacedFile: true)
            }
        }
    }

    /// Header, key digest and length check of a file written in place (`IN_CLOSE_WRITE`);
    /// returns its inode when it is valid.
    private func validateClosedFile(_ name: DiskFileName) -> UInt64? {
        let directory = state.withLock { $0.directory }
        let fileName = name.string
        guard let file = try? FileDescriptor(openAt: directory.resource, name: fileName, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        else { return nil }
        var valid = false
        let headerBytes = withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { fixed -> Int? in
            guard (try? file.read(into: fixed, at: 0)) == 64,
                let keyLength = Optional(
                    Int(UInt32(littleEndian: UnsafeRawBufferPointer(fixed).loadUnaligned(fromByteOffset: 40, as: UInt32.self)))),
                keyLength <= 1 << 24
            else { return nil }
            return DiskFileHeader.pixelOffset(keyLength: keyLength)
        }
        if let headerLength = headerBytes {
            var area = [UInt8](repeating: 0, count: headerLength)
            valid = area.withUnsafeMutableBytes { raw -> Bool in
                guard (try? file.read(into: raw, at: 0)) == headerLength,
                    let header = try? DiskFileHeader(validating: UnsafeRawBufferPointer(raw)),
                    header.variant == name.variant, header.isWholeOriginal == name.isWholeOriginal,
                    (try? file.size()) == header.fileLength
                else { return false }
                let key = DiskFileHeader.keyBytes(in: UnsafeRawBufferPointer(raw), keyLength: header.keyLength)
                return StoredKey.nameDigest(ofStored: key) == name.digest
            }
        }
        guard valid else {
            invalidFiles.add(1, ordering: .relaxed)
            logger.warning("ignored invalid file written in place", metadata: ["file": "\(path)/\(fileName)"])
            return nil
        }
        return (try? file.status()).map { UInt64($0.st_ino) }
    }

    /// Recreates and re-watches a directory that was deleted or moved away. Returns false
    /// when it must be retried.
    private func recoverDirectory() -> Bool {
        let old = watch.exchange(-1, ordering: .acquiringAndReleasing)
        if old >= 0 { try? inotify?.removeWatch(old) }
        let directory: Shared<FileDescriptor>
        let device: UInt64
        do {
            directory = Shared(try FileDescriptor(directory: path, create: true))
            device = UInt64(try directory.resource.status().st_dev)
        } catch {
            logger.error("cannot recreate cache directory; retrying", metadata: ["directory": "\(path)", "error": "\(error)"])
            return false
        }
        if let inotify, !startWatching(inotify) {
            logger.warning("cannot re-watch recreated directory; rescanning periodically", metadata: ["directory": "\(path)"])
        }
        state.withLock { s in
            s.directory = directory
            s.device = device
        }
        recoveries.add(1, ordering: .relaxed)
        logger.warning("cache directory was deleted or moved; recreated it", metadata: ["directory": "\(path)"])
        rescanLogging()
        return true
    }

    // MARK: Rescans

    /// Rebuilds the index from the directory's names and converges to it, keeping the
    /// recency order of files that are still there. Verification is not kept: with
    /// ``ChecksumPolicy/firstHit`` each file is checksummed again on its next hit.
    package func rescan() throws(DiskTierError) {
        let directory = state.withLock { s in
            s.rescansRunning += 1
            return s.directory
        }
        var stale: [String] = []
        let fresh: DiskIndex
        do {
            fresh = try DirectoryScan.buildIndex(of: directory.resource, staleTemporaries: &stale)
        } catch {
            state.withLock { $0.endRescan() }
            throw .io(error)
        }
        rescans.add(1, ordering: .relaxed)
        testHooks.withLock { $0.rescanListed }?()
        state.withLock { s in
            defer { s.endRescan() }
            var merged = DiskIndex(minimumCapacity: fresh.count)
            merged.continueGenerations(after: s.index)
            // Files still there keep their order, oldest first, with the inode seen now; not
            // the verified flag: a name alone does not tell whether another process replaced
            // the file while no event said so.
            s.index.forEach { entry in
                if let id = fresh.slot(of: entry) { merged.insert(fresh[id]) }
            }
            // Files that appeared while we were not looking count as new (no-op for the rest);
            // files being deleted, or deleted since the listing, were listed before their unlink.
            fresh.forEach { entry in
                if Self.mayIndex(entry, in: s), !s.deletedDuringRescan.contains(DeletingFile(entry)) { merged.insert(entry) }
            }
            s.index = merged
        }
    }

    private func rescanLogging() {
        do { try rescan() } catch {
            logger.warning("directory rescan failed", metadata: ["directory": "\(path)", "error": "\(error)"])
        }
    }
}
