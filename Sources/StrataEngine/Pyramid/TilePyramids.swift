import StrataBase
import StrataCodecs
import StrataTiers
#if canImport(Glibc)
import Glibc
#endif

/// Tile pyramids of big originals, kept in one image table: the way to serve deep zoom into
/// images too large for whole-image variants (a viewer's IIIF tiles of a 1-gigapixel scan).
///
/// An original's pyramid (``PyramidGeometry``: power-of-two levels cut into `tileSize`
/// squares) is built in *one streaming pass* (`PyramidPass`, `PyramidReducer`): the original
/// is decoded in bands, every level is reduced from the one above as rows arrive, and each tile
/// goes into the table the moment its rows are complete. Memory is bounded by the bands and
/// one strip per level (``memoryBound(for:)``), never by the image. A tile is then an O(1)
/// mapped table hit, with the table's checksums, crash safety, least-recently-used slot reuse,
/// hard size limit and cross-process sharing.
///
/// - A tile's entry is keyed by the key (its colour and gravity parts included), the tile
///   size, level, column and row, and stamped with the original's ``/StrataBase/SourceVersion``: a tile of
///   another version is a miss, and a changed original is built again.
/// - Requests during a build wait only for their own tile (``tile(_:of:geometry:version:)``), each
///   cancellable alone; requests for one original and version share one build.
/// - A build skips the tiles the table already holds (from an earlier build that a crash or a
///   restart cut short, or another process) and only writes the missing ones.
/// - Builds run on the engine's pool, in the prefetch lane, one per original and version; the
///   engine's other work keeps the urgent lane.
///
/// - Builds are coalesced across processes sharing the directory: a build takes the pyramid's
///   `flock` (`<table>.builds/<pyramid>-<version>.lock`) first; while another process holds
///   it, this one hands the tiles that process writes to its own waiters, and once it has the
///   lock it does no decode at all if every tile is in the table.
public final class TilePyramids: Sendable {
    /// How tiles are cut, stored and limited.
    public struct Settings: Sendable, Hashable {
        /// Side of the square tiles (even, 16…4096; default 512).
        public var tileSize = 512
        /// The most tiles the table holds (its hard size limit: each takes `tileSize² × 4` bytes
        /// plus a page); the least recently used are reused first.
        public var maximumTiles = 16_384
        /// The largest original (pixels) a pyramid is built from (default 4 gigapixels).
        public var maxSourcePixels = 4_000_000_000
        /// The largest original (bytes of its file) a pyramid is built from (default 16 GiB). A
        /// build copies it to a file in the table's `.builds` folder and reads it from there, so
        /// this bounds disk space while a build runs, not memory; the source's own limit on what
        /// it reads into memory (`source.maxFileSize`) does not apply.
        public var maxSourceBytes = 16 << 30
        /// Permission bits of the table's files.
        public var filePermissions: UInt32 = 0o600

        public init(
            tileSize: Int = 512, maximumTiles: Int = 16_384, maxSourcePixels: Int = 4_000_000_000, maxSourceBytes: Int = 16 << 30
        ) {
            self.tileSize = tileSize
            self.maximumTiles = maximumTiles
            self.maxSourcePixels = maxSourcePixels
            self.maxSourceBytes = maxSourceBytes
        }

        package func validate() throws(ImageTableError) {
            guard tileSize >= 16, tileSize <= 4096, tileSize % 2 == 0 else {
                throw .invalidFormat(name: "pyramid", reason: "the tile size must be even and within 16…4096, not \(tileSize)")
            }
            guard maxSourcePixels > 0 else {
                throw .invalidFormat(name: "pyramid", reason: "maxSourcePixels must be positive, not \(maxSourcePixels)")
            }
            guard maxSourceBytes > 0 else {
                throw .invalidFormat(name: "pyramid", reason: "maxSourceBytes must be positive, not \(maxSourceBytes)")
            }
        }
    }

    /// What a pyramid holds or a build did.
    public struct Statistics: Sendable, Hashable {
        /// Builds started and finished (whatever their outcome), and those that failed.
        public var buildsStarted = 0
        public var buildsFinished = 0
        public var buildsFailed = 0
        /// Streaming passes run (a build that finds every tile in the table, written by another
        /// process, runs none).
        public var passes = 0
        /// Tiles written by builds, and tiles a build found already in the table.
        public var tilesWritten = 0
        public var tilesFound = 0
        /// Tile requests answered from the table at once, and those that waited for a build.
        public var tileHits = 0
        public var tileWaits = 0
    }

