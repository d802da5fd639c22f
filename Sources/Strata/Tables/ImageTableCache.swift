import Synchronization

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
///   Identical pending requests share one load; ``cancelRequest(for:formatName:)`` stops it.
/// - ``cachedImage(for:matching:)`` serves a size query from any format within tolerance
///   (``VariantMatcher``), best match first.
///
/// Thread-safe; several processes may open the same directory.
public final class ImageTableCache: Sendable {
    public let directory: String
    /// The formats, in registration order.
    public let formats: [ImageTableFormat]
    let tables: [String: ImageTable]
    let delegate: (any ImageTableCacheDelegate)?
    let drawingPool: BlockingPool<Void>?
    let pending = Mutex<[RequestKey: Pending]>([:])
    let nextToken = Atomic<UInt64>(0)

    struct Pending {
        var token: UInt64
        var task: Task<PixelImage, any Error>
    }

    struct RequestKey: Hashable {
        var id: ImageEntityID
        var format: String
    }

    /// Opens (or creates) a table for each format in `directory`. With a `drawingPool`, the
    /// entities' processing (CPU-bound drawing into the slots) runs on its threads instead of
    /// Swift's cooperative pool.
    public init(
        directory: String, formats: [ImageTableFormat], delegate: (any ImageTableCacheDelegate)? = nil,
        drawingPool: BlockingPool<Void>? = nil
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
        self.drawingPool = drawingPool
    }

    /// The table of format `name`.
    public func table(named name: String) throws(ImageTableError) -> ImageTable {
        guard let table = tables[name] else { throw .unknownFormat(name) }
        return table
    }

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
    /// tolerance (``VariantMatcher``), or `nil`: formats are tried best match first.
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
    /// share one load. Throws `CancellationError` when cancelled, ``ImageTableError`` or the
    /// source's error.
    public func image(for entity: ImageTableEntity, formatName: String) async throws -> PixelImage {
        guard let table = tables[formatName] else { throw ImageTableError.unknownFormat(formatName) }
        if let hit = table.image(for: entity.id, sourceVersion: entity.sourceVersion) { return hit }
        let key = RequestKey(id: entity.id, format: formatName)
        let task = pending.withLock { map in
            if let running = map[key] { return running.task }
            let token = nextToken.add(1, ordering: .relaxed).newValue
            let task = Task { [self] in
                defer {
                    pending.withLock { map in
                        if map[key]?.token == token { map.removeValue(forKey: key) }
                    }
                }
                return try await fill(entity, requested: table.format)
            }
            map[key] = Pending(token: token, task: task)
            return task
        }
        return try await task.value
    }

    /// Cancels the pending request of `entityID` in `formatName`, if any: its waiters get
    /// `CancellationError`, and no further format of the family is drawn.
    public func cancelRequest(for entityID: ImageEntityID, formatName: String) {
        let entry = pending.withLock { $0.removeValue(forKey: RequestKey(id: entityID, format: formatName)) }
        entry?.task.cancel()
    }

    /// Stores `image` as the entry of `entity` in format `formatName` (copied into the slot; it
    /// must have the format's style and fit its size).
    @discardableResult
    public func setImage(_ image: PixelImage, for entity: ImageTableEntity, formatName: String) throws -> PixelImage {
        try table(named: formatName).setImage(image, for: entity.id, sourceVersion: entity.sourceVersion)
    }

    /// Removes `entityID` from format `formatName`, or from every format when it is `nil`.
    public func deleteImage(for entityID: ImageEntityID, formatName: String? = nil) throws(ImageTableError) {
        if let formatName {
            try table(named: formatName).delete(entityID)
        } else {
            for format in formats { try tables[format.name]!.delete(entityID) }
        }
    }

    /// Empties format `formatName` (new files renamed over the old ones).
    public func reset(formatName: String) throws(ImageTableError) {
        try table(named: formatName).reset()
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
            let draw: @Sendable (()) throws -> PixelImage = { _ in
                try table.store(entity.id, sourceVersion: entity.sourceVersion) { canvas in try entity.process(source, &canvas) }
            }
            let image = try await drawingPool?.run(draw) ?? draw(())
            if format.name == requested.name { result = image }
        }
        return result!
    }
}
