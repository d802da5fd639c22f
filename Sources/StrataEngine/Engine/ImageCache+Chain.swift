import StrataBase
import StrataCodecs
import StrataTiers
#if canImport(Glibc)
import Glibc
#endif
import Logging
import Metrics
import Tracing

/// The memory tier has no variant for a request (``ImageCache/servePlainMemoryHit(_:from:since:)``).
package struct MemoryMiss: Error {}

/// The first request of a flight (flights are grouped by ``CacheKey``): what it asked for.
package struct FlightDescriptor: Sendable {
    package var box: PixelSize
    package var mode: ContentMode
    package var style: PixelStyle
    package var allowUpscale: Bool

    /// Whether a request may join: the same mode, style and upscaling, and a box whose render
    /// answers it within `query` (the joiner's own tolerances), whatever the original's aspect.
    /// For `fit`, the render of a box W₁×H₁ has the fill ratio s₁/s₂ in a box W₂×H₂ (sᵢ: the
    /// scale that fits the original in box i), which lies between W₁/W₂ and H₁/H₂: both must be
    /// within the tolerances. A box of one side (the other unbounded, the same in both) compares
    /// that side alone; comparing the boxes as if they were variants let `w=42` and `w=55` share
    /// one render. For `fill`, the render is the box itself.
    package func accepts(_ request: ImageRequest, within query: SizeQuery) -> Bool {
        guard request.mode == mode, request.style == style, request.allowUpscale == allowUpscale else { return false }
        switch mode {
        case .fit:
            return query.accepts(Double(box.width) / Double(request.box.width))
                && query.accepts(Double(box.height) / Double(request.box.height))
        case .fill:
            return VariantMatcher.matches(VariantDescriptor(size: box, mode: mode, style: style), query)
        }
    }
}

extension ImageCache {
    // MARK: Memory

    /// The memory tier's answer: an exact-tolerance hit, or (for `exactSize`) a larger variant
    /// within tolerance that ``finish(_:for:)`` resamples.
    package func memoryHit(_ request: ImageRequest) -> CachedImage? {
        guard let memory else { return nil }
        let key = request.key
        let query = request.query(defaultTolerance: defaultTolerance)
        if let (image, variant) = memory.entry(forKey: key, matching: query) {
            return CachedImage(image: image, variant: variant, tier: .memory)
        }
        guard request.exactSize else { return nil }
        return exactSizeSearch(request)
    }

    /// ``memoryHit(_:)`` asked again by a flight's leader before it renders, for a request whose
    /// miss is counted already (``ImageMemoryTier/entryAgain(forKey:matching:)``).
    package func memoryHitAgain(_ request: ImageRequest) -> CachedImage? {
        guard let memory else { return nil }
        guard let (image, variant) = memory.entryAgain(forKey: request.key, matching: lookupQuery(request)),
            !request.exactSize || Self.canResample(variant, to: request)
        else { return nil }
        return CachedImage(image: image, variant: variant, tier: .memory)
    }

    /// For an `exactSize` request: a larger variant within tolerance that ``finish(_:for:lane:)``
    /// resamples to the box, or `nil`.
    package func exactSizeSearch(_ request: ImageRequest) -> CachedImage? {
        guard let memory else { return nil }
        let search = request.searchQuery(defaultTolerance: defaultTolerance)
        guard let (image, variant) = memory.entry(forKey: request.key, matching: search),
            Self.canResample(variant, to: request)
        else { return nil }
        return CachedImage(image: image, variant: variant, tier: .memory)
    }