    public let settings: Settings
    /// The directory of the table (and of the build locks).
    public let directory: String
    package let cache: ImageCache
    package let table: ImageTable
    package let builds = Lock<[BuildKey: PyramidBuild]>([:])
    /// Test seam: called by a pass after each tile it wrote (empty in production: one
    /// uncontended lock per tile).
    package let afterWritingTile = Lock<(@Sendable (TileAddress) -> Void)?>(nil)
    package let counters = Lock(Statistics())

    package struct BuildKey: Hashable {
        package var key: CacheKey
        package var version: UInt64
    }

    /// Opens (creating if needed) the pyramid table in `directory`, for the originals of
    /// `cache`'s source. Throws when the settings or the directory are unusable.
    public init(cache: ImageCache, directory: String, settings: Settings = .init()) throws(ImageTableError) {
        try settings.validate()
        self.cache = cache
        self.directory = directory
        self.settings = settings
        table = try ImageTable(directory: directory, format: Self.tableFormat(settings))
    }

    /// The image table format of pyramids with `settings` (`pyramid-<tileSize>`).
    public static func tableFormat(_ settings: Settings) -> ImageTableFormat {
        ImageTableFormat(
            name: "pyramid-\(settings.tileSize)", family: "pyramid-\(settings.tileSize)",
            size: PixelSize(width: settings.tileSize, height: settings.tileSize), style: .bgra32Premultiplied, mode: .fit,
            maximumCount: settings.maximumTiles, filePermissions: settings.filePermissions)
    }

    /// The pyramid of an original of `size`.
    public func geometry(for size: PixelSize) -> PyramidGeometry { PyramidGeometry(size: size, tileSize: settings.tileSize) }

    /// Bytes one build holds beyond the pages of its original it reads now (a spool file's
    /// mapping, released behind the decode): a strip of `tileSize` rows per level
    /// and the decoder's band (for a progressive JPEG or a whole decode, the decode's own memory
    /// comes on top; a JPEG's 1/8-scale coarse pass adds up to about 5 MB a core).
    public func memoryBound(for size: PixelSize) -> Int {
        geometry(for: size).levels.reduce(0) {
            $0 + PixelLayout.bytesPerRow(width: $1.width, style: .bgra32Premultiplied) * settings.tileSize
        }
    }

    public var statistics: Statistics { counters.withLock { $0 } }

    /// Tiles in the table (every pyramid's).
    public var tileCount: Int { table.count }

    /// Bytes the table's files take on disk.
    public var diskUsage: Int { table.diskUsage }

    /// The header of `key`'s original under the pyramids' pixel limit (``Settings/maxSourcePixels``),
    /// and its version: one source fetch and a header parse, no pixels.
    public func original(for key: CacheKey) async throws(ImageCacheError) -> (header: ImageHeader, version: SourceVersion) {
        try await cache.originalHeader(for: key, maxPixels: settings.maxSourcePixels)
    }

    /// The high half of the ids of `key`'s pyramid's tiles.
    package func pyramidID(_ key: CacheKey) -> UInt64 { ImageEntityID(hashing: "\(key.string)\u{0}tiles=\(settings.tileSize)").high }

    /// The entry id of `tile` of `key`'s pyramid (`key` with its colour and gravity parts): the
    /// high half names the pyramid (a hash of the key and the tile size), the low half is the
    /// tile's level, column and row mixed with it (``PyramidInventory`` reads them back).
    package func entityID(_ tile: TileAddress, of key: CacheKey) -> ImageEntityID {
        let pyramid = pyramidID(key)
        return ImageEntityID(high: pyramid, low: PyramidInventory.pack(tile) ^ PyramidInventory.mix(pyramid))
    }

    /// The tile if the table holds it for `version`; no waiting, no build.
    public func cachedTile(_ tile: TileAddress, of key: CacheKey, version: SourceVersion) -> PixelImage? {
        table.image(for: entityID(tile, of: key), sourceVersion: version.stamp)
    }

