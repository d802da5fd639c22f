import HTTPTypes
import Hummingbird
import NIOCore
import Strata
import StrataConfiguration

#if canImport(Glibc)
import Glibc
#endif

/// `GET /images/{key}?…`: checks the signature and the parameters, asks the engine (after the
/// shared load shedding), negotiates the format, and hands the answer — validator, 304,
/// encoded cache, encode — to the ``EncodedResponder`` that IIIF tiles share; raw rows are
/// answered here.
///
/// The synchronous core — ``prepare(target:)``, then ``choose(_:served:accept:)`` — is shared by
/// the Hummingbird route and by ``WarmPathHandler``, which answers warm requests on the
/// connection's event loop and hands what it parsed to the route when it passes a request on
/// (``PreparedHandOff``), so a cold request's target is parsed once. Cost of a warm request: the
/// engine's memory hit (a hash lookup and a scan of the key's variants), one encoded-cache
/// lookup, and the write of a shared buffer.
package struct ImageEndpoint: Sendable {
    package let cache: ImageCache
    package let encoded: EncodedCache
    package let settings: HTTPServiceSettings
    package let signer: URLSigner?
    package let responder: EncodedResponder
    /// `http.presets` in force (replaced on reload by ``StrataServer/apply(_:)``).
    package var presets = PresetChoice(.none)
    /// `http.watermarks` in force (``Watermarks/set(_:)`` on reload).
    package var watermarks = Watermarks.none
    /// The tile pyramids of originals over `source.maxPixels` (`nil`: none configured; such
    /// originals are refused with 413), the originals' sizes (shared with IIIF), and
    /// `source.maxPixels`.
    package var pyramids: TilePyramids? = nil
    package var originals = IIIFOriginals()
    package var sourceMaxPixels = Int.max
    /// `iiif.auth.*`: restricted keys need their access service's credential here too.
    package var access = AccessGate.open

    package var probes: ServiceProbes { responder.probes }

    /// A checked image request.
    package struct Prepared: Sendable {
        package var parameters: ImageParameters
        package var request: ImageRequest
        /// The warm path's memory lookup for this request, when it made one before passing the
        /// request on (the route then asks memory no more).
        package var memoryLookup: MemoryLookup = .notAsked
        /// When the URL's signature expires (`exp=`, Unix seconds); checked again each time a
        /// memoized parse is reused (``PreparedTargets``).
        package var expires: Int? = nil
        /// The ``PresetChoice/generation`` it was parsed under: a memoized parse of another
        /// generation is parsed again (``PreparedTargets``).
        package var presetGeneration = 0
    }

    /// What a memory lookup made before the route found.
    package enum MemoryLookup: Sendable {
        case notAsked
        case hit(CachedImage)
        case miss
    }

    /// The answer and the tier label for metrics (`nil` when no image was served).
    /// `handedOver`: the warm path's parse of this request's target, when it made one.
    package func respond(to request: Request, handedOver: Result<Prepared, ServiceError>?) async -> (Response, tier: String?) {
        let started = ContinuousClock.now
        do {
            let prepared: Prepared
            if let handedOver {
                prepared = try handedOver.get()
            } else {
                prepared = try prepare(target: Substring(request.uri.string))
            }
            let decision = try admit(prepared, headers: request.headers)
            let reply = try await image(for: request, prepared: prepared, started: started)
            var answer = reply.response
            AccessGate.seal(&answer.headers, status: answer.status, decision)
            return (answer, reply.tier)
        } catch {
            return (error.response(), nil)
        }
    }

    /// Checks the signature (when signing is on), resolves a preset (``ImagePresets``) and
    /// parses the target.
    package func prepare(target signed: Substring, now: Int = Int(time(nil))) throws(ServiceError) -> Prepared {
        probes.targetParsed?(signed)
        var target = signed
        var expires: Int?
        if let signer {
            do {
                (target, expires) = try signer.verify(target, now: now)
            } catch {
                throw Self.refusal(error)
            }
        }
        // Byte offsets, not characters: the target is ASCII in practice, and `?` and the
        // prefix are ASCII, so these indices are valid for the Substring too.
        let bytes = target.utf8
        let question = bytes.firstIndex(of: UInt8(ascii: "?"))
        let path = target[..<(question ?? target.endIndex)]
        let query = question.map { target[bytes.index(after: $0)...] }
        guard path.utf8.starts(with: ImageParameters.prefix.utf8) else {
            throw ServiceError(.notFound, "not_found", "image URLs are /images/{key}?w=…&h=…")
        }
        let (presets, generation) = self.presets.current
        let parameters = try ImageParameters(
            path: path[path.utf8.index(path.startIndex, offsetBy: ImageParameters.prefix.utf8.count)...],
            query: try presets.resolve(query), maxDimension: settings.maxDimension)
        if let placement = parameters.watermark, !watermarks.has(placement.name) {
            let names = watermarks.names
            throw .badParameter(
                "watermark=\(placement.name): no such watermark (\(names.isEmpty ? "http.watermarks names none" : "http.watermarks has \(names.joined(separator: ", "))"))"
            )
        }
        let request = ImageRequest(
            key: CacheKey(parameters.key, colour: responder.colour.current, gravity: parameters.gravity, operations: parameters.operations),
            box: parameters.box,
            mode: parameters.mode,
            tolerance: parameters.tolerance,
            exactSize: parameters.exact)
        return Prepared(parameters: parameters, request: request, expires: expires, presetGeneration: generation)
    }

    /// The 403 of a refused signature.
    package static func refusal(_ refusal: URLSigner.Refusal) -> ServiceError {
        switch refusal {
        case .missing:
            ServiceError(.forbidden, "missing_signature", "this service needs signed URLs: add sig= (see `strata sign`)")
        case .invalid:
            ServiceError(.forbidden, "bad_signature", "the URL's signature does not match its path and query")
        case .unknownKey(let id?):
            ServiceError(.forbidden, "unknown_key", "the URL is signed with key \(id.debugDescription), which this service does not have")
        case .unknownKey(nil):
            ServiceError(.forbidden, "unknown_key", "the URL names no key (kid=), and this service has no key for such URLs")
        case .expired:
            ServiceError(.forbidden, "expired_signature", "the URL's signature has expired (exp=)")
        }
    }

    /// The access decision for a prepared request (``AccessGate``): a restricted key without
    /// its credential is a 401, unless its service serves a degraded size and the request's box
    /// is within it.
    package func admit(_ prepared: Prepared, headers: HTTPFields) throws(ServiceError) -> AccessGate.Decision {
        let key = prepared.parameters.key
        let decision = access.decide(key: key, headers: headers)
        if case .refused(let service, let side) = decision {
            let box = prepared.parameters.box
            guard let side, max(box.width, box.height) <= side else { throw AccessGate.refusal(service, key: key, over: side) }
        }
        return decision
    }

    private func image(
        for request: Request, prepared: Prepared, started: ContinuousClock.Instant
    ) async throws(ServiceError) -> ImageReply {
        // A watermark read from the source is read (through the engine) before its version
        // goes into the answer's identity.
        let mark = try await watermark(for: prepared.parameters)
        if let pyramids, isTiled(prepared.parameters.key) {
            return try await tiled(prepared, pyramids: pyramids, request: request, started: started)
        }
        // One memory lookup per request: the warm path's, handed over, or this one.
        let memoryHit: CachedImage?
        switch prepared.memoryLookup {
        case .hit(let hit): memoryHit = hit
        case .miss: memoryHit = nil
        case .notAsked: memoryHit = cache.cachedImage(for: prepared.request)
        }
        try responder.admit(unless: memoryHit != nil)
        let served: CachedImage
        do {
            served = try await cache.image(for: prepared.request, memoryHit: memoryHit)
        } catch {
            if let pyramids, case .decoding(_, let decoding) = error, case .tooLarge = decoding.reason {
                return try await tiled(prepared, pyramids: pyramids, request: request, started: started)
            }
            throw ServiceError(error)
        }
        let engineDone = ContinuousClock.now
        let parameters = prepared.parameters
        let colour = prepared.request.key.colourOutput
        let choice = choose(parameters, colour: colour, served: served, accept: request.headers[values: .accept])
        let format: ResponseFormat
        if let chosen = choice.format {
            format = chosen
        } else {
            // Negotiated, and no encoding of the variant says whether it has alpha: scan its
            // pixels on the engine's threads (the answer looks its encoding up afterwards).
            format = try await responder.hasTransparency(served.image) ? .png : .jpeg
        }
        let key = encodedKey(parameters, colour, served, format, watermark: mark?.1.version)
        let ifNoneMatch = request.headers[values: .ifNoneMatch]
        var extra = HTTPFields()
        if choice.negotiated { extra[.vary] = "Accept" }
        if let dpr = parameters.dprText { extra[Self.contentDPR] = dpr }
        let derive = Self.derivation(watermark: mark, flattening: Self.flattening(parameters.operations, format))
        if format == .raw {
            return try await raw(
                served, key: key, extra: extra, ifNoneMatch: ifNoneMatch, started: started, engineDone: engineDone, derive: derive)
        }
        var work = EncodedResponder.Work(
            served: served, key: key, size: served.image.size, hit: choice.hit, extra: extra, derive: derive, warm: true)
        if Self.isAnimated(parameters, served, format), choice.hit == nil, encoded.value(for: key) == nil,
            !FormatNegotiation.matches(etag: key.etag, ifNoneMatch: ifNoneMatch)
        {
            try await animate(&work, prepared: prepared, watermark: mark)
        }
        return try await responder.answer(work, ifNoneMatch: ifNoneMatch, started: started, engineDone: engineDone)
    }

    /// The rows as held (`format=raw`): never encoded nor cached as bytes. They are copied into
    /// the body on the engine's threads (a mapped disk or table hit's pages may still have to be
    /// read from the disk, which no event loop may wait for), unless the caller did (`rows`).
    package func raw(
        _ served: CachedImage, key: EncodedKey, extra: HTTPFields, ifNoneMatch: [String], started: ContinuousClock.Instant,
        engineDone: ContinuousClock.Instant, rows: ByteBuffer? = nil, derive: (@Sendable (PixelImage) -> PixelImage)? = nil
    ) async throws(ServiceError) -> ImageReply {
        let etag = key.etag
        let fields = responder.fields(etag: etag, size: served.image.size, format: .raw)
        let tier = served.tier.rawValue
        if FormatNegotiation.matches(etag: etag, ifNoneMatch: ifNoneMatch) {
            return responder.notModified(extra, fields: fields, tier: tier, started: started, engineDone: engineDone)
        }
        var headers = extra
        headers.append(contentsOf: fields)
        headers[Self.bytesPerRow] = String(served.image.bytesPerRow)
        headers[Self.style] = served.image.style.description
        headers[EncodedResponder.tier] = tier
        headers[EncodedResponder.serverTiming] = EncodedResponder.timing(started: started, engine: engineDone, encode: nil)
        let image = served.image
        let body: ByteBuffer
        if let rows {
            body = rows
        } else {
            do {
                body = try await cache.runOnEngineThreads { (derive?(image) ?? image).withUnsafeBytes { ByteBuffer(bytes: $0) } }.get()
            } catch {
                throw ServiceError(error)
            }
        }
        return ImageReply(status: .ok, headers: headers, body: body, tier: tier)
    }

    /// The encoding a request gets: its format (from the URL, else negotiated from `Accept`),
    /// and the encoded cache's bytes of it when they are there.
    package struct Choice {
        /// `nil`: negotiated, and only a scan of the pixels for alpha can tell PNG from JPEG.
        package var format: ResponseFormat?
        package var negotiated: Bool
        package var hit: EncodedImage?
    }

    /// The quality `format` is encoded at: the request's, else `http.avifQuality` (AVIF) or
    /// `http.quality`; 0 for the formats without one.
    package func quality(_ parameters: ImageParameters, _ format: ResponseFormat) -> Int {
        guard format.hasQuality else { return 0 }
        return parameters.quality ?? (format == .avif ? settings.avifQuality : settings.quality)
    }

    /// The encoded cache's key of `served` in `format`.
    /// `watermark`: the version of the request's watermark (``Watermarks/Loaded/version``).
    package func encodedKey(
        _ parameters: ImageParameters, _ colour: ColourOutput, _ served: CachedImage, _ format: ResponseFormat, watermark: String? = nil
    ) -> EncodedKey {
        EncodedKey(
            key: parameters.key, variant: served.variant.descriptor, version: served.variant.sourceVersion.stamp, format: format,
            quality: quality(parameters, format), colour: colour,
            derivation: Self.derivation(parameters, watermark: watermark, animated: Self.isAnimated(parameters, served, format)),
            speed: format == .avif ? settings.avifSpeed : nil)
    }

    /// Whether the answer in `format` is an animation: the original is one (the variant says so:
    /// ``/StrataBase/ImageVariant/isAnimatedOriginal``), the request did not ask for `frames=1`,
    /// and the format is WebP or GIF (the animated formats Strata writes).
    package static func isAnimated(_ parameters: ImageParameters, _ served: CachedImage, _ format: ResponseFormat) -> Bool {
        (format == .webp || format == .gif) && served.variant.isAnimatedOriginal && !parameters.still
    }

    /// The request's watermark and its image (read through the engine when it is a source key
    /// not read yet), `nil` when the request names none.
    package func watermark(for parameters: ImageParameters) async throws(ServiceError) -> (WatermarkPlacement, Watermarks.Loaded)? {
        guard let placement = parameters.watermark else { return nil }
        return (placement, try await watermarks.load(placement.name, cache: cache))
    }

    /// What besides the variant makes an `/images` encoding: the gravity, the operations and the
    /// watermark with its version (empty for none).
    package static func derivation(_ parameters: ImageParameters, watermark version: String? = nil, animated: Bool = false) -> String {
        var parts: [String] = animated ? ["anim"] : []
        if parameters.gravity != .center { parts.append("gravity=\(parameters.gravity)") }
        if !parameters.operations.isEmpty { parts.append("ops=\(parameters.operations.canonical)") }
        if let placement = parameters.watermark { parts.append("wm=\(placement.canonical)@\(version ?? "?")") }
        return parts.joined(separator: ";")
    }

    /// What is done to the variant before its encode: the watermark laid on, then the JPEG's
    /// flattening; `nil` for nothing.
    package static func derivation(
        watermark: (WatermarkPlacement, Watermarks.Loaded)?, flattening: (@Sendable (PixelImage) -> PixelImage)?
    ) -> (@Sendable (PixelImage) -> PixelImage)? {
        guard let (placement, loaded) = watermark else { return flattening }
        let mark = loaded.image
        return { image in
            let marked = placement.apply(
                mark, to: image.style == .bgra32Premultiplied ? image : PixelConversion.convert(image, to: .bgra32Premultiplied))
            return flattening?(marked) ?? marked
        }
    }

    /// The flattening of transparency over `bg=` before a JPEG encode (JPEG has no alpha; without
    /// `bg` its premultiplied pixels are written as they are, over black).
    package static func flattening(_ operations: ImageOperations, _ format: ResponseFormat) -> (@Sendable (PixelImage) -> PixelImage)? {
        guard format == .jpeg, var colour = operations.background else { return nil }
        colour.alpha = 255
        let background = colour.premultipliedBGRA
        return { $0.flattened(over: background) }
    }

    /// Format negotiation and the encoded-cache lookup, shared by the route and the warm path.
    /// Without `format`: the first of `http.formats` that `Accept` allows
    /// (``FormatNegotiation/negotiate(_:accept:)``: AVIF, then JPEG XL, then WebP, then JPEG or PNG by
    /// default); where that is JPEG-or-PNG by alpha, the JPEG or PNG already cached for this
    /// variant; else undecided (`format` `nil`): the route scans the pixels for alpha on the
    /// engine's threads (PNG with alpha, JPEG without), and the warm path passes the request
    /// on. Never scans pixels itself: it runs on event loops.
    package func choose(_ parameters: ImageParameters, colour: ColourOutput, served: CachedImage, accept: [String]) -> Choice {
        // A watermark not read yet (from the source) has no version: nothing cached can be named.
        var version: String?
        if let placement = parameters.watermark {
            guard let loaded = watermarks.loaded(placement.name) else {
                return Choice(format: parameters.format, negotiated: parameters.format == nil, hit: nil)
            }
            version = loaded.version
        }
        func encodedKey(
            _ parameters: ImageParameters, _ colour: ColourOutput, _ served: CachedImage, _ format: ResponseFormat
        ) -> EncodedKey {
            self.encodedKey(parameters, colour, served, format, watermark: version)
        }
        if let format = parameters.format {
            let hit = format == .raw ? nil : encoded.value(for: encodedKey(parameters, colour, served, format))
            return Choice(format: format, negotiated: false, hit: hit)
        }
        // An animation goes out as WebP wherever the client takes WebP, whatever http.formats
        // prefers for stills.
        if served.variant.isAnimatedOriginal, !parameters.still, FormatNegotiation.accepts("image/webp", in: accept) {
            return Choice(format: .webp, negotiated: true, hit: encoded.value(for: encodedKey(parameters, colour, served, .webp)))
        }
        switch FormatNegotiation.negotiate(settings.formats, accept: accept) {
        case .format(let format):
            return Choice(format: format, negotiated: true, hit: encoded.value(for: encodedKey(parameters, colour, served, format)))
        case .byAlpha:
            // A cached JPEG or PNG of this variant already says whether it has alpha.
            guard
                let hit = encoded.value(for: encodedKey(parameters, colour, served, .jpeg))
                    ?? encoded.value(for: encodedKey(parameters, colour, served, .png))
            else { return Choice(format: nil, negotiated: true, hit: nil) }
            return Choice(format: hit.format, negotiated: true, hit: hit)
        }
    }

    /// What the warm path sends for a request whose variant memory holds: the cached encoding
    /// with its ready-made head, when there is one and the answer is a 200 (not a 304: an
    /// `If-None-Match` that matches goes the ordinary way). `negotiated`: the answer varies
    /// with `Accept`.
    package func warmEncoding(
        for prepared: Prepared, served: CachedImage, accept: [String], ifNoneMatch: [String]
    ) -> (image: EncodedImage, head: ByteBuffer, negotiated: Bool)? {
        let choice = choose(prepared.parameters, colour: prepared.request.key.colourOutput, served: served, accept: accept)
        guard let hit = choice.hit, let head = hit.head, !FormatNegotiation.matches(etag: hit.etag, ifNoneMatch: ifNoneMatch) else {
            return nil
        }
        return (hit, head, choice.negotiated)
    }

    package static let bytesPerRow = HTTPField.Name("X-Strata-Bytes-Per-Row")!
    package static let contentDPR = HTTPField.Name(ImageParameters.contentDPR)!
    package static let style = HTTPField.Name("X-Strata-Style")!
}

extension ImageEndpoint {
    /// The memberwise initializer, visible to the package's other modules.
    package init(
        cache: ImageCache, encoded: EncodedCache, settings: HTTPServiceSettings, signer: URLSigner?, responder: EncodedResponder,
        pyramids: TilePyramids? = nil
    ) {
        self.cache = cache
        self.encoded = encoded
        self.settings = settings
        self.signer = signer
        self.responder = responder
        self.pyramids = pyramids
    }
}
