import CoreMetrics
import Logging
import Synchronization
import StrataBase
import StrataCodecs
import StrataTiers

/// The engine: the one object a service embeds. A request for "key K at about W×H" goes
/// memory → disk → image tables → source, each within the size tolerance, and the answer fills
/// the tiers it passed on the way back (memory at once, disk write-behind, every format of a
/// matching table family from one decode).
///
/// - ``image(for:)``: the image from the cheapest tier, waiting for the source when needed.
///   Identical in-flight requests (same key, mode and style, a box within the first request's
///   tolerance) share one fetch and one render; each waiter may cancel alone; the work stops
///   when the last waiter leaves. Urgent requests run in parallel, prefetches one at a time and
///   only while no urgent work waits.
/// - ``cachedImage(for:)``: the memory tier only, synchronous, never blocks, allocates nothing
///   on a miss — for render loops.
/// - ``prefetch(_:)``, ``prioritize(_:)``, ``deprioritize(_:)``, ``remove(key:)``,
///   ``removeAll()``, ``statistics``.
///
/// Every tier is optional (memory + source, disk + source, …). Blocking work (decoding,
/// resampling, file reads) runs on the engine's dedicated threads, never on Swift's
/// cooperative pool. Thread-safe.
public final class ImageCache: Sendable {
    /// Engine-wide settings (the tiers carry their own).
    public struct Options: Sendable {
        /// Size tolerance for requests that name none (0...1). Default 0.2.
        public var defaultTolerance: Double = SizeQuery.defaultTolerance
        /// Urgent blocking work (decode, resample, file reads) that runs at once, each on its own
        /// thread. Default: the number of cores. Changes at run time through ``reconfigure(_:)``.
        public var width: Int = Processors.online
        /// Prefetch work that runs at once (while no urgent work waits). Default 1.
        public var prefetchWidth: Int = 1
        /// Hits older than this are served at once and revalidated with the source in the
        /// background (stale-while-revalidate); `nil` (default) never revalidates — for
        /// immutable or content-addressed keys.
        public var revalidateAfter: Duration? = nil
        /// How long a key the source does not have is answered `notFound` without asking it
        /// again. Default 10 s; zero turns negative caching off.
        public var negativeTTL: Duration = .seconds(10)
        /// The most missing keys remembered at once (default 16 384): past it the oldest is
        /// forgotten first, so a flood of distinct missing keys costs bounded memory.
        public var negativeCapacity = 16_384
        /// How requests whose box is within tolerance of a table format are served: from the
        /// tables (a source miss fills the whole family from one decode). Default true.
        public var useTablesForMatchingRequests = true
        /// Render-ahead for moving sizes (a zooming viewer), as a share of the request's
        /// tolerance (0...1): when a hit's variant is further from the box than `renderAhead` ×
        /// tolerance, the hit is served at once and the box itself is rendered in the background
        /// (prefetch lane, one render per key at a time, sharing any flight for that box), so a
        /// zoom that goes on in the same direction finds a close variant before it leaves the
        /// tolerance. `nil` (default): off. Costs renders: about one each time a zoom moves by
        /// this share of the tolerance. `strata-bench engine` measures 0.5 with a viewer whose
        /// zoom moves 2–5 % a frame at 60 frames per second.
        public var renderAhead: Double? = nil
        /// Labels for log lines; swift-metrics names start with `metricsPrefix`.
        public var logger = Logger(label: "strata.engine")
        public var metricsPrefix = "strata"
        /// Where the metrics go; `nil` (default) for whatever the process bootstrapped with
        /// `MetricsSystem.bootstrap` (tests inject their own).
        public var metricsFactory: (any MetricsFactory)? = nil
        /// Spans of the work below memory (``/StrataBase/EngineTracing``); off by default.
        public var tracing: EngineTracing = .off
        /// The most bytes that renders in flight may hold together (decode scratch, output, the
        /// codecs' own buffers: ``/StrataCodecs/PreparedRender/peakBytes``), `nil` (default) for no
        /// limit. A render that would exceed it waits in its lane; one larger than the whole
        /// limit fails with ``ImageCacheError/overMemoryLimit(key:_:)``. Changes at run time
        /// through ``reconfigure(_:)``; the service's encodes reserve from the same budget.
        public var memoryLimit: Int? = nil

        public init() {}