    /// `tile` of `key`'s original at `version` (the version its header was read from): from the
    /// table, else from the build of its pyramid — joined when one runs, started when none
    /// does — as soon as the build has written it. Cancelling the caller stops its wait, not
    /// the build. Throws what the build threw (the original is gone, broken, too large), or
    /// ``ImageCacheError/invalidRequest(key:reason:)`` for a tile outside the pyramid.
    public func tile(
        _ tile: TileAddress, of key: CacheKey, geometry: PyramidGeometry, version: SourceVersion
    ) async throws(ImageCacheError) -> PixelImage {
        guard geometry.tileSize == settings.tileSize, geometry.contains(tile) else {
            throw .invalidRequest(key: key.string, reason: "tile \(tile) is not in the pyramid of a \(geometry.size) image")
        }
        try fits(geometry, key: key)
        if let image = cachedTile(tile, of: key, version: version) {
            counters.withLock { $0.tileHits += 1 }
            return image
        }
        counters.withLock { $0.tileWaits += 1 }
        // A build that ends without handing this tile over (it found the tile already written,
        // or the table reused its slot before this read) is asked once more.
        for _ in 0..<2 {
            let build = join(key, geometry: geometry, version: version)
            if let image = try await build.wait(for: tile) { return image }
            if let image = cachedTile(tile, of: key, version: version) { return image }
        }
        throw .tier(TierFailure(tier: .table, key: key.string, reason: "the pyramid's table did not keep tile \(tile) (it is too small)"))
    }

    /// Starts the build of the pyramid of `key`'s original of `size` at `version` unless its
    /// coarsest tile is in the table already or a build runs; returns at once. For a service
    /// that has just described a big image (its `info.json`): the viewer's tiles follow.
    public func prepare(_ key: CacheKey, size: PixelSize, version: SourceVersion) {
        let geometry = geometry(for: size)
        guard cachedTile(TileAddress(level: geometry.levels.count - 1, column: 0, row: 0), of: key, version: version) == nil
        else { return }
        _ = join(key, geometry: geometry, version: version)
    }

    /// Builds `key`'s whole pyramid now (or joins the build that runs), skipping the tiles the
    /// table has: for warming ahead (`strata warm --iiif`). Returns the original's size and
    /// version.
    @discardableResult
    public func build(_ key: CacheKey) async throws(ImageCacheError) -> (size: PixelSize, version: SourceVersion) {
        let original = try await original(for: key)
        let geometry = geometry(for: original.header.size)
        try fits(geometry, key: key)
        let build = join(key, geometry: geometry, version: original.version)
        try await build.finished()
        return (original.header.size, original.version)
    }

    /// Refuses a pyramid with more tiles than the table holds: its build would reuse its own
    /// first tiles' slots for its last ones.
    private func fits(_ geometry: PyramidGeometry, key: CacheKey) throws(ImageCacheError) {
        guard geometry.tileCount <= settings.maximumTiles else {
            throw .invalidRequest(
                key: key.string,
                reason:
                    "the pyramid of a \(geometry.size) image has \(geometry.tileCount) tiles, more than its table holds (\(settings.maximumTiles)): raise iiif.pyramidBytes"
            )
        }
    }

    /// Deletes every tile of `key`'s pyramids (every version; `key` with its colour part): for
    /// a purge. Blocks (the table's writer lock, per tile): call it off the cooperative pool.
    /// Returns the number of tiles deleted.
    @discardableResult
    public func removeBlocking(_ key: CacheKey) throws(ImageTableError) -> Int {
        let pyramid = pyramidID(key)
        let ids = table.entityIDs { $0.high == pyramid }
        for id in ids { try table.delete(id) }
        return ids.count
    }

    /// ``removeBlocking(_:)`` on the engine's pool.
    @discardableResult
    public func remove(_ key: CacheKey) async throws(ImageCacheError) -> Int {
        let outcome = try await cache.onPool(key, lane: FlightLane(.urgent)) { [self] () -> Result<Int, ImageTableError> in
            Result { () throws(ImageTableError) -> Int in try removeBlocking(key) }
        }
        switch outcome {
        case .success(let count): return count
        case .failure(let error): throw .tier(TierFailure(tier: .table, key: key.string, reason: "pyramid table: \(error)"))
        }
    }

    /// The build of `key`'s pyramid at `version`, started if none runs.
    private func join(_ key: CacheKey, geometry: PyramidGeometry, version: SourceVersion) -> PyramidBuild {
        let (build, started) = builds.withLock { map -> (PyramidBuild, Bool) in
            let id = BuildKey(key: key, version: version.stamp)
            if let running = map[id] { return (running, false) }
            let build = PyramidBuild(geometry: geometry)
            map[id] = build
            return (build, true)
        }
        guard started else { return build }
        counters.withLock { $0.buildsStarted += 1 }
        Task { await run(build, key: key, version: version) }
        return build
    }

