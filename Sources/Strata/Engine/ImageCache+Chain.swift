import Logging
import Metrics

/// Requests that may share one piece of work: same key, mode, style and upscaling.
struct FlightGroup: Hashable, Sendable {
    var key: CacheKey
    var mode: ContentMode
    var style: PixelStyle
    var allowUpscale: Bool
}

/// The first request of a flight: the box it asked for and its tolerance.
struct FlightDescriptor: Sendable {
    var box: PixelSize
    var tolerance: Double

    /// Whether a request for `box` may join: its box is within this flight's tolerance of the
    /// flight's box (the flight's result is then within tolerance of what it asked for).
    func accepts(_ other: PixelSize, mode: ContentMode) -> Bool {
        VariantMatcher.matches(VariantDescriptor(size: box, mode: mode), SizeQuery(box: other, mode: mode, tolerance: tolerance))
    }
}

extension ImageCache {
    // MARK: Memory

    /// The memory tier's answer: an exact-tolerance hit, or (for `exactSize`) a larger variant
    /// within tolerance that ``finish(_:for:)`` resamples.
    func memoryHit(_ request: ImageRequest) -> CachedImage? {
        guard let memory else { return nil }
        let key = request.key.string
        let query = request.query(defaultTolerance: options.defaultTolerance)
        if let (image, variant) = memory.entry(forKey: key, matching: query, allowUpscale: request.allowUpscale) {
            return CachedImage(image: image, variant: variant, tier: .memory)
        }
        guard request.exactSize else { return nil }
        let search = request.searchQuery(defaultTolerance: options.defaultTolerance)
        guard let (image, variant) = memory.entry(forKey: key, matching: search, allowUpscale: request.allowUpscale),
            Self.canResample(variant, to: request)
        else { return nil }
        return CachedImage(image: image, variant: variant, tier: .memory)
    }

    /// Whether `variant` can be resampled down to `request`'s exact size (it is not smaller).
    static func canResample(_ variant: ImageVariant, to request: ImageRequest) -> Bool {
        guard let q = variant.fillRatio(for: SizeQuery(box: request.box, mode: request.mode, style: request.style)) else {
            return false
        }
        return q >= 1
    }

    /// Completes a hit for `request`: resamples a larger variant to the exact box when the
    /// request asks for `exactSize` (and keeps the result in memory), and starts a background
    /// revalidation when the variant is older than ``Options/revalidateAfter``.
    func finish(_ hit: CachedImage, for request: ImageRequest, lane: FlightLane? = nil) async throws(ImageCacheError) -> CachedImage {
        if let limit = options.revalidateAfter, hit.age > limit { scheduleRevalidation(request.key, cached: hit.sourceVersion) }
        guard request.exactSize else { return hit }
        let plan = SizingPlan(source: hit.image.size, box: request.box, mode: request.mode, allowUpscale: request.allowUpscale)
        if plan.output == hit.image.size { return hit }
        let source = hit.image, box = request.box, mode = request.mode
        let resized = try await onPool(request.key, lane: lane ?? FlightLane(request.priority)) { renderer in
            renderer.resize(source, box: box, mode: mode)
        }
        counters.resamples.add(1, ordering: .relaxed)
        let variant = ImageVariant(
            descriptor: VariantDescriptor(size: resized.size, mode: request.mode, style: resized.style),
            sourceVersion: hit.sourceVersion, isWholeOriginal: false, fetchedAt: hit.variant.fetchedAt)
        memory?.insert(resized, forKey: request.key, variant: variant)
        return CachedImage(image: resized, variant: variant, tier: hit.tier)
    }