    /// A request after its memory lookup (``image(for:ticket:)``): a memory hit to finish
    /// (resample, revalidate), or the tiers below memory. A request without a handle asks them
    /// before any flight, and a hit is served outside it (one thread hop at most instead of
    /// three); a request with a handle keeps its flight, whose lane the handle moves.
    ///
    /// Never inlined: inlined into ``image(for:)``, its locals (and those of everything it
    /// inlines) would size the frame that every memory hit allocates from the task's allocator;
    /// past the allocator's first slab that frame costs a `malloc` (measured: 150 ns a hit).
    @inline(never)
    package func image(
        for request: ImageRequest, after hit: CachedImage?, ticket: CoalescerTicket?, since started: Int64
    ) async throws(ImageCacheError) -> CachedImage {
        do {
            let served: CachedImage
            if let hit {
                served = try await finish(hit, for: request)
            } else {
                try checkNegative(request.key)
                if ticket == nil, let direct = try await lowerTierHit(request, lane: FlightLane(request.priority), direct: true) {
                    served = direct
                } else {
                    // A request without a handle has just asked every tier below memory.
                    served = try await throughFlight(request, ticket: ticket, lowerTiersAsked: ticket == nil)
                }
            }
            record(served.tier, since: started)
            return served
        } catch {
            countFailure(error)
            throw error
        }
    }

    /// Counts a failed request (engine statistics and metrics).
    package func countFailure(_ error: ImageCacheError) {
        counters.countError(error)
        metrics.error(error)
    }

    /// Whether `variant` can be resampled down to `request`'s exact size (it is not smaller).
    /// Never for a key whose operations filter the output (a blur resampled is another blur).
    package static func canResample(_ variant: ImageVariant, to request: ImageRequest) -> Bool {
        if request.key.string.utf8.contains(0), request.key.operations.filtersOutput { return false }
        guard
            let q = variant.fillRatio(
                for: SizeQuery(box: request.box, mode: request.mode, style: request.style, allowUpscale: request.allowUpscale))
        else {
            return false
        }
        return q >= 1
    }

    /// Completes a hit for `request`: resamples a larger variant to the exact box when the
    /// request asks for `exactSize` (and keeps the result in memory), and starts a background
    /// revalidation when the variant is older than ``Options/revalidateAfter`` or read from the
    /// disk tier, a table or the shared tier (whose objects do not keep the fetch time: a hit there is as young as
    /// the read, so a variant that memory keeps evicting would never be checked — found by
    /// Scripts/soak.sh serving a replaced original's old version for minutes), and a render-ahead
    /// when it is far from the box (``Options/renderAhead``).
    package func finish(_ hit: CachedImage, for request: ImageRequest, lane: FlightLane? = nil) async throws(ImageCacheError) -> CachedImage
    {
        if let limit = options.revalidateAfter, hit.age > limit || hit.tier == .disk || hit.tier == .table || hit.tier == .shared {
            scheduleRevalidation(request.key, cached: hit.sourceVersion)
        }
        renderAheadIfFar(hit.variant.descriptor, wholeOriginal: hit.variant.isWholeOriginal, for: request)
        guard request.exactSize else { return hit }
        let plan = SizingPlan(source: hit.image.size, box: request.box, mode: request.mode, allowUpscale: request.allowUpscale)
        if plan.output == hit.image.size { return hit }
        let source = hit.image, box = request.box, mode = request.mode
        let jobLane = lane ?? FlightLane(request.priority)
        let parent = traceParent
        let outputBytes = PixelLayout.bytesPerRow(width: plan.output.width, style: source.style) * plan.output.height
        let key = request.key
        let resized = try await onPool(request.key, lane: jobLane) { [renderers, pool, memoryBudget] () throws(ImageCacheError) in
            let span = Spans.start("strata.resample", parent: parent)
            span?.attributes["strata.size.from"] = "\(source.size)"
            span?.attributes["strata.size.to"] = "\(box)"
            defer { span?.end() }
            do throws(MemoryBudgetFailure<Never>) {
                return try memoryBudget.withReservation(outputBytes, lane: jobLane.lane) { () throws(Never) in
                    renderers.withRenderer(pool: pool, lane: jobLane.lane) { $0.resize(source, box: box, mode: mode) }
                }
            } catch {
                guard case .refused(let refusal) = error else { preconditionFailure("a resample cannot fail") }
                throw .overMemoryLimit(key: key.string, refusal)
            }
        }
        counters.resamples.add(1, ordering: .relaxed)
        let variant = ImageVariant(
            descriptor: VariantDescriptor(size: resized.size, mode: request.mode, style: resized.style),
            sourceVersion: hit.sourceVersion, isWholeOriginal: false, fetchedAt: hit.variant.fetchedAt,
            isAnimatedOriginal: hit.variant.isAnimatedOriginal)
        memory?.insert(resized, forKey: request.key, variant: variant)
        return CachedImage(image: resized, variant: variant, tier: hit.tier)
    }

