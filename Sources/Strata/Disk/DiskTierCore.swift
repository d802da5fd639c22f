#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Dispatch
import Logging
import Synchronization

extension DiskTier {
    /// The shared state behind a ``DiskTier``, referenced by its writer and watcher threads.
    final class Core: Sendable {
        struct State {
            var index: DiskIndex
            var directory: DirectoryHandle
            /// The directory's device (`st_dev`): with an entry's inode, the identity of its file.
            var device: UInt64
            /// Bytes of stores between eviction and publish (counted against the limit).
            var reserved = 0
            var closed = false
        }

        struct Job: Sendable {
            var image: PixelImage
            var key: String
            var mode: ContentMode
            var sourceVersion: UInt64
        }

        enum QueueItem: Sendable {
            case job(Job)
            case barrier(DispatchSemaphore)
            case stop
        }

        struct Queue {
            var items: [QueueItem] = []
            var head = 0
            var jobs = 0
            var bytes = 0
            var closed = false
        }

        /// The directory's canonical path (``FileDescriptor/resolvedPath(_:)``).
        let path: String
        /// The path as the tier was opened with.
        let requestedPath: String
        let configuration: Configuration
        let logger: Logger
        let state: Mutex<State>
        let queue = Mutex(Queue())
        let queueSignal = DispatchSemaphore(value: 0)

        // Watcher.
        /// `nil` without inotify (then the watcher rescans periodically).
        let inotify: Inotify?
        /// Wakes the watcher out of `poll` (non-blocking eventfd). Open until the core goes away,
        /// so that a late ``pauseWatcher(_:)`` never writes to a descriptor number that has
        /// since been reused.
        let wakeEvent: FileDescriptor
        /// The watcher thread's state, with sleeping waits for pausing and stopping it.
        let control = Lock(WatcherControl())
        let watch = Atomic<Int32>(-1)
        /// Watch on the parent directory: while the tier holds the directory open, deleting it
        /// does not produce `IN_DELETE_SELF` (the inode lives on), but the parent sees the
        /// `IN_DELETE`/`IN_MOVED_FROM` of its name. -1 when the parent is the directory itself
        /// (`/`).
        let parentWatch = Atomic<Int32>(-1)
        /// The parent and the last component of ``path`` (canonical, so `dir/.` watches the
        /// parent of `dir`, not `dir` again).
        let parentPath: String
        let baseName: [UInt8]
        let closeOnce = Atomic<Bool>(false)
        let threads = Mutex<[OSThread]>([])
        let temporaryCounter = Atomic<Int>(0)
        let testHooks = Lock(DiskTier.TestHooks())
        /// Striped by digest: held while a name is checked and deleted (``deleteFile(_:digest:ifIdentity:in:regularOnly:_:)``)
        /// and while a publish renames onto it and indexes the result, so that neither lands
        /// between the other's steps. Never held by lookups.
        let nameLocks = (0..<16).map { _ in Lock(()) }
        /// Index entries looked at to choose eviction victims (the work of choosing them).
        let evictionExamined = Atomic<Int>(0)

        // Counters.
        let hits = Atomic<Int>(0)
        let misses = Atomic<Int>(0)
        let invalidFiles = Atomic<Int>(0)
        let stores = Atomic<Int>(0)
        let droppedStores = Atomic<Int>(0)
        let failedStores = Atomic<Int>(0)
        let evictions = Atomic<Int>(0)
        let rescans = Atomic<Int>(0)
        let recoveries = Atomic<Int>(0)

        init(path requested: String, configuration: Configuration) throws(DiskTierError) {
            self.requestedPath = requested
            self.configuration = configuration
            self.logger = configuration.logger
            let directory: DirectoryHandle
            let resolved: String
            do {
                directory = try DirectoryHandle(path: requested, create: true)
                // Canonical, so that the parent of `dir/.`, `dir/sub/..` or `dir//` is the
                // parent of `dir`; `realpath` also resolves a symbolic link to the directory.
                resolved = try FileDescriptor.resolvedPath(requested)
            } catch {
                throw .cannotUseDirectory(path: requested, underlying: error)
            }
            self.path = resolved
            let (parent, name) = FileDescriptor.splitParent(ofResolved: resolved)
            parentPath = parent
            baseName = Array(name.utf8)
            var stale: [String] = []
            let index: DiskIndex
            do {
                index = try DirectoryScan.buildIndex(of: directory, staleTemporaries: &stale)
            } catch {
                throw .cannotUseDirectory(path: path, underlying: error)
            }
            let device: UInt64
            do {
                device = UInt64(try directory.descriptor.status().st_dev)
            } catch {
                throw .cannotUseDirectory(path: resolved, underlying: error)
            }
            state = Mutex(State(index: index, directory: directory, device: device))
            do {
                wakeEvent = try FileDescriptor.eventFD(nonBlocking: true)
            } catch {
                throw .io(error)
            }
            var inotify: Inotify?
            if configuration.useInotify {
                do {
                    inotify = try Inotify()
                } catch {
                    logger.warning("inotify unavailable; rescanning every \(configuration.rescanInterval)",
                                   metadata: ["directory": "\(resolved)", "error": "\(error)"])
                }
            }
            self.inotify = inotify
            if let inotify, !startWatching(inotify) {
                logger.warning("cannot watch directory (inotify watch limit?); rescanning every \(configuration.rescanInterval)",
                               metadata: ["directory": "\(resolved)"])
            }
            removeStaleTemporaries(stale, in: directory)
            let writer: OSThread
            do {
                writer = try OSThread(name: "strata-disk-w") { [self] in writerLoop() }
            } catch {
                throw .io(error)
            }
            do {
                control.withLock { $0.running = true }
                let watcher = try OSThread(name: "strata-disk-i") { [self] in watcherLoop() }
                threads.withLock { $0 = [writer, watcher] }
            } catch {
                // Stop the writer (nothing is queued yet) before giving up, so that neither the
                // thread nor the descriptors outlive the failed init.
                control.withLock { $0.running = false }
                _ = closeOnce.exchange(true, ordering: .acquiringAndReleasing)
                queue.withLock { q in
                    q.items.append(.stop)
                    q.closed = true
                }
                queueSignal.signal()
                writer.join()
                throw .io(error)
            }
        }