        /// Checks the values; throws an error naming the bad one.
        public func validate() throws(ImageCacheConfigurationError) {
            if !(0...1).contains(defaultTolerance) {
                throw .init(key: "defaultTolerance", reason: "must be within 0...1, got \(defaultTolerance)")
            }
            if width < 1 { throw .init(key: "width", reason: "must be ≥ 1, got \(width)") }
            if prefetchWidth < 1 { throw .init(key: "prefetchWidth", reason: "must be ≥ 1, got \(prefetchWidth)") }
            if let r = revalidateAfter, r < .zero { throw .init(key: "revalidateAfter", reason: "must be ≥ 0, got \(r)") }
            if negativeTTL < .zero { throw .init(key: "negativeTTL", reason: "must be ≥ 0, got \(negativeTTL)") }
            if negativeCapacity < 1 { throw .init(key: "negativeCapacity", reason: "must be ≥ 1 key, got \(negativeCapacity)") }
            if let memoryLimit, memoryLimit < 1 << 20 {
                throw .init(key: "memoryLimit", reason: "must be ≥ 1 MiB, got \(memoryLimit) bytes")
            }
            if let share = renderAhead, !(0...1).contains(share) {
                throw .init(key: "renderAhead", reason: "must be within 0...1 (a share of the tolerance), got \(share)")
            }
        }
    }

    public let options: Options
    public let memory: ImageMemoryTier?
    public let disk: DiskTier?
    public let tables: ImageTableCache?
    /// The fleet's shared tier, asked after every local tier and before a render (``RemoteCacheTier``).
    public let shared: (any RemoteCacheTier)?
    public let source: (any ImageSource)?
    /// `source` when its reads block (a directory): read on the engine's threads, in the
    /// render's own job.
    package let blockingSource: (any BlockingImageSource)?
    /// Every configured tier: memory, disk, tables (statistics, gauges, removal).
    package let tiers: [any CacheTier]
    /// The tiers below memory in lookup order: disk, then the tables (when
    /// ``Options/useTablesForMatchingRequests``).
    package let lowerTiers: [any CacheTier]
    /// The engine's threads: every tier's blocking work, in two lanes (its own, or the one the
    /// caller shares with its tables and source).
    package let pool: BlockingPool<Void>
    /// Set when the engine started its own pool (shut down with the engine).
    private let ownsPool: Bool
    /// The renderers its jobs take.
    package let renderers: RendererStore
    /// The bytes renders (and the service's encodes) in flight may hold (``Options/memoryLimit``).
    public let memoryBudget: MemoryBudget
    package let flights = Coalescer<CacheKey, FlightDescriptor, Lane, CachedImage, ImageCacheError>()
    /// Revalidations per key, described by the version the hit held: only hits of one version
    /// share a check.
    package let revalidations = Coalescer<CacheKey, SourceVersion, Lane, Void, ImageCacheError>()
    package let negative: Lock<NegativeCache>
    /// Keys with a render-ahead running (``renderAheadIfFar(_:wholeOriginal:for:)``).
    package let renderAheads = Lock<Set<CacheKey>>([])
    package let counters = EngineCounters()
    package let metrics: EngineMetrics
    /// ``defaultTolerance``'s bits (it changes at run time through ``reconfigure(_:)``).
    package let toleranceBits: Atomic<UInt64>

    /// The tolerance of requests that name none: ``Options/defaultTolerance`` until
    /// ``reconfigure(_:)`` changes it. One relaxed atomic load.
    public var defaultTolerance: Double { Double(bitPattern: toleranceBits.load(ordering: .relaxed)) }

