import Logging
import StrataBase

/// Errors of the disk tier. Each says what failed and what to do about it.
public enum DiskTierError: Error, Sendable, CustomStringConvertible {
    /// The cache directory cannot be created, opened or read: fix the path or its permissions.
    case cannotUseDirectory(path: String, underlying: SystemCallError)
    /// A file operation failed for a reason that is not the file's fault (no space, too many
    /// open files, I/O error): the entry was not stored or not served; retry later.
    case io(SystemCallError)
    /// The image alone is bigger than the directory's byte limit: raise
    /// ``DiskTier/Configuration/byteLimit`` or do not store it on disk.
    case imageLargerThanLimit(key: String, bytes: Int, limit: Int)
    /// The image cannot be stored on disk (e.g. absurd dimensions); nothing was written.
    case invalidImage(key: String, reason: String)
    /// The tier was closed.
    case closed
    /// A setting is out of range (``DiskTier/Configuration/validate()``); nothing was opened.
    case invalidConfiguration(ConfigurationError)

    public var description: String {
        switch self {
        case .cannotUseDirectory(let path, let error):
            return "disk tier: cannot use directory \(path): \(error)"
        case .io(let error):
            return "disk tier: \(error)"
        case .invalidConfiguration(let error):
            return "disk tier: \(error)"
        case .imageLargerThanLimit(let key, let bytes, let limit):
            let shown = key.count > 80 ? String(key.prefix(80)) + "…" : key
            return "disk tier: image for key \"\(shown)\" needs \(bytes) bytes, more than the byte limit \(limit); raise byteLimit"
        case .invalidImage(let key, let reason):
            let shown = key.count > 80 ? String(key.prefix(80)) + "…" : key
            return "disk tier: cannot store image for key \"\(shown)\": \(reason)"
        case .closed:
            return "disk tier: used after close()"
        }
    }
}

/// The disk tier: a directory of raw pixel files (one variant per file, see docs/Architecture.md), with an
/// in-memory index kept current by inotify, so that deciding hit or miss never touches the disk.
///
/// - A **miss** costs a SHA-256 of the key and a probe of the in-memory index: no syscall, no
///   allocation.
/// - A **hit** opens the matching file and either maps it read-only (large files; the returned
///   image's storage is the mapping, unmapped when the last copy goes away) or reads it into a
///   heap buffer (small files, where `pread` beats the page-table work). The header, the file
///   length and the full key are checked on every hit; the pixel checksum per
///   ``ChecksumPolicy``. A file that fails is deleted and counts as a miss; a name that is not
///   a readable regular file (a FIFO, a directory, no permission) is a miss, dropped from the
///   index and left on disk.
/// - **Stores** are atomic (temporary file with `O_EXCL|O_NOFOLLOW`, `fsync`, `rename`, directory
///   `fsync`) and enforce the byte limit before publishing, evicting least-recently-used files.
///   ``store(_:forKey:mode:isWholeOriginal:sourceVersion:)`` is write-behind through a bounded queue drained by
///   one job at a time on the prefetch lane of a ``/StrataBase/BlockingPool`` (the engine's when given, else
///   the tier's own one-thread pool); a full queue drops the store, it never blocks.
/// - Eviction, ``remove(key:)`` and ``removeAll()`` delete a name only while it still holds the
///   file (device and inode) they meant to delete, so a store of the same variant published in
///   between survives.
/// - Several processes (or instances) may share one directory; each sees the others' files
///   through inotify. Without inotify (watch or instance limit) the tier rescans periodically
///   and logs that it does.
///
/// Recency lives in memory only: after a restart every existing file is equally old (they are
/// evicted in directory order until used again). Thread-safe; all blocking work runs on the
/// caller's thread (hits, ``storeSynchronously(_:forKey:mode:isWholeOriginal:sourceVersion:)``, a ``flush()`` that
/// helps), on the writer pool (write-behind) or on the tier's watcher thread, never on Swift's
/// cooperative pool unless the caller is.
public final class DiskTier: Sendable {
    /// When a hit verifies the pixel checksum (XXH3-64 over all pixel bytes, ≈ 1 ms for a
    /// 16 MB image on this class of machine, bound by memory bandwidth — 15× the cost of the
    /// mapped hit itself).
    public enum ChecksumPolicy: String, Sendable, CaseIterable {
        /// Every hit reads every pixel once more to verify: safest, slowest.
        case everyHit
        /// The first hit of each file in this process verifies; later hits trust it (files are
        /// immutable once published, and a replaced file is verified again). The default.
        case firstHit
        /// Never: header, length and key are still checked on every hit.
        case never
    }

