import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Strata
import StrataConfiguration

/// thumbor's URLs (`thumbor.enabled`): `/(unsafe|SIGNATURE)/…/IMAGE` at the root or under
/// `thumbor.prefix`, answered through Strata's tiers like `/images`.
///
/// The path is parsed as thumbor parses it (``ThumborURL``), its signature checked
/// (``ThumborSigner``), its filters read (``ThumborFilter``; one Strata does not have is a 400
/// naming it), and the original's size read once per source version (the memo IIIF shares).
/// The engine is asked for the exact resized size (``ThumborPlan``): a variant within
/// tolerance is resampled, so one render serves nearby sizes, and the filters run at the encode,
/// which the encoded cache keeps (the warm answer is its lookup). `meta/` answers thumbor's JSON
/// description instead of the image. Errors are JSON, with thumbor's statuses (400 for a bad or
/// missing signature, 404 for a missing original).
///
/// Cost of a warm request: the parse and HMAC-SHA1 of the path, the memo lookup, the engine's
/// memory hit and one encoded-cache lookup.
package struct ThumborEndpoint: Sendable {
    package let images: ImageEndpoint
    package let settings: ThumborSettings
    package let signer: ThumborSigner?

    package init(images: ImageEndpoint, settings: ThumborSettings) {
        self.images = images
        self.settings = settings
        signer = settings.securityKey.map(ThumborSigner.init(key:))
    }

    var cache: ImageCache { images.cache }
    var responder: EncodedResponder { images.responder }

    /// Whether the route answers `path` (it is enabled; at the root it takes what no other route
    /// took).
    package func answers(_ path: String) -> Bool {
        guard settings.enabled else { return false }
        return settings.prefix.isEmpty || path.hasPrefix(settings.prefix + "/")
    }

    /// The answer and the tier label for metrics (`nil` when no image was served).
    package func respond(to request: Request) async -> (Response, tier: String?) {
        do {
            let reply = try await answer(request)
            return (reply.response, reply.tier)
        } catch {
            // An original that cannot be decoded is thumbor's 400, not Strata's 422.
            guard error.status == .unprocessableContent else { return (error.response(), nil) }
            return (ServiceError(.badRequest, error.code, error.message).response(), nil)
        }
    }

    /// A request checked and parsed: the URL, its filters, and the key of the source.
    package struct Parsed: Sendable {
        package var url: ThumborURL
        package var filters: [ThumborFilter]
        package var key: String
    }

    /// Parses and checks the path (after the route's prefix): the grammar, the signature or
    /// `unsafe`, the image's key and the filters. Every refusal is a 400, as thumbor's.
    package func parse(path: Substring) throws(ServiceError) -> Parsed {
        guard let url = ThumborURL(path: path) else {
            throw ServiceError(.badRequest, "bad_url", "not a thumbor URL: /(unsafe|SIGNATURE)/[options/]IMAGE")
        }
        switch url.authority {
        case .none:
            throw ServiceError(
                .badRequest, "missing_signature", "the URL has neither a signature nor unsafe/ (thumbor's URLs start with one)")
        case .unsafe:
            guard settings.allowUnsafe else {
                throw ServiceError(.badRequest, "unsafe_refused", "unsafe/ URLs are not served (thumbor.allowUnsafe): sign the URL")
            }
        case .signature(let signature):
            guard let signer, signer.isValid(signature, for: url.signed) else {
                throw ServiceError(.badRequest, "bad_signature", "the URL's signature does not match its path (thumbor.securityKey)")
            }
        }
        let key = try self.key(url.image)
        let filters = try ThumborFilter.parse(ImageParameters.decoded(url.filters))
        return Parsed(url: url, filters: filters, key: key)
    }

    /// The source key an image part names: percent-decoded; a full URL only under one of
    /// `thumbor.urlPrefixes` (the rest is the key).
    package func key(_ image: Substring) throws(ServiceError) -> String {
        var key = String(ImageParameters.decoded(image))
        if key.hasPrefix("http://") || key.hasPrefix("https://") {
            guard let prefix = settings.urlPrefixes.first(where: { key.hasPrefix($0) }) else {
                throw ServiceError(
                    .badRequest, "url_refused",
                    "the image \(key.debugDescription) is a URL outside thumbor.urlPrefixes: Strata reads its configured source only")
            }
            key = String(key.dropFirst(prefix.count))
        }
        try ImageParameters.checkKey(key)
        return key
    }

    private func answer(_ request: Request) async throws(ServiceError) -> ImageReply {
        let started = ContinuousClock.now
        let target = Substring(request.uri.string)
        var path = target[..<(target.firstIndex(of: "?") ?? target.endIndex)]
        path = path.dropFirst(settings.prefix.count)
        let parsed = try parse(path: path)
        // A restricted key (`iiif.auth.rules`) needs its credential; thumbor's URLs have no
        // degraded size.
        let decision = images.access.decide(key: parsed.key, headers: request.headers)
        if case .refused(let service, _) = decision { throw AccessGate.refusal(service, key: parsed.key) }
        var reply = try await answer(request, parsed: parsed, started: started)
        AccessGate.seal(&reply.headers, status: reply.status, decision)
        return reply
    }

    private func answer(_ request: Request, parsed: Parsed, started: ContinuousClock.Instant) async throws(ServiceError) -> ImageReply {
        try responder.admit(unless: images.originals.knows(parsed.key))
        let original = try await images.originals.original(for: parsed.key, cache: cache)
        let plan = try ThumborPlan(
            url: parsed.url, filters: parsed.filters, key: parsed.key, original: original.size, colour: responder.colour.current,
            maxDimension: images.settings.maxDimension)
        if parsed.url.meta {
            let json = ThumborMeta.json(parsed, plan: plan, original: original)
            return ImageReply(
                status: .ok, headers: [.contentType: "application/json"], body: ByteBuffer(bytes: json), tier: "meta")
        }
        let (format, negotiated) = self.format(plan, original: original, accept: request.headers[values: .accept])
        var extra = HTTPFields()
        if negotiated { extra[.vary] = "Accept" }
        let ifNoneMatch = request.headers[values: .ifNoneMatch]
        // The encoding known from the URL and the memo alone: answered without the engine.
        if let hit = predictedHit(parsed, plan: plan, original: original, format: format) {
            return responder.answer(hit: hit, extra: extra, ifNoneMatch: ifNoneMatch, started: started)
        }
        var marks: [String: PixelImage] = [:]
        var versions: [String] = []
        for mark in plan.watermarkKeys where marks[mark] == nil {
            let key = try self.key(Substring(mark))
            // Its pixels would go into an answer that is not restricted.
            if images.access.protects(key) {
                throw ServiceError(
                    .badRequest, "watermark_refused", "the watermark \(key.debugDescription) is a restricted image (iiif.auth.rules)")
            }
            let loaded = try await watermark(key)
            marks[mark] = loaded.image
            versions.append(loaded.version)
        }
        // One memory lookup: shed only what would render, then go on from it.
        let memoryHit = cache.cachedImage(for: plan.request)
        try responder.admit(unless: memoryHit != nil)
        let served: CachedImage
        do {
            served = try await cache.image(for: plan.request, memoryHit: memoryHit)
        } catch {
            throw ServiceError(error)
        }
        let engineDone = ContinuousClock.now
        // A variant of another version than the memo's: the memo forgets it (the next request
        // reads the original's header again).
        if served.sourceVersion != .unknown { images.originals.forget(parsed.key, unless: served.sourceVersion) }
        let key = encodedKey(
            parsed, plan: plan, variant: served.variant.descriptor, version: served.variant.sourceVersion, format: format,
            markVersions: versions)
        let quality = key.quality
        let (steps, loadedMarks) = (plan, marks)
        let derive: @Sendable (PixelImage) -> PixelImage = { steps.apply(to: $0, marks: loadedMarks) }
        var work = EncodedResponder.Work(
            served: served, key: key, size: plan.finalSize(from: served.image.size), hit: nil, extra: extra,
            derive: plan.steps.isEmpty ? nil : derive, warm: true)
        if let maxBytes = plan.maxBytes, let imageFormat = format.imageFormat {
            let image = served.image
            let avifSpeed = images.settings.avifSpeed
            work.reserve = ImageEncoder.workingBytes(as: imageFormat, size: work.size) + work.size.pixelCount * 4
            work.encode = { () throws(ServiceError) -> [UInt8] in
                try Self.encode(derive(image), as: imageFormat, quality: quality, maxBytes: maxBytes, speed: avifSpeed)
            }
        }
        return try await responder.answer(work, ifNoneMatch: ifNoneMatch, started: started, engineDone: engineDone)
    }

    /// The answer's format: a `format()` filter's, else WebP where `thumbor.autoWebp` is on and
    /// `Accept` takes it (`negotiated`: the answer varies with `Accept`), else the original's.
    func format(_ plan: ThumborPlan, original: IIIFOriginals.Original, accept: [String]) -> (ResponseFormat, negotiated: Bool) {
        if let chosen = plan.format { return (chosen, false) }
        guard settings.autoWebp else { return (Self.format(of: original.format), false) }
        return (FormatNegotiation.accepts("image/webp", in: accept) ? .webp : Self.format(of: original.format), true)
    }

    /// The encoded cache's key of an answer: the variant served, the format and quality, and the
    /// plan's derivation (the variant's gravity and operations, the steps, the watermarks'
    /// versions, `strip_icc`).
    func encodedKey(
        _ parsed: Parsed, plan: ThumborPlan, variant: VariantDescriptor, version: SourceVersion, format: ResponseFormat,
        markVersions: [String]
    ) -> EncodedKey {
        let quality = format.hasQuality ? plan.quality ?? settings.quality : 0
        var derivation = plan.derivation
        if !markVersions.isEmpty { derivation += ";marks=" + markVersions.joined(separator: ",") }
        // strip_icc(): an `original` answer without its profile (thumbor drops it, pixels as they are).
        let stripsProfile = parsed.filters.contains(.stripICC) && plan.request.key.colourOutput == .original
        if stripsProfile { derivation += ";strip_icc" }
        return EncodedKey(
            key: parsed.key, variant: variant, version: version.stamp, format: format,
            quality: quality, colour: stripsProfile ? .srgb : plan.request.key.colourOutput, derivation: derivation,
            speed: format == .avif ? images.settings.avifSpeed : nil)
    }

    /// The answer to `path` (after the route's prefix) when everything is at hand without
    /// waiting: a URL that parses and checks, an original whose size the memo knows, no
    /// watermark, and the encoding, with its ready-made head, in the encoded cache — for ``WarmPathHandler`` to write on the event loop. `nil` passes the
    /// request on (every refusal included: the route answers it). Cost: the parse and HMAC, a
    /// memo lookup, the plan's arithmetic and an encoded lookup (the variant predicted from the
    /// plan: ``ThumborPlan/predictedVariant``), or a memory lookup and a second one.
    package func warmAnswer(
        path: Substring, accept: [String], ifNoneMatch: [String]
    ) -> (
        image: EncodedImage, head: ByteBuffer, negotiated: Bool
    )? {
        guard settings.prefix.isEmpty || path.hasPrefix(settings.prefix + "/"),
            let parsed = try? parse(path: path.dropFirst(settings.prefix.count)), !parsed.url.meta, !images.access.protects(parsed.key),
            let original = images.originals.known(parsed.key),
            let plan = try? ThumborPlan(
                url: parsed.url, filters: parsed.filters, key: parsed.key, original: original.size, colour: responder.colour.current,
                maxDimension: images.settings.maxDimension),
            plan.watermarkKeys.isEmpty
        else { return nil }
        let (format, negotiated) = self.format(plan, original: original, accept: accept)
        var found = predictedHit(parsed, plan: plan, original: original, format: format)
        if found == nil, let served = cache.cachedImage(for: plan.request) {
            cache.countMemoryHit()
            found = images.encoded.value(
                for: encodedKey(
                    parsed, plan: plan, variant: served.variant.descriptor, version: served.variant.sourceVersion, format: format,
                    markVersions: []))
        }
        guard let hit = found, let head = hit.head, !FormatNegotiation.matches(etag: hit.etag, ifNoneMatch: ifNoneMatch) else { return nil }
        return (hit, head, negotiated)
    }

    /// The encoded cache's entry for the variant the plan predicts, of the memo's version (no
    /// watermark: their versions are only known once read).
    func predictedHit(_ parsed: Parsed, plan: ThumborPlan, original: IIIFOriginals.Original, format: ResponseFormat) -> EncodedImage? {
        guard plan.watermarkKeys.isEmpty, let variant = plan.predictedVariant else { return nil }
        return images.encoded.value(
            for: encodedKey(parsed, plan: plan, variant: variant, version: original.version, format: format, markVersions: []))
    }

    /// thumbor's `max_bytes(N)`: encodes at `quality`, then, while the bytes are over, at three
    /// quarters of the quality (JPEG, WebP and AVIF); when the quality would fall below 10, the
    /// first encoding is sent, as thumbor sends it. Formats without a quality are encoded once.
    static func encode(
        _ image: PixelImage, as format: ImageFormat, quality: Int, maxBytes: Int, speed: Int
    ) throws(ServiceError)
        -> [UInt8]
    {
        func encoded(_ quality: Int) throws(ServiceError) -> [UInt8] {
            do {
                return try ImageEncoder.encode(image, as: format, quality: quality, speed: speed)
            } catch {
                throw ServiceError(.internalServerError, "encode_failed", "\(error)")
            }
        }
        let first = try encoded(quality)
        guard format == .jpeg || format == .webp || format == .avif else { return first }
        var (bytes, quality) = (first, quality)
        while bytes.count > maxBytes {
            quality = quality * 3 / 4
            guard quality >= 10 else { return first }
            bytes = try encoded(quality)
        }
        return bytes
    }

    /// A watermark image by source key, through the engine (its tiers keep it), at most 2048
    /// pixels a side; its version is the original's.
    private func watermark(_ key: String) async throws(ServiceError) -> Watermarks.Loaded {
        let side = Watermarks.maximumSide
        do {
            let served = try await cache.image(for: ImageRequest(key: CacheKey(key), box: PixelSize(width: side, height: side)))
            return Watermarks.Loaded(
                image: ThumborPixels.premultiplied(served.image), version: String(served.sourceVersion.stamp, radix: 16))
        } catch {
            throw ServiceError(
                .badRequest, "watermark_failed", "the watermark \(key.debugDescription) cannot be read: \(ServiceError(error).message)")
        }
    }

    /// The answer's format when no filter names one: the original's (thumbor keeps it), JPEG for
    /// the formats Strata does not write.
    static func format(of original: ImageFormat) -> ResponseFormat {
        switch original {
        case .png: .png
        case .webp: .webp
        case .gif: .gif
        case .avif: .avif
        case .jpeg, .heic, .tiff, .jp2, .jxl: .jpeg
        }
    }
}