    /// An engine over the given tiers (each optional). `source` is where originals come from;
    /// without it only cached images are served. `pool`: the threads for every blocking job —
    /// pass the pool the tables, the source and the disk tier (its write-behind) were given to
    /// run everything on one pool (its widths become ``Options/width`` and
    /// ``Options/prefetchWidth``); `nil` starts the engine's own. The engine builds no tier, so a
    /// disk tier made without a pool keeps its own writer thread. Throws when `options` are out
    /// of range or the system refuses a thread.
    public init(
        memory: ImageMemoryTier? = ImageMemoryTier(), disk: DiskTier? = nil, tables: ImageTableCache? = nil,
        shared: (any RemoteCacheTier)? = nil, source: (any ImageSource)?, render: RenderSettings = .init(),
        options: Options = .init(), pool: BlockingPool<Void>? = nil
    ) throws(ImageCacheConfigurationError) {
        try options.validate()
        self.options = options
        self.toleranceBits = Atomic(options.defaultTolerance.bitPattern)
        self.negative = Lock(NegativeCache(capacity: options.negativeCapacity))
        self.memory = memory
        self.disk = disk
        self.tables = tables
        self.shared = shared
        self.source = source
        self.blockingSource = source as? any BlockingImageSource
        self.tiers = [memory as (any CacheTier)?, disk, tables].compactMap { $0 }
        self.lowerTiers = [disk as (any CacheTier)?, options.useTablesForMatchingRequests ? tables : nil].compactMap { $0 }
        if let pool {
            do {
                try pool.setWidths(urgent: options.width, prefetch: options.prefetchWidth)
            } catch {
                throw .init(key: "width", reason: "cannot widen the shared pool to \(options.width) threads: \(error)")
            }
            self.pool = pool
            self.ownsPool = false
        } else {
            do {
                self.pool = try BlockingPool(width: options.width, prefetchWidth: options.prefetchWidth, name: "strata-engine") {}
            } catch {
                throw .init(key: "width", reason: "cannot start \(options.width) threads: \(error)")
            }
            self.ownsPool = true
        }
        renderers = RendererStore(limit: options.width + options.prefetchWidth) { render.makeRenderer() }
        memoryBudget = MemoryBudget(limit: options.memoryLimit ?? .max)
        metrics = EngineMetrics(prefix: options.metricsPrefix, factory: options.metricsFactory)
        // Cross-process invalidation: another process sharing the disk directory deleted a
        // file (its eviction, or its engine dropping a changed original): drop our memory
        // copies of that variant too.
        disk?.observeExternalRemovals { [weak self] digest, variant in
            guard let self, let memory = self.memory else { return }
            let dropped = memory.remove(entity: digest) { $0.descriptor == variant }
            if dropped > 0 { self.counters.crossProcessInvalidations.add(dropped, ordering: .relaxed) }
        }
    }

    deinit { if ownsPool { pool.shutdown() } }

    // MARK: - Requests

    /// The image for `request` from the cheapest tier that has a variant within tolerance,
    /// else from the source (filling the tiers on the way back).
    public func image(for request: ImageRequest) async throws(ImageCacheError) -> CachedImage {
        try await image(for: request, ticket: nil)
    }

    /// ``image(for:)`` whose lane `ticket` can change while it waits (``ImageTask``).
    ///
    /// The common case, a memory hit that needs no resample and no revalidation, is served
    /// synchronously by ``servePlainMemoryHit(_:from:since:)``, straight into this function's
    /// result; everything else continues in ``image(for:after:ticket:since:)``. Inlined into
    /// ``image(for:)``: an async call costs a frame from the task's allocator, and so does each
    /// local of a type whose layout is not fixed (``CachedImage`` and ``ImageVariant`` hold a
    /// resilient `ContinuousClock.Instant`), so this function keeps none.
    @inline(__always)
    package func image(for request: ImageRequest, ticket: CoalescerTicket?) async throws(ImageCacheError) -> CachedImage {
        let started = try admitted(request)
        if let memory, !request.exactSize, options.revalidateAfter == nil {
            do throws(MemoryMiss) {
                return try servePlainMemoryHit(request, from: memory, since: started)
            } catch {
                return try await image(for: request, after: nil, ticket: ticket, since: started)
            }
        }
        return try await image(for: request, after: memoryHit(request), ticket: ticket, since: started)
    }

    /// ``image(for:)`` for a request whose memory lookup the caller has just made with
    /// ``cachedImage(for:)``: `memoryHit` is what it found. A hit is finished as ``image(for:)``
    /// finishes one (revalidation, render-ahead); a miss goes on below memory without asking
    /// memory again — one memory lookup for the request (an `exactSize` request still looks
    /// for a larger variant to resample, which ``cachedImage(for:)`` does not return).
    package func image(for request: ImageRequest, memoryHit: CachedImage?) async throws(ImageCacheError) -> CachedImage {
        let started = try admitted(request)
        let hit = memoryHit ?? (request.exactSize ? exactSizeSearch(request) : nil)
        return try await image(for: request, after: hit, ticket: nil, since: started)
    }

    /// The memory tier's best variant for `request`, or `nil`. Synchronous and non-blocking:
    /// a hash lookup and a scan of the key's variants under the memory tier's lock; allocates
    /// nothing on a miss. Never resamples (`exactSize` is honoured by returning only an exact
    /// match). A hit far from the box starts a render-ahead when ``Options/renderAhead`` is set
    /// (one more lock and a detached task, once per key while it runs).
    public func cachedImage(for request: ImageRequest) -> CachedImage? {
        guard let memory else { return nil }
        let query = request.query(defaultTolerance: defaultTolerance)
        guard let (image, variant) = memory.entry(forKey: request.key, matching: query) else {
            return nil
        }
        renderAheadIfFar(variant.descriptor, wholeOriginal: variant.isWholeOriginal, for: request)
        return CachedImage(image: image, variant: variant, tier: .memory)
    }