    /// Settings of a disk tier. Every field has a default.
    public struct Configuration: Sendable {
        /// Upper bound for the files in the directory (pixels plus a 4 KiB header allowance
        /// per file), enforced before every publish: when a store would exceed it, the least
        /// recently used files are deleted first, down to 1/128 of the limit below it (so a full
        /// cache deletes once per many stores). Choosing N victims costs O(N), in batches that
        /// hold the index lock briefly, so opening a directory far over a smaller limit does not
        /// stall lookups. Default 1 GiB.
        public var byteLimit: Int = 1 << 30
        /// Pixel checksum verification on hits. Default ``ChecksumPolicy/firstHit``.
        public var checksumPolicy: ChecksumPolicy = .firstHit
        /// Files shorter than this are read with `pread` into a heap buffer; longer ones are
        /// mapped. Default 256 KiB (measured by `strata-bench disk`, see the README).
        public var mapThreshold: Int = 256 << 10
        /// Build the page tables of a mapping up front (`MAP_POPULATE`). Measured slower than
        /// letting the kernel's fault-around map 16 pages per fault when the pixels are read
        /// (133 µs vs 77 µs for a 16 MB file), so off by default.
        public var populateMappings: Bool = false
        /// Maximum number of write-behind stores waiting to be published. Default 64.
        public var writeQueueCapacity: Int = 64
        /// Maximum pixel bytes of write-behind stores waiting to be published. Default 256 MiB.
        public var writeQueueByteLimit: Int = 256 << 20
        /// `fsync` files and the directory on publish (the crash guarantee). Default true.
        public var durable: Bool = true
        /// Watch the directory with inotify. When false, or when inotify is unavailable, the tier
        /// rescans every ``rescanInterval``.
        public var useInotify: Bool = true
        /// Interval of the fallback rescans. Default 5 s.
        public var rescanInterval: Duration = .seconds(5)
        /// Where the tier logs (fallbacks, invalid files, dropped writes).
        public var logger: Logger = Logger(label: "strata.disk")

        public init() {}

        /// Checks the values; throws a ``/StrataBase/ConfigurationError`` naming the bad one.
        public func validate() throws(ConfigurationError) {
            if byteLimit <= 0 { throw .init(key: "byteLimit", value: "\(byteLimit)", reason: "must be > 0 bytes") }
            if mapThreshold < 0 { throw .init(key: "mapThreshold", value: "\(mapThreshold)", reason: "must be ≥ 0 bytes") }
            if writeQueueCapacity <= 0 {
                throw .init(key: "writeQueueCapacity", value: "\(writeQueueCapacity)", reason: "must be ≥ 1")
            }
            if writeQueueByteLimit <= 0 {
                throw .init(key: "writeQueueByteLimit", value: "\(writeQueueByteLimit)", reason: "must be > 0 bytes")
            }
            if rescanInterval <= .zero {
                throw .init(key: "rescanInterval", value: "\(rescanInterval)", reason: "must be a positive duration")
            }
        }
    }

