import Logging
import Synchronization
import StrataBase

/// A hook to decline filling a whole family (FastImageCache's
/// `imageCache:shouldProcessAllFormatsInFamily:forEntity:`).
public protocol ImageTableCacheDelegate: Sendable {
    /// Whether a source load for `entity` should fill every format of `family` (the default)
    /// or only the format that was asked for.
    func shouldProcessAllFormats(inFamily family: String, for entity: ImageTableEntity) -> Bool
}

/// A set of image tables, one per format, in one directory (FastImageCache's `FICImageCache`).
///
/// - ``cachedImage(for:formatName:)`` answers at once from the table (never loads a source).
/// - ``image(for:formatName:)`` loads the entity's source once and fills every format of the
///   requested format's family (unless the delegate declines), then returns the requested one.
///   Identical pending requests (same entity, format and source version) share one load; each waiter can cancel on its own, and the load
///   stops when the last waiter leaves. ``cancelRequest(for:formatName:)`` stops it for everyone.
/// - ``cachedImage(for:matching:)`` serves a size query from any format within tolerance
///   (``/StrataBase/VariantMatcher``), best match first.
///
/// The requested format's result never depends on its siblings: a sibling that cannot be drawn
/// (its processing throws, its table is full, …) is logged and counted
/// (``Statistics/siblingFailures``), and the request still gets its image.
///
/// Everything that blocks — storing and drawing (a cross-process `flock`, disk reservations and
/// CPU-bound pixel work), deleting, resetting, compacting, and the rare retrieval that must
/// re-read a table's whole metadata first — runs on a dedicated thread pool, never on Swift's
/// cooperative pool: the one given to the initializer, or a private two-thread pool the cache
/// owns and shuts down when it goes away.
///
/// Thread-safe; several processes may open the same directory.
public final class ImageTableCache: Sendable {
    public let directory: String
    /// The formats, in registration order.
    public let formats: [ImageTableFormat]
    package let tables: [String: ImageTable]
    package let delegate: (any ImageTableCacheDelegate)?
    package let drawingPool: BlockingPool<Void>
    /// Set when the cache made its own pool: stops its threads when the cache goes away.
    private let ownedPool: BlockingPoolOwner<Void>?
    /// Pending loads by entity: one per format and source version, joined only by requests for
    /// both — the engine's one coalescing mechanism (no lanes here: every load is equal).
    package let loads = Coalescer<ImageEntityID, Load, Int, PixelImage, any Error>()
    /// Where the cache logs sibling formats it could not draw.
    package let logger: Logger
    private let siblingFailures = Atomic<Int>(0)

    /// Counters since the cache was opened.
    public struct Statistics: Sendable, Hashable {
        /// Formats of a family that could not be drawn while another format of the family was
        /// requested (each is logged; the requested format was still served).
        public var siblingFailures = 0
    }

    /// Counters since the cache was opened.
    public var statistics: Statistics {
        Statistics(siblingFailures: siblingFailures.load(ordering: .relaxed))
    }

    /// Name prefix of the threads of the pool a cache makes for itself (`<prefix>-<index>`).
    package static let privatePoolName = "strata-table"
    /// Threads of the pool a cache makes for itself.
    package static let privatePoolWidth = 2

    /// What a pending load of an entity draws: a format, from a source version (a request for
    /// another version must never get this one's pixels).
    package struct Load: Sendable {
        package var format: String
        package var sourceVersion: UInt64
    }

    /// Opens (or creates) a table for each format in `directory`. The entities' processing
    /// (CPU-bound drawing into the slots, under the table's file lock) runs on `drawingPool`'s
    /// threads, or, when it is `nil`, on a private two-thread pool the cache starts (throws
    /// ``ImageTableError/system(_:)`` if the system refuses a thread) and stops on deinit.
    /// `logger` receives the sibling formats that could not be drawn.
    public init(
        directory: String, formats: [ImageTableFormat], delegate: (any ImageTableCacheDelegate)? = nil,
        drawingPool: BlockingPool<Void>? = nil, logger: Logger = Logger(label: "strata.tables")
    ) throws(ImageTableError) {
        var tables: [String: ImageTable] = [:]
        for format in formats {
            guard tables[format.name] == nil else { throw .duplicateFormat(format.name) }
            tables[format.name] = try ImageTable(directory: directory, format: format)
        }
        self.directory = directory
        self.formats = formats
        self.tables = tables
        self.delegate = delegate
        self.logger = logger
        if let drawingPool {
            self.drawingPool = drawingPool
            self.ownedPool = nil
        } else {
            do {
                self.drawingPool = try BlockingPool(width: Self.privatePoolWidth, name: Self.privatePoolName, makeContext: {})
            } catch {
                throw .system(error)
            }
            self.ownedPool = BlockingPoolOwner(self.drawingPool)
        }
    }