    /// Counts a request that a server answered from memory without ``image(for:)`` — its fast
    /// path found the variant with ``cachedImage(for:)`` and served it — as ``image(for:)``
    /// would have counted it (a request, served by memory). Two atomic adds and a timer.
    public func countMemoryHit() {
        counters.requests.add(1, ordering: .relaxed)
        record(.memory, since: Self.monotonicNanoseconds())
    }

    /// Counts `request` and checks it (a refusal is counted as a failure); returns when it
    /// started (``monotonicNanoseconds()``).
    @inline(__always)
    package func admitted(_ request: ImageRequest) throws(ImageCacheError) -> Int64 {
        let started = Self.monotonicNanoseconds()
        counters.requests.add(1, ordering: .relaxed)
        do {
            try validate(request)
        } catch {
            countFailure(error)
            throw error
        }
        return started
    }

    package func validate(_ request: ImageRequest) throws(ImageCacheError) {
        let key = request.key.string
        if request.box.width <= 0 || request.box.height <= 0 {
            throw .invalidRequest(key: key, reason: "the box \(request.box) is empty")
        }
        if let t = request.tolerance, !(0...1).contains(t) {
            throw .invalidRequest(key: key, reason: "tolerance \(t) is outside 0...1")
        }
        if let t = request.upscaleTolerance, !(0...1).contains(t) {
            throw .invalidRequest(key: key, reason: "upscale tolerance \(t) is outside 0...1")
        }
        if key.isEmpty { throw .invalidRequest(key: key, reason: "the key is empty") }
    }

    // MARK: - Removal and statistics

    /// Drops every variant of `key` from every tier: memory, the disk files, the table entries
    /// (and a remembered "not found"). The file work runs on the engine's threads, never on the
    /// caller's.
    public func remove(key: CacheKey) async {
        await remove(keys: [key])
    }

    /// Drops every variant of each of `keys` from every tier, as ``remove(key:)`` does, with
    /// the tiers below memory in one job: for a purge that reaches every derived key of a
    /// source key (``/StrataBase/CacheKey/allDerived(from:)``).
    ///
    /// A plain source key (no derived part) also takes the variants of every key with operations
    /// derived from it (``/StrataBase/CacheKey/init(_:colour:gravity:operations:)``), which no list
    /// of keys can name: memory and disk find them by their identity's family, the shared tier in
    /// the original's folder.
    public func remove(keys: [CacheKey]) async {
        guard let first = keys.first else { return }
        let sources = keys.filter { !$0.string.utf8.contains(0) }.map(\.string)
        for key in keys { memory?.remove(key: key) }
        for source in sources { memory?.removeFamily(of: ImageEntityID(hashing: source)) }
        negative.withLock { negative in for key in keys { negative.remove(key) } }
        await removeFromShared(keys)
        let below = tiers.filter { $0.servingTier != .memory }
        guard !below.isEmpty else { return }
        let failures = await onPoolOrHere(first) { Self.remove(keys, operationsOf: sources, from: below) }
        for failure in failures { tierFailed(failure) }
    }

    /// Deletes `keys` from the shared tier, if there is one (a purge reaches the fleet's store).
    package func removeFromShared(_ keys: [CacheKey]) async {
        guard let shared else { return }
        do throws(TierFailure) { try await shared.remove(keys) } catch { tierFailed(error) }
    }

    /// Drops `keys` from each of `tiers` (blocking), trying every one; the failures, for the
    /// caller to count and log.
    package static func remove(_ keys: [CacheKey], operationsOf sources: [String] = [], from tiers: [any CacheTier]) -> [TierFailure] {
        var failures: [TierFailure] = []
        for key in keys {
            for tier in tiers {
                do throws(TierFailure) { try tier.remove(key) } catch { failures.append(error) }
            }
        }
        for source in sources {
            for tier in tiers {
                do throws(TierFailure) { try tier.removeOperationVariants(of: source) } catch { failures.append(error) }
            }
        }
        return failures
    }

    /// Drops `key` from every tier below memory (each tier's ``CacheTier/remove(_:)``), in one
    /// job (``onPoolOrHere(_:_:)``): a removal is never skipped.
    package func removeBelowMemory(_ key: CacheKey) async {
        await removeFromShared([key])
        let below = tiers.filter { $0.servingTier != .memory }
        guard !below.isEmpty else { return }
        let failures = await onPoolOrHere(key) { Self.remove([key], from: below) }
        for failure in failures { tierFailed(failure) }
    }

