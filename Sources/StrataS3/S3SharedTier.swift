import Logging
import Metrics
import Strata
import StrataHTTPOrigin
import Synchronization

/// The fleet's shared tier: decoded variants in an S3-compatible bucket, asked by every node
/// after its own memory, disk and tables and before a render, so that a key one node rendered is
/// never rendered again by another (a node that joins, or takes over keys after a re-shard,
/// starts warm).
///
/// - **What it holds**: each variant as one object, `<prefix>/<key digest>/<w>x<h>-m<mode>-s<style>[-o].px`,
///   whose bytes are a disk-tier file (``/StrataTiers/DiskFileHeader``: the key, the variant,
///   the source version, a checksum of the header and one of the pixels). Pixels, not encoded
///   answers: every node encodes for its own client's `Accept`, so a format can never be served
///   to a client that did not ask for it, and the tolerance rule is the engine's own.
/// - **Index**: beside them, `<prefix>/<key digest>/index` names the key's variants, one per
///   line, so that a lookup needs no listing (no `s3:ListBucket`). It is a hint, rewritten after
///   each upload (read, add, write): two nodes adding at once may lose one entry — that variant
///   is then rendered once more and added again; an entry whose object is gone is a miss.
/// - **Lookup**: one GET of the index, the best match by ``/StrataBase/VariantMatcher``, one GET
///   of the object. The object is checked whole (header,
///   key, length, pixel checksum); a corrupt or truncated one is a miss, counted, and the render
///   that follows overwrites it. Both requests share one deadline (``Configuration/timeout``):
///   a slow or down store costs at most that, and after ``Configuration/failuresBeforePause``
///   failures in a row it is not asked for ``Configuration/pause`` (then one request tries it).
/// - **Writes** are behind the answer: ``store(_:key:variant:)`` queues the image (bounded by
///   ``Configuration/uploadQueueBytes``; beyond, dropped and counted) and uploads run on
///   Swift's cooperative pool, at most ``Configuration/maxConcurrentUploads`` at once.
/// - **Purges**: ``remove(_:)`` deletes every variant the index names, then the index.
///
/// Cost of a hit: two round trips and the object's bytes (a 1024×683 variant is 2.8 MB), a
/// checksum of the pixels and one copy; of a miss, one GET of a small index (or a 404); of an
/// upload, three requests (the object, the index read and written).
public final class S3SharedTier: RemoteCacheTier, Sendable, CustomStringConvertible {
    /// The shared tier's settings (`shared.*`).
    public struct Configuration: Sendable, Equatable {
        /// `shared.s3.prefix`: the folder of the bucket the tier uses.
        public var prefix: String = "strata"
        /// `shared.timeout`: the longest a lookup (LIST and GET together) may take.
        public var timeout: Duration = .milliseconds(500)
        /// `shared.uploadTimeout`: the longest one upload may take.
        public var uploadTimeout: Duration = .seconds(10)
        /// `shared.maxObjectSize`: variants larger than this are neither uploaded nor read.
        public var maxObjectBytes: Int = 64 << 20
        /// `shared.uploadQueueSize`: bytes of images waiting for upload; more are dropped.
        public var uploadQueueBytes: Int = 64 << 20
        /// `shared.maxConcurrentUploads`: uploads in flight at once.
        public var maxConcurrentUploads: Int = 8
        /// Failures in a row after which the store is left alone for ``pause``.
        public var failuresBeforePause: Int = 3
        /// `shared.pause`: how long a failing store is not asked.
        public var pause: Duration = .seconds(5)

        public init() {}