    /// The table of format `name`.
    public func table(named name: String) throws(ImageTableError) -> ImageTable {
        guard let table = tables[name] else { throw .unknownFormat(name) }
        return table
    }

    /// The table of format `name`, or `nil` for a format this cache was not configured with.
    package func openTable(named name: String) -> ImageTable? { tables[name] }

    /// The stored image of `entity` in format `formatName`, or `nil` at once. Never loads the
    /// source and never waits for a writer.
    public func cachedImage(for entity: ImageTableEntity, formatName: String) -> PixelImage? {
        tables[formatName]?.image(for: entity.id, sourceVersion: entity.sourceVersion)
    }

    /// Whether format `formatName` holds an entry of `entity` (any version).
    public func imageExists(for entityID: ImageEntityID, formatName: String) -> Bool {
        tables[formatName]?.contains(entityID) ?? false
    }

    /// The stored image of `entity` from the format that best matches `query` within its
    /// tolerance (``/StrataBase/VariantMatcher``), or `nil`: formats are tried best match first.
    public func cachedImage(for entity: ImageTableEntity, matching query: SizeQuery) -> PixelImage? {
        var candidates = formats
        while let best = VariantMatcher.bestMatch(in: candidates, for: query, descriptor: { $0.descriptor }) {
            if let image = tables[best.name]?.image(for: entity.id, sourceVersion: entity.sourceVersion) { return image }
            candidates.removeAll { $0.name == best.name }
        }
        return nil
    }

    /// The image of `entity` in format `formatName`: from the table, else drawn from the source
    /// (filling the whole family unless the delegate declines). Concurrent identical requests
    /// share one load. Cancelling the calling task makes this call throw `CancellationError` at
    /// once (without waiting for the shared load); the load itself is cancelled when its last
    /// waiter leaves, so a later request starts afresh. Throws ``ImageTableError`` or the
    /// source's error otherwise.
    public func image(for entity: ImageTableEntity, formatName: String) async throws -> PixelImage {
        guard let table = tables[formatName] else { throw ImageTableError.unknownFormat(formatName) }
        switch table.read(entity.id, sourceVersion: entity.sourceVersion, maintain: false) {
        case .hit(let found):
            return found.image
        case .miss:
            break
        case .wouldWait:
            // The table must re-read its metadata (another process wrote or replaced it): O(slots)
            // work that belongs on the pool.
            let (id, version) = (entity.id, entity.sourceVersion)
            if let hit = try await onPool({ () throws -> PixelImage? in table.image(for: id, sourceVersion: version) }) {
                return hit
            }
        }
        try Task.checkCancellation()
        let format = table.format
        let version = entity.sourceVersion
        do {
            return try await loads.run(
                group: entity.id, descriptor: Load(format: formatName, sourceVersion: version), priority: 0,
                joining: { $0.format == formatName && $0.sourceVersion == version },
                work: { [self] _ async throws -> PixelImage in try await fill(entity, requested: format) }
            ).value
        } catch {
            switch error {
            case .cancelled: throw CancellationError()
            case .failed(let error): throw error
            }
        }
    }

    /// Cancels the pending requests of `entityID` in `formatName` (of any source version), if
    /// any: all their waiters get `CancellationError` at once, and no further format of the
    /// family is drawn.
    public func cancelRequest(for entityID: ImageEntityID, formatName: String) {
        loads.cancelAll(group: entityID) { $0.format == formatName }
    }