    /// Blocking file work that must not be skipped: on the engine's threads, urgent lane — or,
    /// should the pool refuse the job (the engine shut down, the task cancelled while it
    /// waited), on this thread.
    package func onPoolOrHere<T: Sendable>(_ key: CacheKey, _ body: @escaping @Sendable () -> T) async -> T {
        do {
            return try await onPool(key, lane: FlightLane(.urgent), body)
        } catch {
            return body()
        }
    }

    /// Drops everything from every tier. The disk directory is emptied on the engine's threads.
    public func removeAll() async throws(ImageCacheError) {
        memory?.removeAll()
        negative.withLock { $0.removeAll() }
        if let disk {
            let emptied = await onPoolOrHere(Self.unkeyed) { Result { () throws(DiskTierError) in try disk.removeAll() } }
            if case .failure(let error) = emptied {
                throw .tier(TierFailure(tier: .disk, key: "", reason: "cannot empty the directory: \(error)"))
            }
        }
        if let tables {
            for format in tables.formats {
                do {
                    try await tables.reset(formatName: format.name)
                } catch {
                    throw .tier(TierFailure(tier: .table, key: "", reason: "cannot reset table \(format.name): \(error)"))
                }
            }
        }
    }

    /// Sets the swift-metrics gauges (bytes, entries and evictions per tier, queue depth per
    /// lane) from the tiers' statistics. Cheap (one statistics read per tier); call it
    /// periodically or before a scrape.
    public func publishGauges() {
        for tier in tiers {
            let stats = tier.tierStatistics
            metrics.bytes[tier.servingTier]?.record(stats.bytes)
            metrics.entries[tier.servingTier]?.record(stats.entries)
            metrics.evictions[tier.servingTier]?.record(stats.evictions)
        }
        if let shared {
            let stats = shared.tierStatistics
            metrics.bytes[shared.servingTier]?.record(stats.bytes)
            metrics.entries[shared.servingTier]?.record(stats.entries)
        }
        let queues = pool.queueDepths
        metrics.queueUrgent.record(queues.urgent)
        metrics.queuePrefetch.record(queues.prefetch)
    }

    /// Runs `body` on the engine's threads in `lane`, counted toward that lane's width: for CPU
    /// work that belongs beside the engine's renders (a service's encodes) rather than on the
    /// Swift concurrency pool, which also answers the memory hits. `body`'s own error comes
    /// back as the result's failure; the call throws ``ImageCacheError/cancelled(key:)`` when
    /// the task is cancelled before a thread takes the job, ``ImageCacheError/shutDown`` after
    /// the engine was shut down.
    public func runOnEngineThreads<T: Sendable, E: Error>(
        lane: Lane = .urgent, _ body: @escaping @Sendable () throws(E) -> T
    ) async throws(ImageCacheError) -> Result<T, E> {
        try await onPool(Self.unkeyed, lane: FlightLane(lane)) { () -> Result<T, E> in
            Result { () throws(E) -> T in try body() }
        }
    }

    /// Decodes and resamples `bytes` for `request` with the engine's renderers on its threads,
    /// keeping nothing and counting nothing: a health check's proof that the render path works
    /// (the caches bypassed).
    public func renderUncached(_ bytes: [UInt8], request: RenderRequest) async throws(ImageCacheError) -> PixelImage {
        let outcome = try await onPool(Self.unkeyed, lane: FlightLane(.urgent)) { [renderers, pool] in
            renderers.withRenderer(pool: pool) { renderer in
                Result { () throws(ImageDecodingError) in try renderer.render(bytes, request: request) }
            }
        }
        do {
            return try outcome.get()
        } catch {
            throw .decoding(key: "(health check)", error)
        }
    }

    /// The key of work that has none (``runOnEngineThreads(lane:_:)``'s errors name no key).
    package static let unkeyed = CacheKey("")

    /// Jobs waiting (not yet running) in each lane: what a service compares with its bound to
    /// shed load. Cheap: one lock, two counts.
    public var queueDepths: (urgent: Int, prefetch: Int) { pool.queueDepths }

    /// Per-tier and engine counters.
    public var statistics: ImageCacheStatistics {
        var byTier: [ServingTier: TierStatistics] = [:]
        for tier in tiers { byTier[tier.servingTier] = tier.tierStatistics }
        if let shared { byTier[shared.servingTier] = shared.tierStatistics }
        var engine = counters.snapshot()
        (engine.negativeKeys, engine.negativeDisplaced) = negative.withLock { ($0.count, $0.displaced) }
        return ImageCacheStatistics(
            engine: engine, tiers: byTier, memory: memory?.statistics, disk: disk?.statistics,
            queues: pool.queueDepths)
    }
}

/// An engine setting out of range (see ``/StrataBase/ConfigurationError``).
public typealias ImageCacheConfigurationError = ConfigurationError