    /// Runs a build on the engine's pool and hands its outcome to its waiters.
    private func run(_ build: PyramidBuild, key: CacheKey, version: SourceVersion) async {
        let outcome: Result<Void, ImageCacheError>
        do throws(ImageCacheError) {
            // Copied to a private file and mapped: the pass holds the pages it reads, not the file.
            let original = try await cache.spoolOriginal(
                key, lane: FlightLane(.prefetch), into: buildsFolder, maxBytes: settings.maxSourceBytes)
            guard SourceVersion(token: original.version).stamp == version.stamp else {
                throw .source(
                    SourceError(key: key.string, reason: .changed("its version is not the one its pyramid was asked for; ask again")))
            }
            try await cache.onPool(key, lane: FlightLane(.prefetch)) { [self] () throws(ImageCacheError) in
                try lockedPass(original.file, key: key, version: version, build: build)
            }
            outcome = .success(())
        } catch {
            outcome = .failure(error)
        }
        builds.withLock { map in
            if map[BuildKey(key: key, version: version.stamp)] === build { map[BuildKey(key: key, version: version.stamp)] = nil }
        }
        counters.withLock { c in
            c.buildsFinished += 1
            if case .failure = outcome { c.buildsFailed += 1 }
        }
        if case .failure(let error) = outcome {
            cache.options.logger.warning(
                "pyramid build failed", metadata: ["key": "\(key.sourceKey)", "error": "\(error)"])
        }
        build.finish(outcome)
    }

    /// Whether the table holds every tile of `key`'s pyramid at `version` (by the metadata's
    /// records: a lookup per tile, no pixels read).
    package func isComplete(_ key: CacheKey, geometry: PyramidGeometry, version: SourceVersion) -> Bool {
        for level in geometry.levels.indices {
            let (columns, rows) = geometry.grid(level)
            for row in 0..<rows {
                for column in 0..<columns {
                    let id = entityID(TileAddress(level: level, column: column, row: row), of: key)
                    guard table.indexedSourceVersion(of: id) == version.stamp else { return false }
                }
            }
        }
        return true
    }

    /// A build's pass under the pyramid's cross-process lock (on a pool thread): while another
    /// process holds it, the tiles it writes are handed to this build's waiters (polled every
    /// 20 ms); then the pass runs unless every tile is there.
    private func lockedPass(_ original: MappedFile, key: CacheKey, version: SourceVersion, build: PyramidBuild) throws(ImageCacheError) {
        let name = String(pyramidID(key), radix: 16) + "-" + String(version.stamp, radix: 16) + ".lock"
        let folder = buildsFolder
        let lock: Shared<FileDescriptor>
        do throws(SystemCallError) {
            try FileDescriptor.makeDirectories(folder)
            lock = try ImageTable.openLockFile(folder + "/" + name, permissions: settings.filePermissions)
        } catch {
            throw .tier(TierFailure(tier: .table, key: key.string, reason: "pyramid build lock: \(error)"))
        }
        do throws(SystemCallError) {
            while try !lock.resource.lockFile(.exclusive, wait: false) {
                for tile in build.waitingTiles() {
                    if let image = cachedTile(tile, of: key, version: version) { build.produced(tile, image) }
                }
                usleep(20_000)
            }
        } catch {
            throw .tier(TierFailure(tier: .table, key: key.string, reason: "pyramid build lock: \(error)"))
        }
        // Removed while held: a process that opens the name later makes a new lock, and at
        // worst builds beside one that waited on this one (writes are idempotent).
        defer {
            // Failures here leave a stale lock file or a lock the process exit drops: counted
            // and logged as the tables' failures (the build itself is done or failed already).
            do {
                try FileDescriptor.unlink(path: folder + "/" + name)
            } catch {
                cache.tierFailed(TierFailure(tier: .table, key: key.string, reason: "pyramid build lock: \(error)"))
            }
            do {
                _ = try lock.resource.lockFile(.unlock)
            } catch {
                cache.tierFailed(TierFailure(tier: .table, key: key.string, reason: "pyramid build lock: \(error)"))
            }
        }
        if isComplete(key, geometry: build.geometry, version: version) {
            counters.withLock { $0.tilesFound += build.geometry.tileCount }
            return
        }
        counters.withLock { $0.passes += 1 }
        try pass(original, key: key, version: version, build: build)
    }

    /// Where builds keep their cross-process locks and their originals' spool files.
    private var buildsFolder: String { directory + "/" + Self.tableFormat(settings).name + ".builds" }