        /// Checks every setting, naming the first bad key.
        public func validate() throws(S3ConfigurationError) {
            func positive(_ value: Duration, _ key: String) throws(S3ConfigurationError) {
                if value <= .zero { throw .init(key: key, value: "\(value)", allowed: "a duration above zero") }
            }
            try positive(timeout, "shared.timeout")
            try positive(uploadTimeout, "shared.uploadTimeout")
            if pause < .zero { throw .init(key: "shared.pause", value: "\(pause)", allowed: "zero or more") }
            if maxObjectBytes < 1 << 10 { throw .init(key: "shared.maxObjectSize", value: "\(maxObjectBytes)", allowed: "at least 1KiB") }
            if uploadQueueBytes < 0 { throw .init(key: "shared.uploadQueueSize", value: "\(uploadQueueBytes)", allowed: "0 or more") }
            if !(1...256).contains(maxConcurrentUploads) {
                throw .init(key: "shared.maxConcurrentUploads", value: "\(maxConcurrentUploads)", allowed: "1...256")
            }
            if prefix.utf8.contains(0) || prefix.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) {
                throw .init(key: "shared.s3.prefix", value: prefix, allowed: "a folder without '.', '..' or NUL")
            }
        }
    }

    /// What the tier has done since it started.
    public struct Statistics: Sendable, Hashable, Codable {
        public var hits = 0
        public var misses = 0
        /// Lookups not sent: the store was paused after failures.
        public var skipped = 0
        /// Lookups and uploads that failed (down, slow past the deadline, refused).
        public var errors = 0
        /// Objects refused by their checksums or checks (served as misses).
        public var corrupt = 0
        public var bytesRead = 0
        public var bytesWritten = 0
        public var uploads = 0
        public var uploadsDropped = 0
        public var deletes = 0
        /// Bytes waiting for upload now.
        public var queuedBytes = 0
        /// Whether lookups are paused now.
        public var paused = false
    }

    public let configuration: Configuration
    public let store: S3ObjectStore
    private let logger: Logger
    private let state = Lock(State())
    private let metrics: SharedTierMetrics

    private struct State {
        var statistics = Statistics()
        var failuresInARow = 0
        var pausedUntil: ContinuousClock.Instant?
        var queue: [Upload] = []
        var queuedBytes = 0
        var uploading = 0
    }

    private struct Upload: Sendable {
        var image: PixelImage
        var key: CacheKey
        var variant: ImageVariant
        var bytes: Int
    }

    /// A tier over `store` (whose client the tier shuts down in ``shutdown()``).
    public init(
        store: S3ObjectStore, configuration: Configuration = Configuration(), logger: Logger = Logger(label: "strata.shared"),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(S3ConfigurationError) {
        try configuration.validate()
        self.store = store
        self.configuration = configuration
        self.logger = logger
        self.metrics = SharedTierMetrics(factory: metricsFactory ?? MetricsSystem.factory)
    }

    public var description: String { "S3SharedTier(\(store.endpoint), prefix \(configuration.prefix.debugDescription))" }

    public var servingTier: ServingTier { .shared }

    public var statistics: Statistics {
        state.withLock { s in
            var copy = s.statistics
            copy.queuedBytes = s.queuedBytes
            copy.paused = s.pausedUntil.map { ContinuousClock.now < $0 } ?? false
            return copy
        }
    }

    public var detailedStatistics: [String: Int] {
        let s = statistics
        return [
            "hits": s.hits, "misses": s.misses, "skipped": s.skipped, "errors": s.errors, "corrupt": s.corrupt,
            "bytesRead": s.bytesRead, "bytesWritten": s.bytesWritten, "uploads": s.uploads, "uploadsDropped": s.uploadsDropped,
            "deletes": s.deletes, "queuedBytes": s.queuedBytes, "paused": s.paused ? 1 : 0,
        ]
    }

    public var tierStatistics: TierStatistics {
        let s = statistics
        return TierStatistics(hits: s.hits, misses: s.misses, entries: 0, bytes: s.bytesWritten, evictions: 0)
    }

    // MARK: - Names

    /// The folder of every variant of `key`'s original: the digest of its source key, so that
    /// the variants of all the keys derived from one original (colours, gravities) share it, and
    /// its index.
    func folder(of key: CacheKey) -> String {
        let prefix = configuration.prefix.split(separator: "/").joined(separator: "/")
        return (prefix.isEmpty ? "" : prefix + "/") + "\(ImageEntityID(hashing: key.sourceKey))/"
    }

    /// The object name of `variant` of `key`.
    func objectName(_ key: CacheKey, _ variant: ImageVariant) -> String {
        folder(of: key) + Self.entry(key, variant)
    }

    /// `<key digest>-<w>x<h>-m<mode>-s<style>[-o].px`: the object's name in its folder, and its
    /// line in the index.
    static func entry(_ key: CacheKey, _ variant: ImageVariant) -> String {
        let d = variant.descriptor
        return "\(key.entityID)-\(d.size.width)x\(d.size.height)-m\(d.mode.rawValue)-s\(d.style.rawValue)"
            + (variant.isWholeOriginal ? "-o" : "") + ".px"
    }

    /// The index object of `key`'s original.
    func indexName(_ key: CacheKey) -> String { folder(of: key) + "index" }

    /// The first line of every index.
    static let indexHeader = "strata-shared-index 2"

    /// The entries an index holds (unknown lines skipped; a foreign object has none).
    static func indexEntries(_ bytes: [UInt8]) -> [Listed] {
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
        guard lines.first == indexHeader else { return [] }
        return lines.dropFirst().compactMap(parse)
    }

    /// An index of `entries`.
    static func indexBytes(_ entries: [String]) -> [UInt8] {
        Array(([indexHeader] + entries).joined(separator: "\n").utf8) + [0x0A]
    }

    /// A held variant, read back from its entry.
    struct Listed: Sendable, Equatable {
        /// The entry (the object's name in its folder).
        var entry: String
        /// The key's digest (32 hex digits).
        var entity: Substring
        var descriptor: VariantDescriptor
        var isWholeOriginal: Bool
    }

    /// `entry`'s key digest and variant, or `nil` when it is not one of the tier's names.
    static func parse(_ entry: String) -> Listed? {
        guard entry.hasSuffix(".px"), entry.utf8.count > 33, let dash = entry.firstIndex(of: "-") else { return nil }
        let entity = entry[..<dash]
        guard entity.utf8.count == 32, entity.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
            return nil
        }
        var parts = entry[entry.index(after: dash)...].dropLast(3).split(separator: "-")
        var whole = false
        if parts.last == "o" {
            whole = true
            parts.removeLast()
        }
        guard parts.count == 3, parts[1].hasPrefix("m"), parts[2].hasPrefix("s") else { return nil }
        let size = parts[0].split(separator: "x")
        guard size.count == 2, let w = Int(size[0]), let h = Int(size[1]), w > 0, h > 0, w <= 1 << 20, h <= 1 << 20,
            let m = UInt8(parts[1].dropFirst()), let mode = ContentMode(rawValue: m),
            let s = UInt8(parts[2].dropFirst()), let style = PixelStyle(rawValue: s)
        else { return nil }
        return Listed(
            entry: entry, entity: entity, descriptor: VariantDescriptor(size: PixelSize(width: w, height: h), mode: mode, style: style),
            isWholeOriginal: whole)
    }

    // MARK: - Lookup

    public func load(_ key: CacheKey, _ query: SizeQuery) async throws(TierFailure) -> CachedImage? {
        let now = ContinuousClock.now
        let skip = state.withLock { s -> Bool in
            guard let until = s.pausedUntil else { return false }
            if now < until {
                s.statistics.skipped += 1
                return true
            }
            s.pausedUntil = nil  // this request tries the store again
            return false
        }
        if skip {
            metrics.skipped.increment()
            return nil
        }
        let deadline = now + configuration.timeout
        do throws(S3StoreError) {
            let index = try await store.get(indexName(key), deadline: deadline)
            let entity = "\(key.entityID)"
            let listed = (index.map { Self.indexEntries($0.bytes) } ?? []).filter { $0.entity == entity }
            guard let best = VariantMatcher.bestMatch(in: listed, for: query, variant: { ($0.descriptor, $0.isWholeOriginal) }) else {
                succeeded(since: now, hit: false)
                return nil
            }
            guard let object = try await store.get(folder(of: key) + best.entry, deadline: deadline) else {
                succeeded(since: now, hit: false)  // deleted since the listing
                return nil
            }
            switch Self.decode(object.bytes, key: key, listed: best) {
            case .success(let found):
                state.withLock { $0.statistics.bytesRead += object.bytes.count }
                metrics.bytesRead.increment(by: object.bytes.count)
                succeeded(since: now, hit: true)
                return found
            case .failure(let problem):
                state.withLock { $0.statistics.corrupt += 1 }
                metrics.corrupt.increment()
                logger.warning(
                    "a shared-tier object failed its checks; served as a miss (the render overwrites it)",
                    metadata: ["object": "\(folder(of: key) + best.entry)", "problem": "\(problem)"])
                succeeded(since: now, hit: false)
                return nil
            }
        } catch {
            if case .cancelled = error.kind { return nil }
            failed(error, operation: "lookup")
            metrics.misses.increment()
            state.withLock { $0.statistics.misses += 1 }
            return nil
        }
    }

    /// Why an object was refused.
    struct Refusal: Error, CustomStringConvertible {
        var description: String
    }

    /// The checked object as the engine's record: the header, the key, the length and the pixel
    /// checksum must all agree with what the name promised.
    static func decode(_ bytes: [UInt8], key: CacheKey, listed: Listed) -> Result<CachedImage, Refusal> {
        var storedKey = key.string
        return storedKey.withUTF8 { keyBytes in
            bytes.withUnsafeBytes { raw -> Result<CachedImage, Refusal> in
                switch DiskFileValidation.validate(
                    raw, variant: listed.descriptor, isWholeOriginal: listed.isWholeOriginal, key: UnsafeRawBufferPointer(keyBytes),
                    verifyPixels: true)
                {
                case .invalid(let problem): return .failure(Refusal(description: "\(problem)"))
                case .otherKey: return .failure(Refusal(description: "the object holds another key"))
                case .valid(let header):
                    var image = PixelImage(uninitializedWidth: header.width, height: header.height, style: header.style)
                    guard image.bytesPerRow == header.bytesPerRow else { return .failure(Refusal(description: "row length")) }
                    image.withUnsafeMutableBytes { destination in
                        destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[header.pixelOffset..<header.fileLength]))
                    }
                    let variant = ImageVariant(
                        descriptor: header.variant, sourceVersion: SourceVersion(stamp: header.sourceVersion),
                        isWholeOriginal: header.isWholeOriginal)
                    return .success(CachedImage(image: image, variant: variant, tier: .shared))
                }
            }
        }
    }

    private func succeeded(since start: ContinuousClock.Instant, hit: Bool) {
        state.withLock { s in
            s.failuresInARow = 0
            if hit { s.statistics.hits += 1 } else { s.statistics.misses += 1 }
        }
        (hit ? metrics.hits : metrics.misses).increment()
        metrics.lookupSeconds.recordInterval(since: start)
    }

    private func failed(_ error: S3StoreError, operation: String) {
        let paused = state.withLock { s -> Bool in
            s.statistics.errors += 1
            s.failuresInARow += 1
            guard s.failuresInARow >= configuration.failuresBeforePause, s.pausedUntil == nil else { return false }
            s.pausedUntil = ContinuousClock.now + configuration.pause
            return true
        }
        metrics.errors(operation).increment()
        if paused {
            logger.error(
                "the shared tier is failing; not asked for \(configuration.pause)",
                metadata: ["store": "\(store.endpoint)", "error": "\(error)"])
        } else {
            logger.warning("a shared-tier \(operation) failed", metadata: ["error": "\(error)"])
        }
    }

    // MARK: - Writes

    public func store(_ image: PixelImage, key: CacheKey, variant: ImageVariant) {
        let bytes = DiskFileHeader.fileLength(of: variant.descriptor, keyLength: key.string.utf8.count)
        guard variant.descriptor.size == image.size, variant.descriptor.style == image.style else { return }
        let start = state.withLock { s -> Bool in
            let paused = s.pausedUntil.map { ContinuousClock.now < $0 } ?? false
            guard bytes <= configuration.maxObjectBytes, !paused, s.queuedBytes + bytes <= configuration.uploadQueueBytes else {
                s.statistics.uploadsDropped += 1
                return false
            }
            s.queue.append(Upload(image: image, key: key, variant: variant, bytes: bytes))
            s.queuedBytes += bytes
            guard s.uploading < configuration.maxConcurrentUploads else { return false }
            s.uploading += 1
            return true
        }
        guard start else {
            metrics.uploadsDropped.increment()
            return
        }
        Task { await self.drainUploads() }
    }

    /// Uploads queued images until the queue is empty (one of at most `maxConcurrentUploads`).
    private func drainUploads() async {
        while let next = state.withLock({ s -> Upload? in
            if s.queue.isEmpty {
                s.uploading -= 1
                return nil
            }
            let next = s.queue.removeFirst()
            s.queuedBytes -= next.bytes
            return next
        }) {
            let started = ContinuousClock.now
            let object = DiskFileEncoder.encode(
                next.image, key: next.key.string, mode: next.variant.descriptor.mode, isWholeOriginal: next.variant.isWholeOriginal,
                sourceVersion: next.variant.sourceVersion.stamp)
            do throws(S3StoreError) {
                let deadline = started + configuration.uploadTimeout
                try await store.put(objectName(next.key, next.variant), object, deadline: deadline)
                try await addToIndex(Self.entry(next.key, next.variant), of: next.key, deadline: deadline)
                state.withLock {
                    $0.statistics.uploads += 1
                    $0.statistics.bytesWritten += object.count
                }
                metrics.bytesWritten.increment(by: object.count)
                metrics.uploadSeconds.recordInterval(since: started)
            } catch {
                failed(error, operation: "upload")
            }
        }
    }

    /// Adds `entry` to `key`'s index (read, add, write; nothing when it is there already).
    private func addToIndex(_ entry: String, of key: CacheKey, deadline: ContinuousClock.Instant) async throws(S3StoreError) {
        let name = indexName(key)
        var entries = try await store.get(name, deadline: deadline).map { Self.indexEntries($0.bytes).map(\.entry) } ?? []
        guard !entries.contains(entry) else { return }
        entries.append(entry)
        try await store.put(name, Self.indexBytes(entries), contentType: "text/plain", deadline: deadline)
    }

    /// Waits until every queued upload is written or failed, at most `timeout`.
    public func flush(timeout: Duration = .seconds(30)) async {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, state.withLock({ !$0.queue.isEmpty || $0.uploading > 0 }) {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: - Purge

    /// Deletes every variant of `keys` (the keys derived from an original, for a purge): one
    /// read of each original's index, a DELETE per variant held, and the index rewritten
    /// without them (deleted when nothing is left).
    public func remove(_ keys: [CacheKey]) async throws(TierFailure) {
        let deadline = ContinuousClock.now + configuration.uploadTimeout
        var byFolder: [String: (index: String, entities: Set<String>, families: Set<Substring>, first: CacheKey)] = [:]
        for key in keys {
            let entity = "\(key.entityID)"
            byFolder[folder(of: key), default: (indexName(key), [], [], key)].entities.insert(entity)
            // A plain source key takes the keys with operations derived from it: their
            // identities share its high word (`ImageEntityID.isFamily(of:)`), its first 16 digits.
            if !key.string.utf8.contains(0) { byFolder[folder(of: key)]!.families.insert(entity.prefix(16)) }
        }
        for (folder, group) in byFolder {
            func isDoomed(_ listed: Listed) -> Bool {
                group.entities.contains(String(listed.entity)) || group.families.contains(listed.entity.prefix(16))
            }
            do throws(S3StoreError) {
                let entries = try await store.get(group.index, deadline: deadline).map { Self.indexEntries($0.bytes) } ?? []
                let doomed = entries.filter(isDoomed)
                guard !doomed.isEmpty else { continue }
                for listed in doomed { try await store.delete(folder + listed.entry, deadline: deadline) }
                let kept = entries.filter { !isDoomed($0) }.map(\.entry)
                if kept.isEmpty {
                    try await store.delete(group.index, deadline: deadline)
                } else {
                    try await store.put(group.index, Self.indexBytes(kept), contentType: "text/plain", deadline: deadline)
                }
                state.withLock { $0.statistics.deletes += doomed.count }
            } catch {
                metrics.errors("delete").increment()
                throw TierFailure(tier: .shared, key: group.first.string, reason: "\(error)")
            }
        }
    }

    /// Writes what is queued (at most `flushTimeout`), then shuts the store's client down.
    public func shutdown(flushTimeout: Duration = .seconds(10)) async {
        await flush(timeout: flushTimeout)
        try? await store.shutdown()
    }
}

/// The shared tier's swift-metrics instruments (`strata_shared_*`).
struct SharedTierMetrics: Sendable {
    let hits: Counter
    let misses: Counter
    let skipped: Counter
    let corrupt: Counter
    let bytesRead: Counter
    let bytesWritten: Counter
    let uploadsDropped: Counter
    let lookupSeconds: Timer
    let uploadSeconds: Timer
    private let lookupErrors: Counter
    private let uploadErrors: Counter
    private let deleteErrors: Counter

    init(factory: any MetricsFactory) {
        hits = Counter(label: "strata_shared_hits_total", factory: factory)
        misses = Counter(label: "strata_shared_misses_total", factory: factory)
        skipped = Counter(label: "strata_shared_skipped_total", factory: factory)
        corrupt = Counter(label: "strata_shared_corrupt_total", factory: factory)
        bytesRead = Counter(label: "strata_shared_bytes_total", dimensions: [("direction", "read")], factory: factory)
        bytesWritten = Counter(label: "strata_shared_bytes_total", dimensions: [("direction", "written")], factory: factory)
        uploadsDropped = Counter(label: "strata_shared_uploads_dropped_total", factory: factory)
        lookupSeconds = Timer(
            label: "strata_shared_seconds", dimensions: [("operation", "lookup")], preferredDisplayUnit: .seconds, factory: factory)
        uploadSeconds = Timer(
            label: "strata_shared_seconds", dimensions: [("operation", "upload")], preferredDisplayUnit: .seconds, factory: factory)
        lookupErrors = Counter(label: "strata_shared_errors_total", dimensions: [("operation", "lookup")], factory: factory)
        uploadErrors = Counter(label: "strata_shared_errors_total", dimensions: [("operation", "upload")], factory: factory)
        deleteErrors = Counter(label: "strata_shared_errors_total", dimensions: [("operation", "delete")], factory: factory)
    }

    func errors(_ operation: String) -> Counter {
        switch operation {
        case "upload": uploadErrors
        case "delete": deleteErrors
        default: lookupErrors
        }
    }
}