    /// Counters since the tier was opened, and the index's current size.
    public struct Statistics: Sendable, Hashable {
        public var hits = 0
        /// Of ``hits``, those served by ``hitWithoutWaiting(forKey:matching:)`` without a hop.
        public var hitsWithoutWaiting = 0
        public var misses = 0
        /// Files that failed validation on a hit or on `IN_CLOSE_WRITE` (deleted, counted as misses).
        public var invalidFiles = 0
        /// Files published by this instance.
        public var stores = 0
        /// Write-behind stores dropped because the queue was full.
        public var droppedStores = 0
        /// Write-behind stores that failed (logged).
        public var failedStores = 0
        /// Files deleted to stay under the byte limit.
        public var evictions = 0
        /// Full rescans of the directory (overflow, recovery, polling).
        public var rescans = 0
        /// Times the directory was recreated after being deleted or moved away.
        public var recoveries = 0
        /// Variants in the index.
        public var entries = 0
        /// Bytes charged against the limit.
        public var bytes = 0
        /// Bytes of the index's table.
        public var indexMemoryBytes = 0
        /// Whether inotify watches the directory (false: periodic rescans).
        public var watching = false
    }

    /// The answer of a lookup that may not wait for the disk
    /// (``hitWithoutWaiting(forKey:matching:)``): ``/StrataBase/TierLookup/wouldWait`` means serving it
    /// would wait for the disk (a cold file, a first hit to verify, a file to discard, an error
    /// to report): ask ``hit(forKey:matching:)`` on a thread that may block.
    public typealias CachedLookup = TierLookup<Hit>

    /// A hit with its metadata.
    public struct Hit: Sendable {
        public var image: PixelImage
        public var variant: VariantDescriptor
        /// The file holds the whole original (see ``/StrataBase/ImageVariant/isWholeOriginal``).
        public var isWholeOriginal: Bool
        public var sourceVersion: UInt64
    }

    package let core: Core

    /// The longest key (in UTF-8 bytes) a file's header stores verbatim: 4032, so that header
    /// and key fit the 4 KiB per file that the byte limit charges on top of the pixels. Longer
    /// keys are stored as their SHA-256 (see `StoredKey`): hits still compare 256 bits of key.
    public static var maximumKeyLength: Int { DiskIndex.headerAllowance - DiskFileHeader.fixedLength }

    /// Opens (creating if needed) the cache directory at `directory`, builds the index from its
    /// names and starts the watcher thread.
    ///
    /// `pool`: where write-behind stores are published, one drain job at a time on its prefetch
    /// lane (give it the engine's pool, as `ConfiguredImageCache` does, to start no writer thread);
    /// `nil` starts a private one-thread pool (`strata-disk-w`), stopped on ``close()``. The tier
    /// never shuts a given pool down; once that pool is shut down, stores are published on the
    /// thread that calls ``store(_:forKey:mode:isWholeOriginal:sourceVersion:)``.
    ///
    /// Cost: one `readdir` pass over the directory (≈ 1 s per million files).
    public init(
        directory: String, configuration: Configuration = Configuration(), pool: BlockingPool<Void>? = nil
    ) throws(DiskTierError) {
        do {
            try configuration.validate()
        } catch {
            throw .invalidConfiguration(error)
        }
        core = try Core(path: directory, configuration: configuration, pool: pool)
    }

    deinit { core.close() }

    /// The byte limit in force: ``Configuration/byteLimit``, or what ``setByteLimit(_:)`` set.
    public var byteLimit: Int { core.byteLimit.load(ordering: .relaxed) }

    /// Changes the byte limit while the tier serves. A lower limit deletes least-recently-used
    /// files at once, on the calling thread (blocking file work: call it off the cooperative
    /// pool, or accept a short stall); a higher one only lets the directory grow. Throws when
    /// `limit` is not positive (nothing changes).
    public func setByteLimit(_ limit: Int) throws(ConfigurationError) {
        guard limit > 0 else { throw .init(key: "byteLimit", value: "\(limit)", reason: "must be > 0 bytes") }
        let old = core.byteLimit.exchange(limit, ordering: .relaxed)
        if limit < old { core.evictToLimit() }
    }

    /// The directory's path, as given to ``init(directory:configuration:pool:)``.
    public var directory: String { core.requestedPath }