    /// Counts a request served by `tier` and records its latency since `started`
    /// (``monotonicNanoseconds()``).
    package func record(_ tier: ServingTier, since started: Int64) {
        counters.served(tier)
        metrics.served[tier]?.increment()
        metrics.lookups[tier]?.recordNanoseconds(Self.monotonicNanoseconds() - started)
    }

    /// `MonotonicClock`'s nanoseconds (StrataBase), for request latencies.
    package static func monotonicNanoseconds() -> Int64 { MonotonicClock.nanoseconds() }

    /// A memory hit that needs no resample and no revalidation, recorded and built in the
    /// caller's result; throws ``MemoryMiss`` (a fixed-size error) on a miss. Never inlined:
    /// inlined into an async caller, its locals would each be a task allocation there.
    @inline(never)
    package func servePlainMemoryHit(
        _ request: ImageRequest, from memory: ImageMemoryTier, since started: Int64
    ) throws(MemoryMiss)
        -> CachedImage
    {
        let query = request.query(defaultTolerance: defaultTolerance)
        guard let (image, variant) = memory.entry(forKey: request.key, matching: query)
        else { throw MemoryMiss() }
        renderAheadIfFar(variant.descriptor, wholeOriginal: variant.isWholeOriginal, for: request)
        record(.memory, since: started)
        return CachedImage(image: image, variant: variant, tier: .memory)
    }

    // MARK: Negative cache

    package func checkNegative(_ key: CacheKey) throws(ImageCacheError) {
        guard options.negativeTTL > .zero else { return }
        let now = ContinuousClock.now
        if negative.withLock({ $0.contains(key, now: now) }) {
            counters.negativeHits.add(1, ordering: .relaxed)
            throw .notFound(key: key.string)
        }
    }

    package func rememberMissing(_ key: CacheKey) {
        guard options.negativeTTL > .zero else { return }
        let now = ContinuousClock.now
        let until = now + options.negativeTTL
        negative.withLock { $0.insert(key, until: until, now: now) }
    }

    // MARK: The chain below memory, shared by identical requests

    /// Joins or starts the flight for `request`. `lowerTiersAsked`: the request has asked every
    /// tier below memory just before (``lowerTierHit(_:lane:direct:)``), so a flight it starts
    /// goes to the render at once — one lookup per tier per request.
    /// `mayJoin` false: a flight of its own (a joined flight's answer did not serve it).
    package func throughFlight(
        _ request: ImageRequest, ticket: CoalescerTicket?, lowerTiersAsked: Bool = false, mayJoin: Bool = true
    ) async throws(ImageCacheError) -> CachedImage {
        let descriptor = FlightDescriptor(
            box: request.box, mode: request.mode, style: request.style, allowUpscale: request.allowUpscale)
        // What this request may be answered with by another's flight: within its tolerance, or
        // for `exactSize` a variant at least as large, within its search tolerance, to resample.
        let ownQuery = request.query(defaultTolerance: defaultTolerance)
        var joinQuery = ownQuery
        if request.exactSize {
            joinQuery = request.searchQuery(defaultTolerance: defaultTolerance)
            joinQuery.upscaleTolerance = 0
        }
        let outcome: (value: CachedImage, joined: Bool)
        // The flight's span: the leader's work runs under it; a request that joins another's
        // flight has one too (`strata.flight.joined`), spanning its wait.
        let span = keySpan("strata.flight", key: request.key, parent: traceParent)
        span?.attributes["strata.box"] = "\(request.box)"
        span?.attributes["strata.mode"] = "\(request.mode)"
        defer { span?.end() }
        let flightContext = span?.context
        do {
            outcome = try await flights.run(
                group: request.key, descriptor: descriptor, priority: request.priority,
                joining: { mayJoin && $0.accepts(request, within: joinQuery) }, ticket: ticket,
                work: { [self] operation async throws(ImageCacheError) -> CachedImage in
                    try await Spans.within(flightContext) { () async throws(ImageCacheError) -> CachedImage in
                        try await fetch(request, operation: operation, lowerTiersAsked: lowerTiersAsked)
                    }
                })
            span?.attributes["strata.flight.joined"] = outcome.joined
        } catch {
            span?.attributes["strata.outcome"] = "error"
            switch error {
            case .cancelled: throw .cancelled(key: request.key.string)
            case .failed(let error): throw error
            }
        }
        if !outcome.joined {
            counters.flights.add(1, ordering: .relaxed)
        } else {
            counters.coalesced.add(1, ordering: .relaxed)
            metrics.coalesced.increment()
            // The flight answered its first request; an exact request resamples from it.
            if request.exactSize, Self.canResample(outcome.value.variant, to: request) {
                return try await finish(outcome.value, for: request)
            }
            // A flight's answer is within its first request's tolerance (a hit of a lower tier
            // may be anywhere in it): one outside this request's own starts a flight of its own.
            if !outcome.value.variant.matches(ownQuery) {
                return try await throughFlight(request, ticket: ticket, mayJoin: false)
            }
        }
        return outcome.value
    }

