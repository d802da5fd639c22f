import StrataBase
/// Render-ahead for moving sizes (``ImageCache/Options/renderAhead``): a viewer that zooms asks
/// for a slightly different box each frame. Within the tolerance those are hits, but once the
/// zoom leaves the tolerance of every variant held, the next frame waits for a render. With
/// render-ahead, a hit whose variant is further from the box than a share of the tolerance is
/// served at once and the box itself is rendered in the background (prefetch lane), so a zoom
/// that goes on in the same direction finds a close variant before it leaves the tolerance.
extension ImageCache {
    /// Starts a render-ahead when the variant that served `request` (its descriptor and
    /// whole-original flag) is further from its box than ``Options/renderAhead`` × the
    /// request's tolerance. Off: one optional load.
    @inline(__always)
    package func renderAheadIfFar(_ descriptor: VariantDescriptor, wholeOriginal: Bool, for request: ImageRequest) {
        guard let share = options.renderAhead, !request.exactSize else { return }
        renderAheadIfFar(descriptor, wholeOriginal: wholeOriginal, for: request, share: share)
    }

    /// The check behind ``renderAheadIfFar(_:wholeOriginal:for:)``: a fill ratio, and — only when the variant
    /// is far — one lock to claim the key and one detached task.
    ///
    /// Nothing is started when the variant is near, when it is the whole original and smaller
    /// than the box (no render can give more pixels), when the engine has no source, or while a
    /// render-ahead of the same key runs (one per key at a time, so a stream of far hits starts
    /// one render, not one per hit).
    @inline(never)
    package func renderAheadIfFar(_ descriptor: VariantDescriptor, wholeOriginal: Bool, for request: ImageRequest, share: Double) {
        let tolerance = request.tolerance ?? defaultTolerance
        guard tolerance > 0, source != nil else { return }
        let query = SizeQuery(box: request.box, mode: request.mode, style: request.style, tolerance: tolerance)
        guard let q = VariantMatcher.fillRatio(of: descriptor, for: query) else { return }
        let near = share * tolerance
        if VariantMatcher.withinTolerance(q, near) || (wholeOriginal && q < 1) { return }
        guard renderAheads.withLock({ $0.insert(request.key).inserted }) else { return }
        var ahead = request
        ahead.priority = .prefetch
        ahead.tolerance = near
        Task.detached(priority: .background) { [self] in
            await renderAhead(ahead)
            _ = renderAheads.withLock { $0.remove(ahead.key) }
        }
    }

    /// Renders `request` (a tighter tolerance, the prefetch lane) unless memory has a near
    /// variant by now or the key is known missing. Shares any flight that accepts its box; an
    /// urgent request that joins it makes it urgent. Errors are dropped: the hit was served,
    /// and the next far hit tries again.
    package func renderAhead(_ request: ImageRequest) async {
        if memoryHit(request) != nil { return }
        do { try checkNegative(request.key) } catch { return }
        counters.renderAheads.add(1, ordering: .relaxed)
        metrics.renderAheads.increment()
        _ = try? await throughFlight(request, ticket: nil)
    }
}