    /// The best variant of `key` for `query` (``/StrataBase/VariantMatcher``'s rule over the in-memory
    /// index), or `nil`. Invalid or vanished files are misses.
    ///
    /// - Throws: ``DiskTierError/io(_:)`` when the file could not be opened or read for a
    ///   reason that is not the file's fault (e.g. too many open files).
    public func image(forKey key: String, matching query: SizeQuery) throws(DiskTierError) -> PixelImage? {
        try core.lookup(key: key, query: query)?.image
    }

    /// Like ``image(forKey:matching:)``, with the variant and the stored source version.
    public func hit(forKey key: String, matching query: SizeQuery) throws(DiskTierError) -> Hit? {
        try core.lookup(key: key, query: query)
    }

    /// ``hit(forKey:matching:)`` when it can be served without waiting for the disk: the file's
    /// name resolves from the dentry cache (`openat2` with `RESOLVE_CACHED`, Linux 5.12+) and
    /// the bytes to check are in the page cache (`preadv2` with `RWF_NOWAIT`); otherwise
    /// ``/StrataBase/TierLookup/wouldWait``. A few syscalls and no wait for the disk, so an async caller
    /// may call it on Swift's cooperative pool and hop to a blocking thread only for `.wouldWait`
    /// (the engine does). The kernel may start readahead for the bytes `RWF_NOWAIT` misses
    /// (without waiting for it), so a file can turn warm by itself just after. On kernels without
    /// these calls it always answers `.wouldWait` for a match.
    public func hitWithoutWaiting(forKey key: String, matching query: SizeQuery) -> CachedLookup {
        core.lookupWithoutWaiting(key: key, digest: ImageEntityID(hashing: key), query: query)
    }

    /// Whether the index holds a variant matching `query` (no syscall).
    public func contains(key: String, matching query: SizeQuery) -> Bool {
        core.contains(digest: ImageEntityID(hashing: key), query: query)
    }

    /// Queues `image` for publishing on the writer pool; returns at once (but see
    /// ``init(directory:configuration:pool:)`` for a pool shut down). Returns false when the
    /// queue is full (the store is dropped and counted) or the tier is closed.
    /// `isWholeOriginal` (a `fit` image that is the original at full size) is kept in the file's
    /// name, so that the index serves it to every `fit` box that contains it.
    @discardableResult
    public func store(
        _ image: PixelImage, forKey key: String, mode: ContentMode = .fit, isWholeOriginal: Bool = false,
        sourceVersion: UInt64 = 0
    ) -> Bool {
        guard !isWholeOriginal || mode == .fit else { return false }
        return core.enqueue(
            .init(image: image, key: key, mode: mode, isWholeOriginal: isWholeOriginal, sourceVersion: sourceVersion))
    }

    /// Publishes `image` now (evicting to stay under the limit); on return the file is durable
    /// (with ``Configuration/durable``) and in the index. Write-behind stores of the same
    /// variant queued before the call are dropped (they are older), and one being written is
    /// waited for, so that none lands over this one afterwards.
    public func storeSynchronously(
        _ image: PixelImage, forKey key: String, mode: ContentMode = .fit, isWholeOriginal: Bool = false,
        sourceVersion: UInt64 = 0
    ) throws(DiskTierError) {
        guard !isWholeOriginal || mode == .fit else {
            throw .invalidImage(key: key, reason: "only a fit variant can be the whole original")
        }
        let digest = ImageEntityID(hashing: key)
        core.supersedeQueued(
            DiskFileName(
                digest: digest, variant: VariantDescriptor(size: image.size, mode: mode, style: image.style),
                isWholeOriginal: isWholeOriginal))
        try core.publish(
            image: image, key: key, digest: digest, mode: mode, isWholeOriginal: isWholeOriginal, sourceVersion: sourceVersion)
    }

    /// Deletes every variant of `key` that the index holds (a file published under the key by
    /// another writer after the index last heard of it is left alone).
    public func remove(key: String) {
        core.remove(digest: ImageEntityID(hashing: key))
    }