    func record(_ served: CachedImage, since start: ContinuousClock.Instant) {
        counters.served(served.tier)
        metrics.served[served.tier]?.increment()
        let elapsed = ContinuousClock.now - start
        metrics.lookups[served.tier]?.recordNanoseconds(
            elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }

    // MARK: Negative cache

    func checkNegative(_ key: CacheKey) throws(ImageCacheError) {
        guard options.negativeTTL > .zero else { return }
        let now = ContinuousClock.now
        let known = negative.withLock { map -> Bool in
            guard let until = map[key] else { return false }
            if until > now { return true }
            map[key] = nil
            return false
        }
        if known {
            counters.negativeHits.add(1, ordering: .relaxed)
            throw .notFound(key: key.string)
        }
    }

    func rememberMissing(_ key: CacheKey) {
        guard options.negativeTTL > .zero else { return }
        let until = ContinuousClock.now + options.negativeTTL
        negative.withLock { map in
            // Bounded: expired entries go when the map grows large.
            if map.count >= 100_000 {
                let now = ContinuousClock.now
                map = map.filter { $0.value > now }
            }
            map[key] = until
        }
    }

    // MARK: The chain below memory, shared by identical requests

    func throughFlight(_ request: ImageRequest, ticket: CoalescerTicket?) async throws(ImageCacheError) -> CachedImage {
        let group = FlightGroup(key: request.key, mode: request.mode, style: request.style, allowUpscale: request.allowUpscale)
        let tolerance = request.exactSize ? 0 : (request.tolerance ?? options.defaultTolerance)
        let descriptor = FlightDescriptor(box: request.box, tolerance: tolerance)
        let outcome: (value: CachedImage, joined: Bool)
        do {
            outcome = try await flights.run(
                group: group, descriptor: descriptor, priority: request.priority,
                joining: { $0.accepts(request.box, mode: request.mode) }, ticket: ticket,
                work: { [self] operation async throws(ImageCacheError) -> CachedImage in
                    try await fetch(request, operation: operation)
                })
        } catch {
            switch error {
            case .cancelled: throw .cancelled(key: request.key.string)
            case .failed(let error): throw error
            }
        }
        if outcome.joined {
            counters.coalesced.add(1, ordering: .relaxed)
            metrics.coalesced.increment()
            // The flight answered its first request; an exact request resamples from it.
            if request.exactSize, Self.canResample(outcome.value.variant, to: request) {
                return try await finish(outcome.value, for: request)
            }
        }
        return outcome.value
    }

    /// Disk, then tables, then the source, for one flight. Its blocking work runs in the lane of
    /// its highest waiter, and moves when that changes.
    func fetch(_ request: ImageRequest, operation: CoalescedOperation<Lane>) async throws(ImageCacheError) -> CachedImage {
        let lane = FlightLane(operation)
        if let hit = try await diskHit(request, lane: lane) {
            return try await finish(hit, for: request, lane: lane)
        }
        if let hit = try await tableHit(request, lane: lane) {
            return try await finish(hit, for: request, lane: lane)
        }
        if let format = tableFormat(for: request.searchQuery(defaultTolerance: options.defaultTolerance)) {
            return try await finish(tableFill(request, format: format, lane: lane), for: request, lane: lane)
        }
        return try await sourceRender(request, lane: lane)
    }

    /// A disk-tier hit (decided from the in-memory index; the file is mapped or read on the
    /// engine's threads), promoted to memory.
    func diskHit(_ request: ImageRequest, lane: FlightLane) async throws(ImageCacheError) -> CachedImage? {
        guard let disk else { return nil }
        let key = request.key.string
        let query = request.query(defaultTolerance: options.defaultTolerance)
        let search = request.exactSize ? request.searchQuery(defaultTolerance: options.defaultTolerance) : query
        guard disk.contains(key: key, matching: search) else {
            metrics.misses[.disk]?.increment()
            return nil
        }
        let found = try await onPool(request.key, lane: lane) { _ in try? disk.hit(forKey: key, matching: search) }
        guard let found else { return nil }
        let variant = ImageVariant(descriptor: found.variant, sourceVersion: SourceVersion(stamp: found.sourceVersion))
        if request.exactSize, variant.descriptor.size != request.box, !Self.canResample(variant, to: request) { return nil }
        memory?.insert(found.image, forKey: request.key, variant: variant)
        return CachedImage(image: found.image, variant: variant, tier: .disk)
    }

    /// The source: fetch, render on the engine's threads, write back to memory and disk.
    func sourceRender(_ request: ImageRequest, lane: FlightLane) async throws(ImageCacheError) -> CachedImage {
        guard let source else { throw .noSource(key: request.key.string) }
        let key = request.key.string
        let data = try await fetchOriginal(request.key, from: source)
        let renderStart = ContinuousClock.now
        let bytes = data.bytes, renderRequest = request.renderRequest
        counters.sourceDecodes.add(1, ordering: .relaxed)
        let rendered: (image: PixelImage, originalSize: PixelSize)
        do {
            let ticket = lane.ticket()
            rendered = try await pool.run(lane: ticket.lane, ticket: ticket) {
                (renderer) throws(ImageDecodingError) -> (image: PixelImage, originalSize: PixelSize) in
                try rethrowingTyped(ImageDecodingError.self) {
                    try bytes.withUnsafeBytes { try renderer.renderWithOriginalSize($0, request: renderRequest) }
                }
            }
        } catch {
            switch error {
            case .failed(let decoding): throw .decoding(key: key, decoding)
            case .cancelled: throw .cancelled(key: key)
            case .shutDown: throw .shutDown
            }
        }
        metrics.render.recordInterval(since: renderStart)
        let image = rendered.image
        let version = SourceVersion(token: data.version)
        let variant = ImageVariant(
            descriptor: VariantDescriptor(size: image.size, mode: request.mode, style: image.style), sourceVersion: version,
            isWholeOriginal: request.mode == .fit && !request.allowUpscale && image.size == rendered.originalSize)
        memory?.insert(image, forKey: request.key, variant: variant)
        disk?.store(image, forKey: key, mode: request.mode, sourceVersion: version.stamp)
        options.logger.debug("rendered from the source", metadata: ["key": "\(key)", "tier": "source", "size": "\(image.size)"])
        return CachedImage(image: image, variant: variant, tier: .source)
    }

    /// Fetches `key`'s original (counted and timed); a missing one is remembered for the
    /// negative TTL.
    func fetchOriginal(_ key: CacheKey, from source: any ImageSource) async throws(ImageCacheError) -> SourceData {
        counters.sourceFetches.add(1, ordering: .relaxed)
        metrics.sourceFetches.increment()
        let fetchStart = ContinuousClock.now
        let data: SourceData
        do {
            data = try await source.fetch(key: key.string)
        } catch {
            if case .notFound = error.reason { rememberMissing(key) }
            throw ImageCacheError(error)
        }
        metrics.sourceFetch.recordInterval(since: fetchStart)
        if Task.isCancelled { throw .cancelled(key: key.string) }
        return data
    }

    /// Runs blocking `body` on the engine's threads in `lane`.
    func onPool<T: Sendable>(
        _ key: CacheKey, lane: FlightLane, _ body: @escaping @Sendable (ImageRenderer) -> T
    ) async throws(ImageCacheError) -> T {
        let ticket = lane.ticket()
        do {
            return try await pool.run(lane: ticket.lane, ticket: ticket) { (renderer) throws(Never) -> T in body(renderer) }
        } catch {
            switch error {
            case .cancelled: throw .cancelled(key: key.string)
            case .shutDown: throw .shutDown
            }
        }
    }
}

/// The lane of one flight's blocking work: the highest lane among its waiters, followed as it
/// changes (an urgent request joining a prefetch moves the queued job to the urgent lane; the
/// last urgent waiter leaving moves it back).
final class FlightLane: Sendable {
    private let current: Lock<(lane: Lane, ticket: LaneTicket?)>

    /// Follows `operation`'s priority.
    init(_ operation: CoalescedOperation<Lane>) {
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
    init(_ lane: Lane) { current = Lock((lane, nil)) }

    /// A ticket for the next job, in the current lane; later priority changes move it.
    func ticket() -> LaneTicket {
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
    func recordInterval(since start: ContinuousClock.Instant) {
        let elapsed = ContinuousClock.now - start
        recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }
}
