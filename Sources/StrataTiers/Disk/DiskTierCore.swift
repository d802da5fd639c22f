import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging
import Synchronization

extension DiskTier {
    /// The shared state behind a ``DiskTier``, referenced by its watcher thread and its drain
    /// jobs.
    ///
    /// One concern per file: this one holds the state, opening and closing;
    /// `DiskTierCore+Lookup` serves hits, `+WriteQueue` the write-behind queue and its drain,
    /// `+Publish` the atomic publish,
    /// `+Eviction` the byte limit and every deletion by name, `+Watcher` inotify, rescans and
    /// recovery of a deleted directory.
    package final class Core: Sendable {
        /// A file being deleted, as ``State/deleting`` holds it.
        package struct DeletingFile: Hashable {
            package var digest: ImageEntityID
            package var variant: VariantDescriptor
            package var isWholeOriginal: Bool
            package var inode: UInt64

            package init(_ entry: DiskIndexEntry) {
                digest = entry.digest
                variant = entry.variant
                isWholeOriginal = entry.isWholeOriginal
                inode = entry.inode
            }
        }

        /// What lookups, stores and the watcher share; behind ``state``, held briefly (no
        /// syscall under it).
        package struct State {
            package var index: DiskIndex
            package var directory: Shared<FileDescriptor>
            /// The directory's device (`st_dev`): with an entry's inode, the identity of its file.
            package var device: UInt64
            /// Bytes of stores between eviction and publish (counted against the limit).
            package var reserved = 0
            /// Files (name and inode) taken out of the index to be deleted and not deleted yet: a
            /// late event or a rescan that sees one of them must not index it again (a phantom
            /// entry that would make the next eviction delete a live file in its place). The name
            /// is part of it: the file system gives a deleted file's inode number to the next file
            /// created, and another writer's file published under another name with that number
            /// while a batch is being deleted was never indexed (found by Scripts/soak.sh: files
            /// that no index counted against the byte limit).
            package var deleting: Set<DeletingFile> = []
            /// Rescans listing the directory now (``DiskTier/Core/rescan()``).
            package var rescansRunning = 0
            /// Files deleted while a rescan was listing: its listing may hold them, and its merge
            /// must not index them again (emptied when the last running rescan merges).
            package var deletedDuringRescan: Set<DeletingFile> = []
            package var closed = false
        }

        /// The directory's canonical path (``FileDescriptor/resolvedPath(_:)``).
        package let path: String
        /// The path as the tier was opened with.
        package let requestedPath: String
        package let configuration: Configuration
        /// ``DiskTier/Configuration/byteLimit``, changed at run time by ``DiskTier/setByteLimit(_:)``.
        package let byteLimit: Atomic<Int>
        package let logger: Logger
        package let state: Lock<State>
        /// Write-behind stores waiting to be published (``Queue``).
        package let queue = Lock(Queue())
        /// Where the queue's drain jobs run (prefetch lane): the pool the tier was given, or
        /// its private one-thread pool (``ownsWriter``).
        package let writer: BlockingPool<Void>
        /// The tier started ``writer`` itself (no pool was given): it is shut down on close.
        package let ownsWriter: Bool
        /// The watcher thread (joined on close).
        package let threads = Lock<[OSThread]>([])
        package let closeOnce = Atomic<Bool>(false)
        package let temporaryCounter = Atomic<Int>(0)
        /// Striped by digest: held while a name is checked and deleted (``deleteFile(_:digest:ifIdentity:in:regularOnly:_:)``)
        /// and while a publish renames onto it and indexes the result, so that neither lands
        /// between the other's steps. Never held by lookups.
        package let nameLocks = (0..<16).map { _ in Lock(()) }
        package let testHooks = Lock(DiskTier.TestHooks())
        /// Told about indexed files that something else deleted or renamed away (another
        /// process's eviction or invalidation): the engine drops its memory copies of them.
        package let externalRemovalObserver = Lock<(@Sendable (ImageEntityID, VariantDescriptor) -> Void)?>(nil)

        // Watcher.
        /// `nil` without inotify (then the watcher rescans periodically).
        package let inotify: Inotify?
        /// Wakes the watcher out of `poll` (non-blocking eventfd). Open until the core goes away,
        /// so that a late ``pauseWatcher(_:)`` never writes to a descriptor number that has
        /// since been reused.
        package let wakeEvent: FileDescriptor
        /// The watcher thread's state, with sleeping waits for pausing and stopping it.
        package let control = Lock(WatcherControl())
        package let watch = Atomic<Int32>(-1)
        /// Watch on the parent directory: while the tier holds the directory open, deleting it
        /// does not produce `IN_DELETE_SELF` (the inode lives on), but the parent sees the
        /// `IN_DELETE`/`IN_MOVED_FROM` of its name. -1 when the parent is the directory itself
        /// (`/`).
        package let parentWatch = Atomic<Int32>(-1)
        /// The parent and the last component of ``path`` (canonical, so `dir/.` watches the
        /// parent of `dir`, not `dir` again).
        package let parentPath: String
        package let baseName: [UInt8]

        // Counters.
        package let hits = Atomic<Int>(0)
        package let hitsWithoutWaiting = Atomic<Int>(0)
        package let misses = Atomic<Int>(0)
        package let invalidFiles = Atomic<Int>(0)
        package let stores = Atomic<Int>(0)
        package let droppedStores = Atomic<Int>(0)
        package let failedStores = Atomic<Int>(0)
        package let evictions = Atomic<Int>(0)
        package let rescans = Atomic<Int>(0)
        package let recoveries = Atomic<Int>(0)
        /// Index entries looked at to choose eviction victims (the work of choosing them).
        package let evictionExamined = Atomic<Int>(0)

        /// The private writer pool's name (its thread is `strata-disk-w-0`).
        package static let privateWriterName = "strata-disk-w"

        package init(path requested: String, configuration: Configuration, pool: BlockingPool<Void>?) throws(DiskTierError) {
            self.requestedPath = requested
            self.configuration = configuration
            self.byteLimit = Atomic(configuration.byteLimit)
            self.logger = configuration.logger
            let directory: Shared<FileDescriptor>
            let resolved: String
            do {
                directory = Shared(try FileDescriptor(directory: requested, create: true))
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
            let device: UInt64
            do {
                index = try DirectoryScan.buildIndex(of: directory.resource, staleTemporaries: &stale)
                device = UInt64(try directory.resource.status().st_dev)
            } catch {
                throw .cannotUseDirectory(path: resolved, underlying: error)
            }
            state = Lock(State(index: index, directory: directory, device: device))
            do {
                wakeEvent = try FileDescriptor.eventFD(nonBlocking: true)
            } catch {
                throw .io(error)
            }
            if let pool {
                writer = pool
                ownsWriter = false
            } else {
                do {
                    writer = try BlockingPool(width: 1, prefetchWidth: 1, name: Self.privateWriterName, makeContext: {})
                } catch {
                    throw .io(error)
                }
                ownsWriter = true
            }
            var inotify: Inotify?
            if configuration.useInotify {
                do {
                    inotify = try Inotify()
                } catch {
                    logger.warning(
                        "inotify unavailable; rescanning every \(configuration.rescanInterval)",
                        metadata: ["directory": "\(resolved)", "error": "\(error)"])
                }
            }
            self.inotify = inotify
            if let inotify, !startWatching(inotify) {
                logger.warning(
                    "cannot watch directory (inotify watch limit?); rescanning every \(configuration.rescanInterval)",
                    metadata: ["directory": "\(resolved)"])
            }
            removeStaleTemporaries(stale, in: directory)
            try startThreads()
        }

        /// Starts the watcher; when it cannot start, stops the private writer pool (nothing is
        /// queued yet) so that no thread outlives the failed init.
        private func startThreads() throws(DiskTierError) {
            do {
                control.withLock { $0.running = true }
                let watcher = try OSThread(name: "strata-disk-i") { [self] in watcherLoop() }
                threads.withLock { $0 = [watcher] }
            } catch {
                control.withLock { $0.running = false }
                _ = closeOnce.exchange(true, ordering: .acquiringAndReleasing)
                if ownsWriter { writer.shutdown() }
                throw .io(error)
            }
        }

        /// Deletes the temporary files of crashed writers: those whose writer is certainly gone
        /// (``DiskTemporaryName/isAbandoned(_:modified:now:)``) and any older than an hour; a
        /// younger one of a live writer, or of a writer in another pid namespace, may be a
        /// store in progress.
        private func removeStaleTemporaries(_ names: [String], in directory: Shared<FileDescriptor>) {
            let now = Int(time(nil))
            for name in names {
                guard let st = try? directory.resource.status(of: name), st.st_mode & S_IFMT == S_IFREG,
                    DiskTemporaryName.isAbandoned(name, modified: Int(st.st_mtim.tv_sec), now: now)
                else { continue }
                do throws(SystemCallError) {
                    try directory.resource.unlink(name)
                } catch  where error.errno != ENOENT {
                    logger.warning("cannot delete stale temporary file", metadata: ["error": "\(error)"])
                } catch {}
            }
        }

        // MARK: Lifecycle

        package func statistics() -> DiskTier.Statistics {
            var stats = DiskTier.Statistics()
            stats.hits = hits.load(ordering: .relaxed)
            stats.hitsWithoutWaiting = hitsWithoutWaiting.load(ordering: .relaxed)
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

        /// Drains the write queue (helping on the calling thread when no drain runs), stops the
        /// watcher and the private writer pool, and removes the inotify watches (so that no
        /// events queue up for a closed tier). The descriptors close when the core goes away.
        /// Safe on a thread of the writer pool: it never waits for a job queued behind it.
        package func close() {
            guard !closeOnce.exchange(true, ordering: .acquiringAndReleasing) else { return }
            closeQueue()
            if ownsWriter { writer.shutdown() }
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
            for watchDescriptor in [
                watch.exchange(-1, ordering: .acquiringAndReleasing),
                parentWatch.exchange(-1, ordering: .acquiringAndReleasing),
            ]
            where watchDescriptor >= 0 {
                try? inotify?.removeWatch(watchDescriptor)
            }
        }
    }
}