    /// Deletes every variant of the keys with operations derived from `sourceKey` (a purge:
    /// ``/StrataBase/CacheKey/init(_:colour:gravity:operations:)``), from a scan of the index.
    public func removeOperationVariants(of sourceKey: String) {
        core.removeFamily(of: ImageEntityID(hashing: sourceKey))
    }

    /// Deletes every published file in the directory (other processes' too) and their index
    /// entries. A file published while it runs survives, with its entry.
    public func removeAll() throws(DiskTierError) {
        try core.removeAll()
    }

    /// Current counters.
    public var statistics: Statistics { core.statistics() }

    /// Writes and deletes one page in the directory now (blocking: a health check's proof that
    /// stores can land); throws what a store would meet — a full or read-only disk, a
    /// permission, a closed tier.
    public func probeWrite() throws(DiskTierError) { try core.probeWrite() }

    /// Waits until every store queued before this call has been written (or dropped on error).
    /// When no drain is running (its job still queued on the pool), the calling thread publishes
    /// the queue up to this call itself, so a flush on a thread of the pool never deadlocks.
    public func flush() { core.flush() }

    /// Drains the write queue (as ``flush()`` does), stops the watcher and a private writer
    /// pool, and closes the directory. Idempotent; also done when the tier is deallocated. Later
    /// calls fail with ``DiskTierError/closed`` or miss.
    public func close() { core.close() }

    // MARK: Hooks for tests and benchmarks

    /// Rescans the directory now and converges the index to it (as on `IN_Q_OVERFLOW`).
    package func rescanNow() throws(DiskTierError) { try core.rescan() }

    /// Stops (true) or resumes reading inotify events, so tests can overflow the kernel queue.
    package func pauseWatcher(_ paused: Bool) { core.pauseWatcher(paused) }

    /// Seams for tests that must interleave with the tier's own work deterministically.
    package struct TestHooks: Sendable {
        /// Called with each batch of eviction victims once it is chosen, before their files are
        /// deleted.
        package var evictionBatchChosen: (@Sendable ([DiskIndexEntry]) -> Void)?
        /// Called by an eviction after each victim's deletion (or its failure), with its name.
        package var victimDeleted: (@Sendable (String) -> Void)?
        /// Called on the watcher thread when it has looked at a file that appeared (an event),
        /// before it indexes it, with the file's name.
        package var watcherLookedAt: (@Sendable (String) -> Void)?
        /// Called on the watcher thread after each batch of events (and the eviction it may
        /// start).
        package var watcherHandledEvents: (@Sendable () -> Void)?
        /// Called on the storing thread once a store's file is renamed into place and indexed,
        /// before the directory is synced and the store returns, with the file's name.
        package var storePublished: (@Sendable (String) -> Void)?
        /// Called during a rescan once the directory is listed, before the listing is merged
        /// into the index.
        package var rescanListed: (@Sendable () -> Void)?
        package init() {}
    }

    /// Installs `hooks` (replacing earlier ones).
    package func setTestHooks(_ hooks: TestHooks) { core.testHooks.withLock { $0 = hooks } }

    /// Calls `body` on the watcher thread for every indexed file that something else deleted or
    /// renamed away (another process's eviction or invalidation; not this tier's own deletions),
    /// with the key's digest and the variant. Replaces an earlier observer.
    package func observeExternalRemovals(_ body: @escaping @Sendable (ImageEntityID, VariantDescriptor) -> Void) {
        core.externalRemovalObserver.withLock { $0 = body }
    }

    /// Whether the tier started a writer pool of its own (no pool was given): a thread named
    /// `strata-disk-w-0`.
    package var ownsWriterThread: Bool { core.ownsWriter }

    /// Index entries examined so far to choose eviction victims.
    package var evictionExamined: Int { core.evictionExamined.load(ordering: .relaxed) }

    /// Index entries, least recently used first (diagnostics).
    package var indexEntries: [DiskIndexEntry] { core.state.withLock { $0.index.entries } }
}