        /// Watches the directory and its parent. Both watches merge their masks into an existing
        /// watch of the same inode (`IN_MASK_ADD`): for `/` the parent is the directory, and a
        /// replaced mask would silently drop the directory's own events. Returns false when the
        /// directory cannot be watched (logged).
        private func startWatching(_ inotify: Inotify) -> Bool {
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
                logger.warning("cannot watch the cache directory's parent; its deletion goes unnoticed",
                               metadata: ["directory": "\(path)", "error": "\(error)"])
            }
            parentWatch.store(parent == directoryWatch ? -1 : parent, ordering: .releasing)
            watch.store(directoryWatch, ordering: .releasing)
            return true
        }

        static let parentMask: UInt32 = UInt32(IN_DELETE | IN_MOVED_FROM | IN_ONLYDIR)
        static let watchMask: UInt32 = UInt32(IN_MOVED_TO | IN_MOVED_FROM | IN_CLOSE_WRITE | IN_DELETE
            | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

        /// Deletes temporary files older than an hour (left by crashed writers); younger ones
        /// may belong to a writer in progress in another process.
        private func removeStaleTemporaries(_ names: [String], in directory: DirectoryHandle) {
            let now = time(nil)
            for name in names {
                var st = stat()
                guard fstatat(directory.fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 else { continue }
                if now - st.st_mtim.tv_sec > 3600 { _ = unlinkat(directory.fd, name, 0) }
            }
        }

        // MARK: Lookups

        func contains(digest: KeyDigest, query: SizeQuery) -> Bool {
            state.withLock { $0.index.bestMatch(for: digest, query: query) != nil }
        }

        func lookup(key: String, query: SizeQuery) throws(DiskTierError) -> DiskTier.Hit? {
            let digest = KeyDigest(key: key)
            let found: (DiskIndexEntry, DirectoryHandle)? = state.withLock { s in
                guard !s.closed, let slot = s.index.bestMatch(for: digest, query: query) else { return nil }
                s.index.touch(slot)
                return (s.index[slot], s.directory)
            }
            guard let (entry, directory) = found else {
                misses.add(1, ordering: .relaxed)
                return nil
            }
            var stored = StoredKey.string(for: key)
            let outcome = stored.withUTF8 { load(entry, key: UnsafeRawBufferPointer($0), directory: directory) }
            switch outcome {
            case .hit(let hit):
                hits.add(1, ordering: .relaxed)
                return hit
            case .vanished:
                // The index is left alone: the IN_DELETE/IN_MOVED_FROM event (or, without inotify,
                // the next rescan) removes the entry. Removing it here could drop the entry of a
                // newer file published under the same name after our openat failed.
                misses.add(1, ordering: .relaxed)
                return nil
            case .otherKey:
                misses.add(1, ordering: .relaxed)
                return nil
            case .invalid(let problem, let identity):
                discardInvalid(entry, directory: directory, identity: identity, reason: "\(problem)")
                misses.add(1, ordering: .relaxed)
                return nil
            case .foreign(let reason):
                dropForeign(entry, reason: reason)
                misses.add(1, ordering: .relaxed)
                return nil
            case .failed(let error):
                throw .io(Self.naming(error, file: entry.name, in: path))
            }
        }

        enum LoadOutcome {
            case hit(DiskTier.Hit)
            case vanished
            case otherKey
            case invalid(DiskFileHeader.Problem, identity: FileIdentity?)
            /// Not a readable regular file (FIFO, directory, device, no permission): dropped from
            /// the index but left on disk, since it may belong to someone else.
            case foreign(String)
            case failed(SystemCallError)
        }

        /// A file's device and inode numbers.
        struct FileIdentity: Equatable {
            var device: UInt64
            var inode: UInt64
            init(device: UInt64, inode: UInt64) { self.device = device; self.inode = inode }
            init(_ st: stat) { self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) }
            /// The identity of the file `entry` describes in a directory on `device`; `nil` when
            /// the index does not know its inode.
            init?(of entry: DiskIndexEntry, device: UInt64) {
                guard entry.inode != 0 else { return nil }
                self.init(device: device, inode: entry.inode)
            }
        }

        private func load(_ entry: DiskIndexEntry, key: UnsafeRawBufferPointer, directory: DirectoryHandle) -> LoadOutcome {
            var rawFD: Int32 = -1
            let openErrno: Int32 = entry.name.withCString { name in
                while true {
                    // O_NONBLOCK: opening a FIFO (or a tty) planted under a cache name must not block.
                    rawFD = openat(directory.fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
                    if rawFD >= 0 { return 0 }
                    if errno != EINTR { return errno }
                }
            }
            if openErrno == ENOENT { return .vanished }
            if openErrno == ELOOP { return .invalid(.badMagic, identity: nil) }  // a planted symlink
            if let reason = Self.foreignOpenErrors[openErrno] { return .foreign(reason) }
            if openErrno != 0 {
                return .failed(SystemCallError(call: "openat", path: path + "/" + entry.name.string, errno: openErrno))
            }
            // The path is the directory's, so that no string is built on a hit; `lookup` puts
            // the file's path into the error (``naming(_:file:in:)``), on failures only.
            let file = FileDescriptor(adopting: rawFD, path: directory.path)
            let variant = entry.variant
            let expected = DiskFileHeader.fileLength(of: variant, keyLength: key.count)
            let storage: PixelStorage
            if expected < configuration.mapThreshold {
                // One pread of one byte more than expected: reading exactly `expected` proves the length.
                let buffer = PixelStorage(uninitializedByteCount: expected + 1)
                var done = 0
                while done <= expected {
                    let n = pread(file.rawValue, buffer.base + done, expected + 1 - done, off_t(done))
                    if n < 0 {
                        let code = errno
                        if code == EINTR { continue }
                        // pread of a FIFO is ESPIPE, of a directory EISDIR: not a cache file.
                        if let reason = Self.foreignReadErrors[code] { return .foreign(reason) }
                        return .failed(SystemCallError(call: "pread", path: file.path, errno: code))
                    }
                    if n == 0 { break }
                    done += n
                    if done == expected { break }  // asked for one byte more and got none: exact length
                }
                guard done == expected else {
                    return .invalid(.lengthMismatch(expected: expected, actual: done), identity: identity(of: file))
                }
                storage = buffer
            } else {
                let length: Int
                do { length = try file.size() } catch { return .failed(error) }
                guard length == expected else {
                    return .invalid(.lengthMismatch(expected: expected, actual: length), identity: identity(of: file))
                }
                do {
                    storage = try MappedRegion(file: file, length: expected, populate: configuration.populateMappings)
                        .intoPixelStorage(kind: .fileMapping)
                } catch {
                    return .failed(error)
                }
            }
            let bytes = UnsafeRawBufferPointer(start: storage.base, count: expected)
            let header: DiskFileHeader
            do {
                header = try DiskFileHeader(validating: bytes)
            } catch {
                return .invalid(error, identity: identity(of: file))
            }
            guard header.variant == variant else {
                return .invalid(.badField("size, mode or style differ from the name"), identity: identity(of: file))
            }
            guard header.keyLength == key.count,
                  memcmp(DiskFileHeader.keyBytes(in: bytes, keyLength: key.count).baseAddress!, key.baseAddress!, key.count) == 0
            else { return .otherKey }
            let verify: Bool
            switch configuration.checksumPolicy {
            case .everyHit: verify = true
            case .firstHit: verify = !entry.isVerified
            case .never: verify = false
            }
            if verify {
                let pixels = UnsafeRawBufferPointer(rebasing: bytes[header.pixelOffset...])
                guard XXH64.hash(pixels) == header.pixelChecksum else {
                    return .invalid(.badPixelChecksum, identity: identity(of: file))
                }
                if configuration.checksumPolicy == .firstHit {
                    state.withLock { $0.index.setVerified(entry) }
                }
            }
            let image = PixelImage(
                width: header.width, height: header.height, bytesPerRow: header.bytesPerRow, style: header.style,
                storage: storage, offset: header.pixelOffset)
            return .hit(DiskTier.Hit(image: image, variant: variant, sourceVersion: header.sourceVersion))
        }

        /// `error` with its path set to the file `name` in `directory` (a hit's descriptor
        /// carries the directory's path, to build no string per hit).
        static func naming(_ error: SystemCallError, file name: DiskFileName, in directory: String) -> SystemCallError {
            SystemCallError(call: error.call, path: directory + "/" + name.string, errno: error.errno)
        }

        /// `openat` failures that mean the name is not a file this tier can use (rather than a
        /// transient problem such as EMFILE, which is thrown).
        static let foreignOpenErrors: [Int32: String] = [
            EACCES: "no permission to read it", EPERM: "no permission to read it",
            ENXIO: "not a regular file (socket or device)", ENODEV: "not a regular file (device)",
            EISDIR: "a directory",
        ]
        /// `pread` failures that mean the open name is not a regular file.
        static let foreignReadErrors: [Int32: String] = [
            ESPIPE: "not a regular file (FIFO)", EISDIR: "a directory",
            EINVAL: "not a regular file", ENXIO: "not a regular file (device)",
        ]

        private func identity(of file: borrowing FileDescriptor) -> FileIdentity? {
            (try? file.status()).map(FileIdentity.init)
        }

        /// Drops a file that failed validation: from the index, and from disk unless the name
        /// meanwhile holds another file (a newer publish). Only regular files and symlinks
        /// are deleted; anything else under the name (a FIFO, a directory, a device) is only
        /// dropped from the index, since it is not ours to remove. `identity` is the file that
        /// failed (`nil` when it could not be opened: then the one the index knows).
        private func discardInvalid(_ entry: DiskIndexEntry, directory: DirectoryHandle, identity: FileIdentity?, reason: String) {
            let name = entry.name.string
            let device = state.withLock { $0.device }
            let outcome = deleteFile(name, digest: entry.digest, ifIdentity: identity ?? FileIdentity(of: entry, device: device),
                                     in: directory, regularOnly: true) {
                _ = state.withLock { $0.index.remove(entry) }
            }
            switch outcome {
            case .foreign:
                dropForeign(entry, reason: reason)
                return
            case .deleted, .gone, .replaced:
                break
            case .failed(let error):
                logger.warning("cannot delete invalid cache file", metadata: ["file": "\(path)/\(name)", "error": "\(error)"])
                _ = state.withLock { $0.index.remove(entry) }
            }
            invalidFiles.add(1, ordering: .relaxed)
            logger.warning("removed invalid cache file", metadata: ["file": "\(path)/\(name)", "reason": "\(reason)"])
        }

        /// Drops from the index (not from disk) a name that is not a readable regular file. A
        /// rescan indexes it again, and the next lookup drops it again.
        private func dropForeign(_ entry: DiskIndexEntry, reason: String) {
            invalidFiles.add(1, ordering: .relaxed)
            _ = state.withLock { $0.index.remove(entry) }
            logger.warning("ignored a cache-named entry that is not a readable regular file; left it on disk",
                           metadata: ["file": "\(path)/\(entry.name.string)", "reason": "\(reason)"])
        }

        // MARK: Stores

        func enqueue(_ job: Job) -> Bool {
            let bytes = job.image.byteCount
            let accepted = queue.withLock { q -> Bool in
                guard !q.closed, q.jobs < configuration.writeQueueCapacity,
                      q.bytes + bytes <= configuration.writeQueueByteLimit || q.jobs == 0 else { return false }
                q.items.append(.job(job))
                q.jobs += 1
                q.bytes += bytes
                return true
            }
            if accepted {
                queueSignal.signal()
            } else {
                droppedStores.add(1, ordering: .relaxed)
            }
            return accepted
        }

        private func writerLoop() {
            while true {
                queueSignal.wait()
                let item: QueueItem? = queue.withLock { q in
                    guard q.head < q.items.count else { return nil }
                    let item = q.items[q.head]
                    q.head += 1
                    if q.head > 64 && q.head * 2 > q.items.count {
                        q.items.removeFirst(q.head)
                        q.head = 0
                    }
                    return item
                }
                switch item {
                case .none:
                    continue
                case .job(let job):
                    do {
                        try publish(image: job.image, key: job.key, mode: job.mode, sourceVersion: job.sourceVersion)
                    } catch {
                        failedStores.add(1, ordering: .relaxed)
                        logger.warning("write-behind store failed", metadata: ["error": "\(error)"])
                    }
                    queue.withLock { q in
                        q.jobs -= 1
                        q.bytes -= job.image.byteCount
                    }
                case .barrier(let semaphore):
                    semaphore.signal()
                case .stop:
                    return
                }
            }
        }

        func flush() {
            let semaphore = DispatchSemaphore(value: 0)
            let queued = queue.withLock { q -> Bool in
                guard !q.closed else { return false }
                q.items.append(.barrier(semaphore))
                return true
            }
            guard queued else { return }
            queueSignal.signal()
            semaphore.wait()
        }

        func publish(image: PixelImage, key: String, mode: ContentMode, sourceVersion: UInt64) throws(DiskTierError) {
            let digest = KeyDigest(key: key)
            let variant = VariantDescriptor(size: image.size, mode: mode, style: image.style)
            guard image.width <= DiskFileName.maximumSide, image.height <= DiskFileName.maximumSide else {
                throw .invalidImage(key: key, reason: "sides above \(DiskFileName.maximumSide) pixels cannot be stored on disk")
            }
            guard image.width * image.height <= DiskFileName.maximumPixelCount else {
                throw .invalidImage(key: key, reason: "images above \(DiskFileName.maximumPixelCount) pixels cannot be stored on disk")
            }
            let newEntry = DiskIndexEntry(digest: digest, variant: variant)
            let charge = newEntry.chargedBytes
            let limit = configuration.byteLimit
            guard charge <= limit else { throw .imageLargerThanLimit(key: key, bytes: charge, limit: limit) }

            // Reserve the bytes, evicting least-recently-used files first: the limit holds
            // before the new file becomes visible.
            let reserved: DirectoryHandle? = state.withLock { s in
                guard !s.closed else { return nil }
                s.reserved += charge
                return s.directory
            }
            guard let directory = reserved else { throw .closed }
            defer { state.withLock { $0.reserved -= charge } }
            evict(toFit: newEntry, limit: limit, directory: directory)

            // The byte limit charges each file its pixels plus a fixed allowance for header and
            // key (the index knows names only): long keys are stored by digest to fit it.
            let bytes = DiskFileEncoder.encode(image, key: StoredKey.string(for: key), mode: mode, sourceVersion: sourceVersion)
            let finalName = DiskFileName(digest: digest, variant: variant).string
            let temporary = "\(DiskFileName.temporaryPrefix)\(digest)-\(getpid())-\(temporaryCounter.add(1, ordering: .relaxed).newValue)"
            do throws(SystemCallError) {
                let file = try FileDescriptor(
                    openAt: directory.descriptor, name: temporary,
                    flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o644)
                do throws(SystemCallError) {
                    try rethrowingTyped(SystemCallError.self) { try bytes.withUnsafeBytes { raw in try file.write(raw, at: 0) } }
                    if configuration.durable { try file.sync() }
                    var entry = newEntry
                    entry.inode = UInt64(try file.status().st_ino)
                    entry.isVerified = true  // written from these very bytes
                    // Rename and index as one step for evictions and removals of the name.
                    try nameLock(digest).withLock { _ throws(SystemCallError) in
                        try directory.descriptor.rename(temporary, to: finalName)
                        _ = state.withLock { $0.index.insert(entry, replacedFile: true, use: true) }
                    }
                } catch {
                    try? directory.descriptor.unlink(temporary)
                    throw error
                }
                if configuration.durable { try directory.descriptor.sync() }
            } catch {
                throw .io(error)
            }
            stores.add(1, ordering: .relaxed)
        }

        /// Victims chosen per acquisition of the index lock.
        static let evictionBatch = 64

        /// Deletes least-recently-used files until the index, the reservations (which include
        /// the store of `newEntry`) and nothing more fit in `limit`, freeing a little more than
        /// needed (1/128 of the limit) so that a full cache evicts once per many writes.
        ///
        /// Victims are taken in batches of ``evictionBatch`` from the oldest end of the index's
        /// recency list: each batch costs O(batch) under the index lock, and the files are
        /// deleted outside it, so lookups interleave with even a very large eviction (a directory
        /// opened far over a smaller limit). A victim that cannot be deleted (EPERM, EBUSY, EROFS,
        /// a directory under the name…) goes back into the index as most recently used, so that
        /// it is not retried on every store, and others are evicted in its place; after four
        /// batches in a row that deleted nothing the store goes ahead over the limit.
        func evict(toFit newEntry: DiskIndexEntry, limit: Int, directory: DirectoryHandle) {
            var fruitless = 0
            while fruitless < 4 {
                var examined = 0
                let (victims, device): ([DiskIndexEntry], UInt64) = state.withLock { s in
                    let replacing = s.index.slot(of: newEntry) != nil ? newEntry.chargedBytes : 0
                    let excess = s.index.chargedBytes - replacing + s.reserved - limit
                    guard excess > 0 else { return ([], s.device) }
                    return (s.index.takeLeastRecentlyUsed(
                        atLeast: excess + limit / 128, maximumCount: Self.evictionBatch, excluding: newEntry, examined: &examined), s.device)
                }
                evictionExamined.add(examined, ordering: .relaxed)
                if victims.isEmpty { return }
                testHooks.withLock { $0.evictionBatchChosen }?(victims)
                var kept: [DiskIndexEntry] = []
                for victim in victims {
                    let name = victim.name.string
                    switch deleteFile(name, digest: victim.digest, ifIdentity: FileIdentity(of: victim, device: device), in: directory) {
                    case .deleted, .gone:
                        evictions.add(1, ordering: .relaxed)
                    case .replaced, .foreign:
                        // A newer file under the name (published after the victim was chosen):
                        // indexed by its publish or its inotify event, not ours to delete.
                        break
                    case .failed(let error):
                        logger.warning("cannot evict cache file; keeping it in the index",
                                       metadata: ["file": "\(path)/\(name)", "error": "\(error)"])
                        kept.append(victim)
                    }
                }
                if !kept.isEmpty {
                    state.withLock { s in for entry in kept { s.index.insert(entry, use: true) } }
                }
                fruitless = kept.count == victims.count ? fruitless + 1 : 0
            }
        }

        enum DeleteOutcome {
            case deleted
            /// Nothing under the name.
            case gone
            /// The name holds another file than the one asked for (or the index never knew
            /// which file it described): left alone.
            case replaced
            /// Not a regular file or symlink (only with `regularOnly`): left alone.
            case foreign
            case failed(SystemCallError)
        }

        /// The lock that orders deletions of and publishes onto names of `digest`.
        func nameLock(_ digest: KeyDigest) -> Lock<Void> { nameLocks[Int(truncatingIfNeeded: digest.high) & (nameLocks.count - 1)] }

        /// Deletes `name` only while it is the file `identity` (`fstatat`, compare device and
        /// inode, `unlinkat`), holding the name's lock, so that a store of this process cannot
        /// land between the check and the deletion; `andThen` runs under that lock after a
        /// deletion (or when nothing is there), e.g. to drop the entry from the index. Another
        /// process can still rename onto the name in the microseconds between the check and the
        /// unlink; Linux has no unlink-if-inode.
        func deleteFile(
            _ name: String, digest: KeyDigest, ifIdentity identity: FileIdentity?, in directory: DirectoryHandle,
            regularOnly: Bool = false, _ andThen: () -> Void = {}
        ) -> DeleteOutcome {
            nameLock(digest).withLock { _ in
                let st: stat
                do throws(SystemCallError) {
                    st = try directory.descriptor.status(of: name)
                } catch {
                    if error.errno == ENOENT { andThen(); return .gone }
                    return .failed(error)
                }
                let type = st.st_mode & S_IFMT
                if regularOnly && type != S_IFREG && type != S_IFLNK { return .foreign }
                guard let identity, FileIdentity(st) == identity else { return .replaced }
                do throws(SystemCallError) {
                    try directory.descriptor.unlink(name)
                } catch {
                    if error.errno != ENOENT { return .failed(error) }
                }
                andThen()
                return .deleted
            }
        }

        /// Deletes every variant of `digest` that the index holds: from the index, and each file
        /// while it is still the one indexed.
        func remove(digest: KeyDigest) {
            let (victims, directory, device) = state.withLock { s in (s.index.removeAll(digest: digest), s.directory, s.device) }
            for victim in victims {
                let name = victim.name.string
                if case .failed(let error) = deleteFile(name, digest: digest, ifIdentity: FileIdentity(of: victim, device: device), in: directory) {
                    logger.warning("cannot delete cache file", metadata: ["file": "\(path)/\(name)", "error": "\(error)"])
                }
            }
        }

        /// Deletes every published file listed in the directory (other processes' too), and
        /// their entries; a file published under a listed name after the listing survives,
        /// with its entry.
        func removeAll() throws(DiskTierError) {
            let (directory, device) = state.withLock { ($0.directory, $0.device) }
            var listed: [DiskIndexEntry] = []
            do {
                try DirectoryScan.forEachName(in: directory) { bytes, inode in
                    if let name = DiskFileName(bytes: bytes) {
                        listed.append(DiskIndexEntry(digest: name.digest, variant: name.variant, inode: inode))
                    }
                }
            } catch {
                throw .io(error)
            }
            for file in listed {
                let name = file.name.string
                let outcome = deleteFile(name, digest: file.digest, ifIdentity: FileIdentity(of: file, device: device), in: directory) {
                    state.withLock { s in
                        if let id = s.index.slot(of: file), s.index[id].inode == file.inode || s.index[id].inode == 0 {
                            s.index.remove(file)
                        }
                    }
                }
                if case .failed(let error) = outcome {
                    logger.warning("cannot delete cache file", metadata: ["file": "\(path)/\(name)", "error": "\(error)"])
                }
            }
        }

        // MARK: Index maintenance

        /// Rebuilds the index from the directory's names and converges to it, keeping the
        /// recency order of files that are still there. Verification is not kept: with
        /// ``ChecksumPolicy/firstHit`` each file is checksummed again on its next hit.
        func rescan(initial: Bool) throws(DiskTierError) {
            let directory = state.withLock { $0.directory }
            var stale: [String] = []
            var fresh: DiskIndex
            do {
                fresh = try DirectoryScan.buildIndex(of: directory, staleTemporaries: &stale)
            } catch {
                throw .io(error)
            }
            rescans.add(1, ordering: .relaxed)
            state.withLock { s in
                var merged = DiskIndex(minimumCapacity: fresh.count)
                merged.continueGenerations(after: s.index)
                // Files still there keep their order, oldest first; not the verified flag: a
                // name alone does not tell whether another process replaced the file while no
                // event said so.
                s.index.forEach { entry in
                    if let id = fresh.slot(of: entry) { merged.insert(fresh[id]) }
                }
                // Files that appeared while we were not looking count as new (no-op for the rest).
                fresh.forEach { merged.insert($0) }
                s.index = merged
            }
        }

        struct WatcherControl {
            /// The watcher thread runs its loop (from before it starts until it returns).
            var running = false
            var stopping = false
            var paused = false
            /// The watcher is parked because of `paused` (reads no events).
            var parked = false
        }

        /// Stops (true) or resumes reading inotify events. Pausing returns once the watcher is
        /// parked, or at once when it is not running (before start, after close).
        func pauseWatcher(_ pause: Bool) {
            let running = control.withLock { c in
                c.paused = pause
                return c.running
            }
            guard running else { return }
            control.broadcast()  // a parked watcher re-checks `paused`
            wake()               // a watcher in poll() looks at `paused`
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

        private func wake() {
            var one: UInt64 = 1
            _ = try? withUnsafeBytes(of: &one) { raw throws(SystemCallError) in try wakeEvent.writeOnce(raw) }
        }

        // MARK: Watcher thread

        private func watcherLoop() {
            let bufferSize = 64 << 10
            let buffer = UnsafeMutableRawPointer.allocate(byteCount: bufferSize, alignment: 8)
            defer { buffer.deallocate() }
            var recoverPending = false
            let pollMilliseconds = Int32(clamping: configuration.rescanInterval.components.seconds * 1000
                + configuration.rescanInterval.components.attoseconds / 1_000_000_000_000_000)
            defer {
                control.withLock { $0.running = false }
                control.broadcast()
            }
            while watcherShouldContinue() {
                let watching = watch.load(ordering: .acquiring) >= 0
                var fds = [pollfd(fd: wakeEvent.rawValue, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: watching ? inotify?.descriptor.rawValue ?? -1 : -1, events: Int16(POLLIN), revents: 0)]
                let timeout: Int32 = recoverPending ? 100 : (watching ? -1 : max(pollMilliseconds, 10))
                let ready = poll(&fds, 2, timeout)
                if ready < 0 && errno != EINTR {
                    logger.error("poll failed in directory watcher", metadata: ["errno": "\(errno)"])
                    usleep(100_000)
                    continue
                }
                if fds[0].revents != 0 {
                    var value: UInt64 = 0
                    _ = try? withUnsafeMutableBytes(of: &value) { raw throws(SystemCallError) in try wakeEvent.readOnce(into: raw) }
                    continue
                }
                if recoverPending {
                    recoverPending = !recoverDirectory()
                    continue
                }
                if !watching {
                    if ready == 0 { rescanLogging() }
                    continue
                }
                guard fds[1].revents != 0 else { continue }
                guard let inotify else { continue }
                let n = Glibc.read(inotify.descriptor.rawValue, buffer, bufferSize)
                if n <= 0 { continue }
                var needRescan = false
                var needRecover = false
                processEvents(UnsafeRawBufferPointer(start: buffer, count: n), rescan: &needRescan, recover: &needRecover)
                if needRecover {
                    recoverPending = !recoverDirectory()
                } else if needRescan {
                    logger.notice("inotify queue overflowed; rescanning", metadata: ["directory": "\(path)"])
                    rescanLogging()
                }
            }
        }

        private func rescanLogging() {
            do { try rescan(initial: false) } catch {
                logger.warning("directory rescan failed", metadata: ["directory": "\(path)", "error": "\(error)"])
            }
        }

        private func processEvents(_ events: UnsafeRawBufferPointer, rescan: inout Bool, recover: inout Bool) {
            let current = watch.load(ordering: .acquiring)
            let parent = parentWatch.load(ordering: .acquiring)
            var offset = 0
            while offset + 16 <= events.count {
                let wd = events.loadUnaligned(fromByteOffset: offset, as: Int32.self)
                let mask = events.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                let length = Int(events.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                let nameStart = offset + 16
                offset = nameStart + length
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { rescan = true; continue }
                if wd == parent && wd != current {
                    // Our directory deleted or renamed away?
                    if mask & UInt32(IN_ISDIR) != 0, length > 0, offset <= events.count {
                        let raw = events.baseAddress!.advanced(by: nameStart).assumingMemoryBound(to: UInt8.self)
                        let nameLength = strnlen(UnsafeRawPointer(raw).assumingMemoryBound(to: CChar.self), length)
                        if UnsafeBufferPointer(start: raw, count: nameLength).elementsEqual(baseName) { recover = true }
                    }
                    continue
                }
                guard wd == current else { continue }
                if mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_UNMOUNT) != 0 { recover = true; continue }
                guard length > 0, offset <= events.count else { continue }
                let raw = events.baseAddress!.advanced(by: nameStart).assumingMemoryBound(to: UInt8.self)
                let nameLength = strnlen(UnsafeRawPointer(raw).assumingMemoryBound(to: CChar.self), length)
                guard let name = DiskFileName(bytes: UnsafeBufferPointer(start: raw, count: nameLength)) else { continue }
                if mask & UInt32(IN_MOVED_TO) != 0 {
                    indexAppearedFile(name)
                } else if mask & UInt32(IN_CLOSE_WRITE) != 0 {
                    // A writer that does not rename: index only a complete, valid file.
                    if let inode = validateClosedFile(name) { indexAppearedFile(name, inode: inode) }
                } else if mask & UInt32(IN_DELETE | IN_MOVED_FROM) != 0 {
                    _ = state.withLock { $0.index.remove(DiskIndexEntry(digest: name.digest, variant: name.variant)) }
                }
            }
        }

        /// Indexes a file that appeared under `name`: a new name counts as just used; a name
        /// already indexed keeps its place in the recency order (the event may be the late echo
        /// of our own publish, arriving after later lookups, and must not reorder the LRU) but
        /// is unverified again. The file's inode is `inode`, or looked up (`fstatat`); a name that
        /// is gone again is not indexed.
        private func indexAppearedFile(_ name: DiskFileName, inode known: UInt64? = nil) {
            var inode: UInt64 = 0
            if let known {
                inode = known
            } else {
                let directory = state.withLock { $0.directory }
                do {
                    inode = UInt64(try directory.descriptor.status(of: name.string).st_ino)
                } catch where error.errno == ENOENT {
                    return  // its IN_DELETE/IN_MOVED_FROM follows
                } catch {
                    // Unknown inode: eviction will leave the file alone (logged) until a rescan.
                    logger.warning("cannot stat a file another writer published", metadata: ["error": "\(error)"])
                }
            }
            let entry = DiskIndexEntry(digest: name.digest, variant: name.variant, inode: inode)
            _ = state.withLock { $0.index.insert(entry, replacedFile: true) }
        }

        /// Header, key digest and length check of a file written in place (`IN_CLOSE_WRITE`);
        /// returns its inode when it is valid.
        private func validateClosedFile(_ name: DiskFileName) -> UInt64? {
            let directory = state.withLock { $0.directory }
            let fileName = name.string
            guard let file = try? FileDescriptor(openAt: directory.descriptor, name: fileName, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
            else { return nil }
            var valid = false
            let headerBytes = withUnsafeTemporaryAllocation(byteCount: 64, alignment: 8) { fixed -> Int? in
                guard (try? file.read(into: fixed, at: 0)) == 64,
                      let keyLength = Optional(Int(UInt32(littleEndian: UnsafeRawBufferPointer(fixed).loadUnaligned(fromByteOffset: 40, as: UInt32.self)))),
                      keyLength <= 1 << 24 else { return nil }
                return DiskFileHeader.pixelOffset(keyLength: keyLength)
            }
            if let headerLength = headerBytes {
                var area = [UInt8](repeating: 0, count: headerLength)
                valid = area.withUnsafeMutableBytes { raw -> Bool in
                    guard (try? file.read(into: raw, at: 0)) == headerLength,
                          let header = try? DiskFileHeader(validating: UnsafeRawBufferPointer(raw)),
                          header.variant == name.variant,
                          (try? file.size()) == header.fileLength else { return false }
                    let key = DiskFileHeader.keyBytes(in: UnsafeRawBufferPointer(raw), keyLength: header.keyLength)
                    return StoredKey.nameDigest(ofStored: key) == name.digest
                }
            }
            if !valid {
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
            let directory: DirectoryHandle
            let device: UInt64
            do {
                directory = try DirectoryHandle(path: path, create: true)
                device = UInt64(try directory.descriptor.status().st_dev)
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

        // MARK: Lifecycle

        func statistics() -> DiskTier.Statistics {
            var stats = DiskTier.Statistics()
            stats.hits = hits.load(ordering: .relaxed)
            stats.misses = misses.load(ordering: .relaxed)
            stats.invalidFiles = invalidFiles.load(ordering: .relaxed)
            stats.stores = stores.load(ordering: .relaxed)
            stats.droppedStores = droppedStores.load(ordering: .relaxed)
            stats.failedStores = failedStores.load(ordering: .relaxed)
            stats.evictions = evictions.load(ordering: .relaxed)
            stats.rescans = rescans.load(ordering: .relaxed)
            stats.recoveries = recoveries.load(ordering: .relaxed)
            state.withLock { s in
                stats.entries = s.index.count
                stats.bytes = s.index.chargedBytes
                stats.indexMemoryBytes = s.index.memoryBytes
            }
            stats.watching = watch.load(ordering: .relaxed) >= 0
            return stats
        }

        func close() {
            guard !closeOnce.exchange(true, ordering: .acquiringAndReleasing) else { return }
            // Drain the queue, then stop the writer.
            queue.withLock { q in
                q.items.append(.stop)
                q.closed = true
            }
            queueSignal.signal()
            control.withLock { $0.stopping = true }
            control.broadcast()
            wake()
            let workers = threads.withLock { t in
                let all = t
                t = []
                return all
            }
            for worker in workers { worker.join() }
            state.withLock { $0.closed = true }
            // No events queue up for a closed tier; the descriptors close with the core.
            for watchDescriptor in [watch.exchange(-1, ordering: .acquiringAndReleasing), parentWatch.exchange(-1, ordering: .acquiringAndReleasing)]
            where watchDescriptor >= 0 {
                try? inotify?.removeWatch(watchDescriptor)
            }
        }
    }
}