    /// Memory once more, the tiers below it, then one render, for one flight. Its blocking work
    /// runs in the lane of its highest waiter, and moves when that changes.
    package func fetch(
        _ request: ImageRequest, operation: CoalescedOperation<Lane>, lowerTiersAsked: Bool
    ) async throws(ImageCacheError) -> CachedImage {
        let lane = FlightLane(operation)
        // A flight of the same key that ended after this request's memory lookup (and before
        // this flight began) has left its variant in memory: served from there, not rendered
        // twice (found by concurrent requests under ASan: one render more than flights). The
        // request's miss was counted already.
        if let hit = memoryHitAgain(request) { return try await finish(hit, for: request, lane: lane) }
        if !lowerTiersAsked, let hit = try await lowerTierHit(request, lane: lane, direct: false) { return hit }
        return try await render(request, lane: lane)
    }

    /// The query every tier is asked for `request`: its tolerance, or for `exactSize` its upper
    /// tolerance (a larger variant is resampled).
    package func lookupQuery(_ request: ImageRequest) -> SizeQuery {
        request.exactSize
            ? request.searchQuery(defaultTolerance: defaultTolerance) : request.query(defaultTolerance: defaultTolerance)
    }

    /// The tiers below memory, in order, each asked once: a hit that needs no I/O is served on
    /// the calling thread (`DiskTier`: name in the dentry cache, bytes in the page cache, no
    /// checksum to verify; a table entry already verified), one that would wait is loaded on the
    /// engine's threads in `lane`. The first hit is promoted to memory (promotion, written once)
    /// and finished (``finish(_:for:lane:)``). `nil` when every tier misses — or a hit vanished,
    /// failed its checks, or cannot be resampled to an `exactSize` request. A `direct` request
    /// (outside any flight) cancelled meanwhile throws ``ImageCacheError/cancelled(key:)``.
    package func lowerTierHit(_ request: ImageRequest, lane: FlightLane, direct: Bool) async throws(ImageCacheError) -> CachedImage? {
        guard !lowerTiers.isEmpty || shared != nil else { return nil }
        let key = request.key, query = lookupQuery(request)
        let parent = traceParent
        for tier in lowerTiers {
            let found: CachedImage?
            // One span per tier asked (`strata.outcome`: hit, miss, loaded — a hit that needed
            // I/O —, missed after a load, or unusable).
            let span = keySpan("strata.tier.lookup", key: key, parent: parent)
            span?.attributes["strata.tier"] = tier.servingTier.rawValue
            defer { span?.end() }
            counters.lookedUp(tier.servingTier)
            switch tier.lookup(key, query) {
            case .hit(let hit):
                found = hit
                span?.attributes["strata.outcome"] = "hit"
            case .miss:
                found = nil
                span?.attributes["strata.outcome"] = "miss"
            case .wouldWait:
                counters.lookedUp(tier.servingTier)
                let loaded = try await onPool(key, lane: lane, parent: span?.context) {
                    Result { () throws(TierFailure) in try tier.load(key, query) }
                }
                switch loaded {
                case .success(let hit):
                    found = hit
                    span?.attributes["strata.outcome"] = hit == nil ? "miss.loaded" : "loaded"
                case .failure(let failure):
                    // The tier's files failed: counted and logged, and the request goes on below.
                    tierFailed(failure)
                    found = nil
                    span?.attributes["strata.outcome"] = "failed"
                }
            }
            guard let found else {
                metrics.misses[tier.servingTier]?.increment()
                continue
            }
            span?.attributes["strata.size"] = "\(found.variant.size)"
            if request.exactSize, found.variant.size != request.box, !Self.canResample(found.variant, to: request) {
                span?.attributes["strata.outcome"] = "unusable"
                continue
            }
            if direct, Task.isCancelled { throw .cancelled(key: key.string) }
            memory?.store(found.image, key: key, variant: found.variant)
            return try await finish(found, for: request, lane: lane)
        }
        return try await sharedTierHit(request, key: key, query: query, lane: lane, parent: parent)
    }

