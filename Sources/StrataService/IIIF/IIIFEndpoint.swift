import HTTPTypes
import Hummingbird
import NIOCore
import Strata
import StrataConfiguration

/// `GET /iiif/{3|2}/…`: the IIIF Image API (3.0 and 2.1, level 2) over the engine.
///
/// The base URI redirects (303) to its `info.json`; `info.json` describes the original (its
/// size read once per source version, ``IIIFOriginals``); an image request resolves its
/// region and size against the original, asks the engine for a whole-image variant near its
/// scale (``IIIFRendering``), and crops, resamples, turns and encodes on the engine's threads.
/// Every answer, errors included, carries `Access-Control-Allow-Origin: *`; images carry the
/// canonical and profile `Link` headers and `X-Strata-Tier`.
///
/// A tile is answered by the ``EncodedResponder`` that `/images` uses (load shedding, one
/// validator format, 304, the encoded cache, the encode on the engine's threads): its
/// ``EncodedKey`` names the variant it was cut from, its source version and the API version
/// with the canonical request, so a warm tile costs a memo lookup, the engine's memory hit,
/// one encoded lookup and a write — on the connection's event loop, before any task
/// (``warmTile(path:authority:ifNoneMatch:)``, asked by ``WarmPathHandler``); a tile whose level
/// is cached but which was never asked for costs a resample of the tile's size and an encode.
package struct IIIFEndpoint: Sendable {
    package init(
        cache: ImageCache, settings: IIIFSettings, http: HTTPServiceSettings, originals: IIIFOriginals, responder: EncodedResponder,
        pyramids: TilePyramids?
    ) {
        self.cache = cache
        self.settings = settings
        self.http = http
        self.originals = originals
        self.responder = responder
        self.pyramids = pyramids
        access = AccessGate(settings.auth)
    }

    package let cache: ImageCache
    package let settings: IIIFSettings
    package let http: HTTPServiceSettings
    package let originals: IIIFOriginals
    /// The encoded answers' path, shared with `/images`.
    package let responder: EncodedResponder
    /// The tile pyramids of originals above `iiif.tiledAbove` (`nil`: none configured).
    package let pyramids: TilePyramids?
    /// `iiif.auth.*`: which identifiers are restricted, and who may have them.
    package let access: AccessGate

    /// The original of `key` (under the pyramids' pixel limit when there are pyramids).
    package func original(_ key: String) async throws(ServiceError) -> IIIFOriginals.Original {
        try await originals.original(for: key, cache: cache, maxPixels: pyramids?.settings.maxSourcePixels)
    }

    package static let cors: HTTPFields = [.accessControlAllowOrigin: "*"]
    package static let link = HTTPField.Name("Link")!

    /// The answer and the tier label for metrics (`nil` when no image was served).
    /// `handedOver`: the warm path's memory lookup for this request, when it made one.
    package func respond(to request: Request, handedOver: PreparedHandOff.IIIFLookup? = nil) async -> (Response, tier: String?) {
        do {
            return try await answer(request, handedOver: handedOver)
        } catch {
            return (error.response(headers: Self.cors), nil)
        }
    }

    private func answer(_ request: Request, handedOver: PreparedHandOff.IIIFLookup?) async throws(ServiceError) -> (Response, tier: String?)
    {
        let target = Substring(request.uri.string)
        let path = target[..<(target.firstIndex(of: "?") ?? target.endIndex)]
        let route = try IIIFRoute(path: path)
        let host = request.head.authority ?? "\(http.host):\(http.port)"
        func base(_ version: IIIFVersion, _ identifier: IIIFIdentifier) -> String {
            "http://\(host)\(version.prefix)\(identifier.raw)"
        }
        switch route {
        case .base(let version, let identifier):
            var headers = Self.cors
            headers[.location] = base(version, identifier) + "/info.json"
            return (Response(status: .seeOther, headers: headers), nil)
        case .info(let version, let identifier):
            let original = try await self.original(identifier.key)
            if let pyramids, original.size.pixelCount > settings.tiledAbove {
                // The viewer's tiles follow: its pyramid's build starts now.
                pyramids.prepare(
                    CacheKey(identifier.key, colour: responder.colour.current), size: original.size, version: original.version)
            }
            let services = access.service(for: identifier.key).map {
                [IIIFAuthEndpoint.description(identifier: identifier, service: $0, authority: host)]
            }
            let json = IIIFInfo.json(
                version: version, id: base(version, identifier), size: original.size, settings: settings, services: services ?? [])
            var headers = Self.cors
            headers[.contentType] = version.infoContentType(accept: request.headers[values: .accept])
            headers[Self.link] = "<\(version.levelProfile)>;rel=\"profile\""
            if !http.cacheControl.isEmpty { headers[.cacheControl] = http.cacheControl }
            return (Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: json))), nil)
        case .image(let image):
            let decision = access.decide(key: image.identifier.key, headers: request.headers)
            var degraded: (service: IIIFAuthSettings.Service, side: Int)?
            if case .refused(let service, let side) = decision {
                guard let side else { throw AccessGate.refusal(service, key: image.identifier.key) }
                degraded = (service, side)
            }
            var (response, tier) = try await render(
                image, base: base(image.version, image.identifier), ifNoneMatch: request.headers[values: .ifNoneMatch],
                handedOver: handedOver, degraded: degraded)
            AccessGate.seal(&response.headers, status: response.status, decision)
            return (response, tier)
        }
    }

    /// An image request; retried once when the served variant shows the original changed
    /// since its size was memoized. Shed like `/images` when the engine's urgent lane is full
    /// and the tile needs it (the original's size is not known, or memory does not hold the
    /// level); the validator, 304, encoded cache and encode (the
    /// cut on the engine's threads first) are the shared ``EncodedResponder``'s, with the tile's
    /// canonical derivation in its ``EncodedKey``. Memory is asked once for the variant: the
    /// warm path's lookup (`handedOver`) is used when it was for the same engine request.
    /// `degraded`: a restricted image asked for without a credential, served at most `side`
    /// pixels on its long side (a larger output is a 401 naming `service`).
    private func render(
        _ request: IIIFImageRequest, base: String, ifNoneMatch: [String], handedOver: PreparedHandOff.IIIFLookup?,
        degraded: (service: IIIFAuthSettings.Service, side: Int)?
    ) async throws(ServiceError) -> (Response, tier: String?) {
        let started = ContinuousClock.now
        var attempt = 0
        while true {
            attempt += 1
            let key = request.identifier.key
            // Shed before the original's header is read (on the urgent lane), then before the
            // render unless memory holds the level.
            try responder.admit(unless: originals.knows(key))
            let original = try await self.original(key)
            let focus = request.region == .square ? try await squareFocus(key, size: original.size) : .center
            let region = try request.region.resolve(in: original.size, squareFocus: focus)
            let output = try request.size.resolve(region: region.size, limits: settings, version: request.version)
            if let degraded, max(output.width, output.height) > degraded.side {
                throw AccessGate.refusal(degraded.service, key: key, over: degraded.side)
            }
            let colour = responder.colour.current
            if let pyramids, original.size.pixelCount > settings.tiledAbove {
                do {
                    return try await tiled(
                        request, pyramids: pyramids, original: original, region: region, output: output, colour: colour, base: base,
                        ifNoneMatch: ifNoneMatch, started: started)
                } catch  where error.code == ServiceError.originalChanged && attempt < 2 {
                    // The original changed since its size was read: read it again, once.
                    originals.forget(key)
                    continue
                }
            }
            // Never a variant smaller than the tile's scale (by default): it would be enlarged.
            let engineRequest = ImageRequest(
                key: CacheKey(key, colour: colour), box: IIIFRendering.engineBox(original: original.size, region: region, output: output),
                mode: .fit, upscaleTolerance: settings.upscaleTolerance)
            // The warm path's memory lookup, when it was for this engine request, is the request's one.
            let handed = attempt == 1 ? handedOver.flatMap { $0.request == engineRequest ? $0 : nil } : nil
            try responder.admit(unless: handed.map { $0.hit != nil } ?? (cache.cachedImage(for: engineRequest) != nil))
            let served: CachedImage
            do {
                if let handed {
                    served = try await cache.image(for: engineRequest, memoryHit: handed.hit)
                } else {
                    served = try await cache.image(for: engineRequest)
                }
            } catch {
                throw ServiceError(error)
            }
            if served.sourceVersion != .unknown, originals.forget(key, unless: served.sourceVersion), attempt < 2 { continue }
            let engineDone = ContinuousClock.now
            let quality = request.quality, rotation = request.rotation
            let originalSize = original.size
            let work = work(
                request, served: served, base: base, region: region, original: originalSize, output: output, colour: colour,
                derivationPrefix: ""
            ) { variant in
                IIIFRendering.compose(
                    variant, region: region, original: originalSize, output: output, rotation: rotation, quality: quality)
            }
            let reply = try await responder.answer(work, ifNoneMatch: ifNoneMatch, started: started, engineDone: engineDone)
            return (reply.response, reply.tier)
        }
    }

    /// An image request of an original above `iiif.tiledAbove`, cut from its tile pyramid: the
    /// level at the request's scale (never smaller than the output), the tiles the region
    /// covers (each a table hit, or waited for while the build writes it), then the same
    /// resample, turns and encode as a whole-image variant's, through the shared responder.
    private func tiled(
        _ request: IIIFImageRequest, pyramids: TilePyramids, original: IIIFOriginals.Original, region: IIIFRect, output: PixelSize,
        colour: ColourOutput, base: String, ifNoneMatch: [String], started: ContinuousClock.Instant
    ) async throws(ServiceError) -> (Response, tier: String?) {
        let key = request.identifier.key
        let geometry = pyramids.geometry(for: original.size)
        let cut = IIIFRendering.TileCut(geometry: geometry, region: region, output: output)
        let (images, allCached) = try await cut.images(
            from: pyramids, key: CacheKey(key, colour: colour), version: original.version
        ) { (allCached) throws(ServiceError) in try responder.admit(unless: allCached) }
        let engineDone = ContinuousClock.now
        let served = cut.served(images, version: original.version, allCached: allCached)
        let quality = request.quality, rotation = request.rotation
        // "t": a pyramid's answer never shares an encoding with a whole-image variant's.
        let work = work(
            request, served: served, base: base, region: region, original: original.size, output: output, colour: colour,
            derivationPrefix: "t"
        ) { _ in cut.compose(images, rotation: rotation, quality: quality) }
        let reply = try await responder.answer(work, ifNoneMatch: ifNoneMatch, started: started, engineDone: engineDone)
        return (reply.response, reply.tier)
    }

    /// The encoded responder's work for an image request: its encoding (``encoding(_:variant:version:base:region:original:output:colour:derivationPrefix:)``),
    /// CORS and `Link` headers, the output's size after the rotation, and `derive`, the cut. The
    /// encoding gets a ready-made head: the warm path answers it next time (``warmTile(path:authority:ifNoneMatch:)``).
    private func work(
        _ request: IIIFImageRequest, served: CachedImage, base: String, region: IIIFRect, original: PixelSize, output: PixelSize,
        colour: ColourOutput, derivationPrefix: String, derive: @escaping @Sendable (PixelImage) -> PixelImage
    ) -> EncodedResponder.Work {
        let (key, canonical) = encoding(
            request, variant: served.variant.descriptor, version: served.sourceVersion, base: base, region: region, original: original,
            output: output, colour: colour, derivationPrefix: derivationPrefix)
        var extra = Self.cors
        extra[Self.link] = Self.linkValue(canonical: canonical, version: request.version)
        let size = request.rotation.swapsSides ? PixelSize(width: output.height, height: output.width) : output
        return EncodedResponder.Work(served: served, key: key, size: size, hit: nil, extra: extra, derive: derive, warm: true)
    }

    /// An image request's encoding — the variant it is cut from, its source version, the format,
    /// quality and the canonical request after `derivationPrefix` (`t` for a pyramid's) — and its
    /// canonical URI.
    package func encoding(
        _ request: IIIFImageRequest, variant: VariantDescriptor, version: SourceVersion, base: String, region: IIIFRect,
        original: PixelSize, output: PixelSize, colour: ColourOutput, derivationPrefix: String
    ) -> (key: EncodedKey, canonical: String) {
        let format = request.format
        let canonical = Self.canonical(request, base: base, region: region, original: original, output: output)
        let key = EncodedKey(
            key: request.identifier.key, variant: variant, version: version.stamp,
            format: format.responseFormat, quality: format == .png ? 0 : format == .avif ? http.avifQuality : http.quality,
            colour: colour, derivation: derivationPrefix + String(request.version.rawValue) + canonical.dropFirst(base.count),
            speed: format == .avif ? http.avifSpeed : nil)
        return (key, canonical)
    }

    /// The `Link` field of an image answer: its canonical URI and the compliance level's profile.
    package static func linkValue(canonical: String, version: IIIFVersion) -> String {
        "<\(canonical)>;rel=\"canonical\", <\(version.levelProfile)>;rel=\"profile\""
    }

    /// Where `square` sits in the image `key` of `size` (`iiif.squareGravity`). `smart` reads the
    /// saliency of a small `fit` variant of the whole image, asked of the engine like any other
    /// (a memory hit once a viewer has shown its thumbnail); the map is made on the engine's
    /// threads, off the event loops.
    private func squareFocus(_ key: String, size: PixelSize) async throws(ServiceError) -> CropFocus {
        if let focus = settings.squareGravity.focus { return focus }
        guard size.width != size.height else { return .center }
        let side = Saliency.mapSide
        let small: CachedImage
        do {
            small = try await cache.image(
                for: ImageRequest(
                    key: CacheKey(key, colour: responder.colour.current), box: PixelSize(width: side, height: side), tolerance: 0.5))
        } catch {
            throw ServiceError(error)
        }
        let crop = Double(min(size.width, size.height))
        let image = small.image
        do {
            return try await cache.runOnEngineThreads {
                Saliency.focus(of: image, cropWidth: crop / Double(size.width), cropHeight: crop / Double(size.height))
            }.get()
        } catch {
            throw ServiceError(error)
        }
    }

    /// The canonical URI of an image request (Image API 3.0 §4.7, 2.1 §4.7): the region as
    /// `full` or `x,y,w,h`; the size as `max` (3.0) / `full` (2.1) when it is the region's own,
    /// else `w,h` (3.0, `^` when larger than the region) or `w,` (2.1, `w,h` when distorted);
    /// the rotation as a whole number with `!` when mirrored.
    package static func canonical(
        _ request: IIIFImageRequest, base: String, region: IIIFRect, original: PixelSize, output: PixelSize
    )
        -> String
    {
        let regionText = region == IIIFRect(x: 0, y: 0, width: original.width, height: original.height) ? "full" : region.description
        let sizeText: String
        if output == region.size {
            sizeText = request.version == .v3 ? "max" : "full"
        } else if request.version == .v3 {
            let up = output.width > region.width || output.height > region.height
            sizeText = (up ? "^" : "") + "\(output.width),\(output.height)"
        } else {
            let keepsAspect = Int((Double(region.height) * Double(output.width) / Double(region.width)).rounded()) == output.height
            sizeText = keepsAspect ? "\(output.width)," : "\(output.width),\(output.height)"
        }
        return "\(base)/\(regionText)/\(sizeText)/\(request.rotation.canonical)/\(request.quality.rawValue).\(request.format.rawValue)"
    }
}
