import HTTPTypes
import Hummingbird
import Strata

extension ImageEndpoint {
    /// Whether `/images` answers for `key` come from its tile pyramid (when pyramids are set):
    /// its original is known (from an earlier request or IIIF) to be over `source.maxPixels`,
    /// which the engine refuses.
    package func isTiled(_ key: String) -> Bool {
        guard let known = originals.known(key) else { return false }
        return known.size.pixelCount > sourceMaxPixels
    }

    /// An `/images` request of an original over `source.maxPixels` (refused by the engine from
    /// its header), served from its tile pyramid (`iiif.pyramidPath`, up to
    /// `iiif.maxSourcePixels`): the `fit` or `fill` of the whole image — the crop placed by the
    /// gravity, `smart` by the saliency of the pyramid's coarsest tile — cut from the level at
    /// the output's scale (never smaller) and resampled, through the shared encoded responder.
    /// Its encodings are keyed by the output's size, mode and gravity (`t…`), never shared with
    /// a whole-image variant's. Cost: the covered tiles (table hits, or waits while the build
    /// writes them) and one resample of the output's size. An original that changed since its
    /// size was memoized is read again, once.
    package func tiled(
        _ prepared: Prepared, pyramids: TilePyramids, request: Request, started: ContinuousClock.Instant
    ) async throws(ServiceError) -> ImageReply {
        do {
            return try await tiledOnce(prepared, pyramids: pyramids, request: request, started: started)
        } catch  where error.code == ServiceError.originalChanged {
            originals.forget(prepared.parameters.key)
            return try await tiledOnce(prepared, pyramids: pyramids, request: request, started: started)
        }
    }

    private func tiledOnce(
        _ prepared: Prepared, pyramids: TilePyramids, request: Request, started: ContinuousClock.Instant
    ) async throws(ServiceError) -> ImageReply {
        let parameters = prepared.parameters, key = prepared.request.key
        guard parameters.operations.isEmpty else {
            throw ServiceError(
                .contentTooLarge, "too_large",
                "\(parameters.key.debugDescription) is over source.maxPixels and served from its tile pyramid, which takes sizes, gravities and watermarks only: remove trim, crop, flip, rot, mode=pad, bg, blur and sharpen"
            )
        }
        try responder.admit(unless: originals.knows(parameters.key))
        let original = try await originals.original(for: parameters.key, cache: cache, maxPixels: pyramids.settings.maxSourcePixels)
        let geometry = pyramids.geometry(for: original.size)
        var focus = parameters.gravity.focus ?? .center
        if parameters.mode == .fill, parameters.gravity.focus == nil {
            let whole = TileAddress(level: geometry.levels.count - 1, column: 0, row: 0)
            do {
                let small = try await pyramids.tile(whole, of: key, geometry: geometry, version: original.version)
                // The saliency map on the engine's threads: async code runs on the event loops.
                let box = prepared.request.box
                focus = try await cache.runOnEngineThreads { Saliency.focus(of: small, forFillOf: box) }.get()
            } catch {
                throw ServiceError(error)
            }
        }
        let plan = SizingPlan(source: original.size, box: prepared.request.box, mode: parameters.mode, focus: focus)
        let cut = IIIFRendering.TileCut(geometry: geometry, region: plan.sourceRect, output: plan.output)
        let (images, allCached) = try await cut.images(from: pyramids, key: key, version: original.version) {
            (allCached) throws(ServiceError) in try responder.admit(unless: allCached)
        }
        let engineDone = ContinuousClock.now
        let served = cut.served(images, version: original.version, allCached: allCached)
        var format = parameters.format
        var extra = HTTPFields()
        if format == nil {
            extra[.vary] = "Accept"
            switch FormatNegotiation.negotiate(settings.formats, accept: request.headers[values: .accept]) {
            case .format(let negotiated): format = negotiated
            case .byAlpha: format = original.hasAlpha ? .png : .jpeg
            }
        }
        if let dpr = parameters.dprText { extra[Self.contentDPR] = dpr }
        let mark = try await watermark(for: parameters)
        var encodedKey = encodedKey(parameters, key.colourOutput, served, format ?? .jpeg)
        encodedKey.derivation =
            "t\(plan.output)-\(parameters.mode)" + (parameters.gravity == .center ? "" : "-gravity=\(parameters.gravity)")
            + (mark.map { "-wm=\($0.0.canonical)@\($0.1.version)" } ?? "")
        let marking = Self.derivation(watermark: mark, flattening: nil)
        let ifNoneMatch = request.headers[values: .ifNoneMatch]
        if format == .raw {
            // The cut and the copy of its rows in one job.
            let made: (image: PixelImage, rows: ByteBuffer)
            do {
                made = try await cache.runOnEngineThreads { () -> (image: PixelImage, rows: ByteBuffer) in
                    let cutOut = cut.compose(images)
                    let image = marking?(cutOut) ?? cutOut
                    return (image, image.withUnsafeBytes { ByteBuffer(bytes: $0) })
                }.get()
            } catch {
                throw ServiceError(error)
            }
            return try await raw(
                CachedImage(image: made.image, variant: served.variant, tier: served.tier), key: encodedKey, extra: extra,
                ifNoneMatch: ifNoneMatch, started: started, engineDone: engineDone, rows: made.rows)
        }
        return try await responder.answer(
            EncodedResponder.Work(
                served: served, key: encodedKey, size: plan.output, hit: nil, extra: extra,
                derive: { _ in
                    let cutOut = cut.compose(images)
                    return marking?(cutOut) ?? cutOut
                },
                warm: false),
            ifNoneMatch: ifNoneMatch, started: started, engineDone: engineDone)
    }
}