    /// The one render of a flight: through the image tables when a table format is within
    /// tolerance of the box (one decode fills the format's whole family), else from the source.
    package func render(_ request: ImageRequest, lane: FlightLane) async throws(ImageCacheError) -> CachedImage {
        // The tables hold plain variants only: a key with operations renders from the source.
        if let tables, options.useTablesForMatchingRequests, !request.key.string.utf8.contains(0) || request.key.operations.isEmpty,
            let format = tables.format(for: lookupQuery(request))
        {
            return try await finish(tableFill(request, format: format, lane: lane), for: request, lane: lane)
        }
        return try await sourceRender(request, lane: lane)
    }

    /// Keeps a rendered variant in every tier that takes write-back (memory at once, disk
    /// write-behind; the tables hold only what their family draws, ``tableFill``): written once.
    ///
    /// The first frame of an animation is kept in memory only: no other tier keeps the flag that
    /// says it is one (``/StrataBase/ImageVariant/isAnimatedOriginal``), so none may answer for it.
    package func writeBack(_ image: PixelImage, key: CacheKey, variant: ImageVariant) {
        memory?.store(image, key: key, variant: variant)
        guard !variant.isAnimatedOriginal else { return }
        disk?.store(image, key: key, variant: variant)
        shared?.store(image, key: key, variant: variant)
    }

    /// A tier's I/O failure the request went on without: counted
    /// (`_tier_errors_total{tier}`) and logged with the tier, the key and the call.
    package func tierFailed(_ failure: TierFailure) {
        metrics.tierErrors[failure.tier]?.increment()
        options.logger.warning(
            "a tier failed; serving on without it",
            metadata: ["tier": "\(failure.tier)", "key": "\(failure.key)", "error": "\(failure.reason)"])
    }

    /// The source: fetch and render on the engine's threads, write back to every tier. A
    /// ``BlockingImageSource`` (a directory) is read in the render's own job: one hop to the
    /// engine's threads for the read, the decode and the resample.
    package func sourceRender(_ request: ImageRequest, lane: FlightLane) async throws(ImageCacheError) -> CachedImage {
        guard source != nil else { throw .noSource(key: request.key.string) }
        let key = request.key, renderRequest = request.renderRequest
        let parent = traceParent
        let rendered: (image: PixelImage, originalSize: PixelSize, isAnimated: Bool, version: String)
        if let files = blockingSource {
            countFetch()
            rendered = try await onPool(key, lane: lane) { [self] () throws(ImageCacheError) in
                let data = try fetchBlocking(key, from: files, parent: parent)
                let (image, originalSize, isAnimated) = try renderOriginal(
                    data.bytes, key: key, request: renderRequest, lane: lane, parent: parent)
                return (image, originalSize, isAnimated, data.version)
            }
        } else {
            let data = try await fetchOriginal(key, lane: lane)
            let bytes = data.bytes
            let (image, originalSize, isAnimated) = try await onPool(key, lane: lane) { [self] () throws(ImageCacheError) in
                try renderOriginal(bytes, key: key, request: renderRequest, lane: lane, parent: parent)
            }
            rendered = (image, originalSize, isAnimated, data.version)
        }
        let image = rendered.image
        let variant = ImageVariant(
            descriptor: VariantDescriptor(size: image.size, mode: request.mode, style: image.style),
            sourceVersion: SourceVersion(token: rendered.version),
            isWholeOriginal: request.mode == .fit && !request.allowUpscale && image.size == rendered.originalSize,
            isAnimatedOriginal: rendered.isAnimated)
        writeBack(image, key: key, variant: variant)
        options.logger.debug(
            "rendered from the source", metadata: ["key": "\(key)", "tier": "source", "size": "\(image.size)"])
        return CachedImage(image: image, variant: variant, tier: .source)
    }