    /// The streaming pass (on a pool thread): each tile is converted to the key's colours and
    /// written, unless the table has it already, and handed to its waiters.
    /// The original's pages behind the decode's position are released as it goes.
    private func pass(_ original: MappedFile, key: CacheKey, version: SourceVersion, build: PyramidBuild) throws(ImageCacheError) {
        let wholeDecodePixels = cache.renderers.withRenderer { $0.decoder.limits.maxPixels }
        let maxSourcePixels = settings.maxSourcePixels
        let table = self.table
        do {
            try original.withUnsafeBytes { raw in
                let header = try ImageDecoder(limits: DecodingLimits(maxPixels: maxSourcePixels)).readHeader(raw)
                guard header.size == build.geometry.size else {
                    throw ImageCacheError.source(
                        SourceError(
                            key: key.string,
                            reason: .changed("it is \(header.size), not the \(build.geometry.size) asked for; ask again")))
                }
                let feed = try PyramidPass.feed(
                    for: header, bytes: raw, geometry: build.geometry, maxSourcePixels: maxSourcePixels,
                    wholeDecodePixels: wholeDecodePixels)
                let converter =
                    header.isCMYK
                    ? nil
                    : ColourConversion.converter(
                        from: header.colour, gray: header.isGrayscale, output: key.colourOutput, opaque: !header.hasAlpha)
                var written = 0, found = 0
                defer {
                    counters.withLock {
                        $0.tilesWritten += written
                        $0.tilesFound += found
                    }
                }
                // The pass's memory from the engine's render.memoryLimit, like a render's: waits
                // for room (in the prefetch lane), or is refused when larger than all of it.
                let reserved = passBytes(header: header, feed: feed, geometry: build.geometry, bytes: raw)
                // What the header, the feed and the estimate read (a PNG's chunk walk touches
                // most pages) leaves memory: the pass maps its pages again as it reads them.
                original.release(0..<original.count)
                do {
                    try cache.memoryBudget.withReservation(reserved, lane: .prefetch) { () throws(any Error) in
                        // The reduction beside the decode runs as an urgent job: viewers wait for it.
                        try PyramidPass.run(
                            raw, header: header, feed: feed, wholeDecodePixels: wholeDecodePixels,
                            forkJoin: .pool(cache.pool, lane: .urgent), geometry: build.geometry, waiting: { build.waitingTiles() },
                            release: { original.release($0) }
                        ) { [self] tile, view in
                            let id = entityID(tile, of: key)
                            if let existing = table.image(for: id, sourceVersion: version.stamp) {
                                found += 1
                                build.produced(tile, existing)
                                return
                            }
                            let image = try table.store(id, sourceVersion: version.stamp, streaming: true) { canvas in
                                try Self.draw(view, into: &canvas, converter: converter)
                            }
                            written += 1
                            build.produced(tile, image)
                            if let hook = afterWritingTile.withLock({ $0 }) { hook(tile) }
                        }
                    }
                } catch let failure as MemoryBudgetFailure<any Error> {
                    switch failure {
                    case .refused(let refusal): throw ImageCacheError.overMemoryLimit(key: key.string, refusal)
                    case .failed(let error): throw error
                    }
                }
            }
        } catch let error as ImageCacheError {
            throw error
        } catch let error as ImageDecodingError {
            throw .decoding(key: key.string, error)
        } catch {
            throw .tier(TierFailure(tier: .table, key: key.string, reason: "pyramid table: \(error)"))
        }
    }

    /// What one pass holds while it runs: the strips (``memoryBound(for:)``), the JPEG coarse
    /// pass's bands (8 MiB), and for a whole decode the decoded image; plus the codec's own
    /// buffers (a progressive JPEG's coefficients, libwebp's alpha plane or lossless image).
    /// A JPEG 2000 file's passes hold a band and two regions, with OpenJPEG's buffers (its
    /// 32-bit samples of up to four components, and a quarter more), never the image.
    private func passBytes(
        header: ImageHeader, feed: PyramidPass.Feed, geometry: PyramidGeometry, bytes: UnsafeRawBufferPointer
    ) -> Int {
        var total = memoryBound(for: header.size) + (8 << 20)
        if case .jp2Levels(let levels) = feed { return total + levels.workingBytes(geometry: geometry) }
        if case .wholeDecode = feed { total += 4 * header.size.width * header.size.height }
        return total + ImageDecoder.workingBytes(for: header, decodedSize: header.size, bytes: bytes)
    }

    /// Copies a tile's pixels into a table slot and converts its colours there.
    private static func draw(
        _ view: PixelImage, into canvas: inout ImageTableCanvas, converter: ColourConversion.RowConverter?
    ) throws {
        let size = view.size, stride = canvas.image.bytesPerRow
        canvas.image.withUnsafeMutableBytes { slot in
            view.withUnsafeBytes { tile in
                for y in 0..<size.height {
                    (slot.baseAddress! + y * stride).copyMemory(from: tile.baseAddress! + y * view.bytesPerRow, byteCount: size.width * 4)
                }
            }
            converter?.convert(slot.baseAddress!, size: size, stride: stride)
        }
        canvas.contentSize = size
    }
}