    /// Number of requests waiting for pending loads of `entityID` in `formatName` (of every
    /// source version), for tests.
    package func waiterCount(for entityID: ImageEntityID, formatName: String) -> Int {
        loads.waiterCount(group: entityID) { $0.format == formatName }
    }

    /// Stores `image` as the entry of `entity` in format `formatName` (copied into the slot; it
    /// must have the format's style and fit its size). Runs on the pool; throws
    /// ``ImageTableError``.
    @discardableResult
    public func setImage(_ image: PixelImage, for entity: ImageTableEntity, formatName: String) async throws -> PixelImage {
        let table = try table(named: formatName)
        let (id, version) = (entity.id, entity.sourceVersion)
        return try await onPool { () throws -> PixelImage in try table.setImage(image, for: id, sourceVersion: version) }
    }

    /// Removes `entityID` from format `formatName`, or from every format when it is `nil`. Runs
    /// on the pool; throws ``ImageTableError``.
    public func deleteImage(for entityID: ImageEntityID, formatName: String? = nil) async throws {
        let targets = try formatName.map { [try table(named: $0)] } ?? formats.map { tables[$0.name]! }
        try await onPool { () throws in for table in targets { try table.delete(entityID) } }
    }

    /// Empties format `formatName` (new files renamed over the old ones; readers are not held
    /// up). Runs on the pool; throws ``ImageTableError``.
    public func reset(formatName: String) async throws {
        let table = try table(named: formatName)
        try await onPool { () throws in try table.reset() }
    }

    /// Packs format `formatName`'s live entries into the lowest slots (new files renamed over
    /// the old ones; readers are not held up) and returns the bytes of disk freed. Runs on the
    /// pool; throws ``ImageTableError``.
    @discardableResult
    public func compact(formatName: String) async throws -> Int {
        let table = try table(named: formatName)
        return try await onPool { () throws -> Int in try table.compact() }
    }

    /// Runs blocking table work on the drawing pool (the one place this cache calls the pool).
    /// Runs `body` on the drawing pool; its own error comes back as it was thrown (a table
    /// error, the delegate's or a processing closure's), a cancellation while queued as
    /// `CancellationError`.
    private func onPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        do {
            return try await drawingPool.run { (_: Void) throws -> T in try body() }
        } catch {
            throw error.resolved(cancelled: CancellationError(), shutDown: ImageTableError.shutDown)
        }
    }

    /// Bytes on disk of format `formatName`'s files.
    public func diskUsage(formatName: String) throws(ImageTableError) -> Int {
        try table(named: formatName).diskUsage
    }

    /// Bytes on disk of every table's files.
    public var totalDiskUsage: Int { formats.reduce(0) { $0 + tables[$1.name]!.diskUsage } }

    private func fill(_ entity: ImageTableEntity, requested: ImageTableFormat) async throws -> PixelImage {
        var targets = [requested]
        if delegate?.shouldProcessAllFormats(inFamily: requested.family, for: entity) ?? true {
            targets += formats.filter { $0.family == requested.family && $0.name != requested.name }
        }
        let largest = targets.reduce(PixelSize(width: 1, height: 1)) {
            PixelSize(width: max($0.width, $1.size.width), height: max($0.height, $1.size.height))
        }
        try Task.checkCancellation()
        let source = try await entity.source.load(largest)
        var result: PixelImage?
        for format in targets {
            try Task.checkCancellation()
            let table = tables[format.name]!
            let draw: @Sendable () throws -> PixelImage = {
                try table.store(entity.id, sourceVersion: entity.sourceVersion) { canvas in try entity.process(source, &canvas) }
            }
            if format.name == requested.name {
                result = try await onPool(draw)
                continue
            }
            // A sibling is drawn for later requests; its failure is not this request's.
            do {
                _ = try await onPool(draw)
            } catch {
                siblingFailures.add(1, ordering: .relaxed)
                logger.warning(
                    "could not draw a sibling format of the requested one",
                    metadata: [
                        "entity": "\(entity.id)", "sourceVersion": "\(entity.sourceVersion)", "format": "\(format.name)",
                        "requested": "\(requested.name)", "source": "\(entity.source.description)", "error": "\(error)",
                    ])
            }
        }
        return result!
    }
}