    /// The smart crop's focus from a small `fit` variant of the centred key that memory holds
    /// (about ``Saliency/mapSide`` pixels a side, any size from 0.5× to 2× of it), or `nil`: the
    /// renderer then chooses it from its own decode. A hit costs one memory lookup and a
    /// saliency map; the original is never decoded for it.
    package func heldSmartFocus(_ key: CacheKey, request: RenderRequest) -> CropFocus? {
        guard let memory else { return nil }
        let side = Saliency.mapSide
        let query = SizeQuery(box: PixelSize(width: side, height: side), mode: .fit, style: .default, tolerance: 0.5)
        guard let (small, _) = memory.image(forKey: key.centred, matching: query) else { return nil }
        // The crop's share of each side as the render will plan it (the small variant has the
        // original's aspect).
        return Saliency.focus(of: small, forFillOf: request.box)
    }

    /// Counts one source fetch.
    package func countFetch() {
        counters.sourceFetches.add(1, ordering: .relaxed)
        metrics.sourceFetches.increment()
    }

    /// Fetches `key`'s original from the engine's source (counted and timed) — a
    /// ``BlockingImageSource`` on the engine's threads, in `lane`; a missing one is remembered
    /// for the negative TTL.
    package func fetchOriginal(_ key: CacheKey, lane: FlightLane, prefix: Int? = nil) async throws(ImageCacheError) -> SourceData {
        guard let source else { throw .noSource(key: key.string) }
        countFetch()
        let parent = traceParent
        if let files = blockingSource {
            return try await onPool(key, lane: lane) { [self] () throws(ImageCacheError) in
                try fetchBlocking(key, from: files, parent: parent, prefix: prefix)
            }
        }
        let fetchStart = ContinuousClock.now
        let data: SourceData
        // The source's own spans (an HTTP origin's request) are this span's children.
        let span = keySpan("strata.source.fetch", key: key, parent: parent)
        do {
            data = try await Spans.around(span) { () async throws(SourceError) -> SourceData in
                let data =
                    if let prefix {
                        try await source.fetchPrefix(key: key.sourceKey, maxBytes: prefix)
                    } else {
                        try await source.fetch(key: key.sourceKey)
                    }
                span?.attributes["strata.bytes"] = data.bytes.count
                span?.attributes["strata.outcome"] = "fetched"
                return data
            }
        } catch {
            span?.attributes["strata.outcome"] = "\(error.reason)"
            if case .notFound = error.reason { rememberMissing(key) }
            throw ImageCacheError(error)
        }
        metrics.sourceFetch.recordInterval(since: fetchStart)
        if Task.isCancelled { throw .cancelled(key: key.string) }
        return data
    }

    /// Reads `key` (its first `prefix` bytes when given) from a blocking source on the calling
    /// thread (one of the engine's), timed; a missing original is remembered for the negative
    /// TTL.
    package func fetchBlocking(
        _ key: CacheKey, from source: any BlockingImageSource, parent: ServiceContext? = nil, prefix: Int? = nil
    ) throws(ImageCacheError) -> SourceData {
        let fetchStart = ContinuousClock.now
        let span = keySpan("strata.source.fetch", key: key, parent: parent)
        defer { span?.end() }
        do {
            let data: SourceData
            if let prefix {
                data = try source.fetchPrefixBlocking(key: key.sourceKey, maxBytes: prefix)
            } else {
                data = try source.fetchBlocking(key: key.sourceKey)
            }
            metrics.sourceFetch.recordInterval(since: fetchStart)
            span?.attributes["strata.bytes"] = data.bytes.count
            span?.attributes["strata.outcome"] = "fetched"
            return data
        } catch {
            span?.attributes["strata.outcome"] = "\(error.reason)"
            if case .notFound = error.reason { rememberMissing(key) }
            throw ImageCacheError(error)
        }
    }

    /// Runs blocking `body` on the engine's threads in `lane`: the engine's one mapping of the
    /// pool's errors (queued and cancelled → ``ImageCacheError/cancelled(key:)``, shut down →
    /// ``ImageCacheError/shutDown``, `body`'s own error as it threw it).
    ///
    /// With tracing on, the wait for a thread is a span (`strata.lane.wait`) under `parent` (the
    /// task's current context when `nil`).
    package func onPool<T: Sendable>(
        _ key: CacheKey, lane: FlightLane, parent: ServiceContext? = nil,
        _ body: @escaping @Sendable () throws(ImageCacheError) -> T
    ) async throws(ImageCacheError) -> T {
        let ticket = lane.ticket()
        let wait = options.tracing.isEnabled ? Spans.start("strata.lane.wait", parent: parent ?? traceParent) : nil
        do {
            guard let wait else { return try await pool.run(lane: ticket.lane, ticket: ticket, body) }
            wait.attributes["strata.lane"] = ticket.lane == .urgent ? "urgent" : "prefetch"
            return try await pool.run(lane: ticket.lane, ticket: ticket) { () throws(ImageCacheError) -> T in
                wait.end()
                return try body()
            }
        } catch {
            if let wait {
                switch error {
                case .failed: break  // the job ran, and ended the wait
                case .cancelled, .shutDown:
                    wait.attributes["strata.outcome"] = "\(error)"
                    wait.end()
                }
            }
            throw error.resolved(cancelled: .cancelled(key: key.string), shutDown: .shutDown)
        }
    }

    /// ``onPool(_:lane:_:)`` for work that cannot fail.
    package func onPool<T: Sendable>(
        _ key: CacheKey, lane: FlightLane, parent: ServiceContext? = nil, _ body: @escaping @Sendable () -> T
    ) async throws(ImageCacheError) -> T {
        try await onPool(key, lane: lane, parent: parent) { () throws(ImageCacheError) -> T in body() }
    }
}

/// The lane of one flight's blocking work: the highest lane among its waiters, followed as it
/// changes (an urgent request joining a prefetch moves the queued job to the urgent lane; the
/// last urgent waiter leaving moves it back).
package final class FlightLane: Sendable {
    private let current: Lock<(lane: Lane, ticket: LaneTicket?)>

    /// Follows `operation`'s priority.
    package init(_ operation: CoalescedOperation<Lane>) {
        current = Lock((.urgent, nil))
        // Moves happen under `current`'s lock, so a change and a new ticket never cross.
        operation.onPriorityChange { [current] lane in
            current.withLock { state in
                state.lane = lane
                state.ticket?.move(to: lane)
            }
        }
        let lane = operation.priority
        current.withLock { $0.lane = lane }
    }

    /// A fixed lane (work outside a flight).
    package init(_ lane: Lane) { current = Lock((lane, nil)) }

    /// The lane now: inside a job, the lane the job runs in (a job's helpers join it there).
    package var lane: Lane { current.withLock { $0.lane } }

    /// A ticket for the next job, in the current lane; later priority changes move it.
    package func ticket() -> LaneTicket {
        let ticket = LaneTicket()
        current.withLock { state in
            state.ticket = ticket
            ticket.move(to: state.lane)
        }
        return ticket
    }
}

extension Timer {
    /// Records the time since `start`.
    package func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}
