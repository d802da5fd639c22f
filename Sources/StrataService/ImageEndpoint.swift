import HTTPTypes
import Hummingbird
import NIOCore
import Strata

/// `GET /images/{key}?…`: checks the signature and the parameters, asks the engine (shedding
/// load when the urgent lane is full and memory cannot answer), negotiates the format, answers
/// `If-None-Match` with 304, and sends the encoded bytes from the encoded cache or a fresh
/// encode (run on the engine's threads).
///
/// The synchronous core — ``prepare(target:)``, then ``reply(to:served:accept:ifNoneMatch:started:engineDone:)``
/// — is shared by the Hummingbird route and by ``WarmPathHandler``, which answers warm requests
/// on the connection's event loop. Cost of a warm request: the engine's memory hit (a hash
/// lookup and a scan of the key's variants), one encoded-cache lookup, and the write of a
/// shared buffer.
struct ImageEndpoint: Sendable {
    let cache: ImageCache
    let encoded: EncodedCache
    let settings: HTTPServiceSettings
    let signer: URLSigner?
    let metrics: ServiceMetrics

    /// A checked image request.
    struct Prepared: Sendable {
        var parameters: ImageParameters
        var request: ImageRequest
    }

    /// An answer, ready to write.
    struct Reply: Sendable {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: ByteBuffer?
        /// The tier label for metrics.
        var tier: String
    }

    /// What remains after ``reply(to:served:accept:ifNoneMatch:started:engineDone:)``: an
    /// answer, or an encode to run.
    enum Outcome: Sendable {
        case reply(Reply)
        case encode(Encode)
    }

    /// An encode to run before answering.
    struct Encode: Sendable {
        var image: PixelImage
        var format: ResponseFormat
        var quality: Int
        var key: EncodedKey
        var headers: HTTPFields
        var etag: String
        var width: String
        var height: String
        var tier: String
    }

    /// The answer and the tier label for metrics (`nil` when no image was served).
    func respond(to request: Request) async -> (Response, tier: String?) {
        let started = ContinuousClock.now
        do {
            let reply = try await image(for: request, started: started)
            return (
                Response(status: reply.status, headers: reply.headers, body: reply.body.map { .init(byteBuffer: $0) } ?? .init()),
                reply.tier
            )
        } catch {
            return (error.response(), nil)
        }
    }

    /// Checks the signature (when signing is on) and parses the target.
    func prepare(target signed: Substring) throws(ServiceError) -> Prepared {
        var target = signed
        if let signer {
            do {
                target = try signer.verify(target)
            } catch {
                switch error {
                case .missing:
                    throw ServiceError(.forbidden, "missing_signature", "this service needs signed URLs: add sig= (see `strata sign`)")
                case .invalid:
                    throw ServiceError(.forbidden, "bad_signature", "the URL's signature does not match its path and query")
                }
            }
        }
        let question = target.firstIndex(of: "?")
        let path = target[..<(question ?? target.endIndex)]
        let query = question.map { target[target.index(after: $0)...] }
        guard path.hasPrefix(ImageParameters.prefix) else {
            throw ServiceError(.notFound, "not_found", "image URLs are /images/{key}?w=…&h=…")
        }
        let parameters = try ImageParameters(
            path: path.dropFirst(ImageParameters.prefix.count), query: query, maxDimension: settings.maxDimension)
        let request = ImageRequest(
            key: CacheKey(parameters.key), box: parameters.box, mode: parameters.mode, tolerance: parameters.tolerance,
            exactSize: parameters.exact)
        return Prepared(parameters: parameters, request: request)
    }

    private func image(for request: Request, started: ContinuousClock.Instant) async throws(ServiceError) -> Reply {
        let prepared = try prepare(target: Substring(request.uri.string))
        // Load shedding: work that would queue behind `maxQueue` others is refused, unless
        // memory already has the answer.
        if cache.queueDepths.urgent >= settings.maxQueue, cache.cachedImage(for: prepared.request) == nil {
            metrics.shed.increment()
            let seconds = max(1, Int(settings.retryAfter.components.seconds))
            throw ServiceError(
                .serviceUnavailable, "overloaded", "the service is busy (\(settings.maxQueue) renders waiting): retry later",
                retryAfter: seconds)
        }
        let served: CachedImage
        do {
            served = try await cache.image(for: prepared.request)
        } catch {
            throw ServiceError(error)
        }
        let outcome = reply(
            to: prepared, served: served, accept: request.headers[values: .accept],
            ifNoneMatch: request.headers[values: .ifNoneMatch], started: started, engineDone: .now)
        switch outcome {
        case .reply(let reply):
            return reply
        case .encode(let work):
            return try await encode(work, key: prepared.parameters.key, started: started)
        }
    }

    /// Everything after the engine's answer that needs no encode: format negotiation, the
    /// validators, 304, raw rows, the encoded cache. Synchronous.
    func reply(
        to prepared: Prepared, served: CachedImage, accept: [String], ifNoneMatch: [String], started: ContinuousClock.Instant,
        engineDone: ContinuousClock.Instant
    ) -> Outcome {
        let parameters = prepared.parameters
        let negotiated = parameters.format == nil
        var quality = parameters.quality ?? settings.quality
        var format = parameters.format ?? .jpeg
        var cachedEncoding: EncodedImage?
        let variant = served.variant.descriptor
        let version = served.variant.sourceVersion.stamp
        func encodedKey(_ format: ResponseFormat) -> EncodedKey {
            EncodedKey(
                key: parameters.key, variant: variant, version: version, format: format,
                quality: format == .jpeg || format == .webp ? quality : 0)
        }
        if negotiated {
            if FormatNegotiation.accepts("image/webp", in: accept) {
                format = .webp
            } else if let hit = encoded.value(for: encodedKey(.jpeg)) ?? encoded.value(for: encodedKey(.png)) {
                // A cached JPEG or PNG of this variant already says whether it has alpha.
                cachedEncoding = hit
                format = hit.format
            } else {
                format = FormatNegotiation.hasTransparency(served.image) ? .png : .jpeg
            }
        }
        if format == .png || format == .raw { quality = 0 }

        let hit = format == .raw ? nil : (cachedEncoding ?? encoded.value(for: encodedKey(format)))
        let etag = hit?.etag ?? Self.etag(version: version, variant: variant, format: format, quality: quality)
        let width = hit?.width ?? String(served.image.width)
        let height = hit?.height ?? String(served.image.height)
        var headers = HTTPFields()
        headers.reserveCapacity(12)
        headers[.eTag] = etag
        if !settings.cacheControl.isEmpty { headers[.cacheControl] = settings.cacheControl }
        if negotiated { headers[.vary] = "Accept" }
        headers[Self.width] = width
        headers[Self.height] = height

        if FormatNegotiation.matches(etag: etag, ifNoneMatch: ifNoneMatch) {
            headers[Self.tier] = served.tier.rawValue
            headers[Self.serverTiming] = Self.timing(started: started, engine: engineDone, encode: nil)
            return .reply(Reply(status: .notModified, headers: headers, body: nil, tier: served.tier.rawValue))
        }
        if let hit {
            headers[.contentType] = format.contentType
            headers[Self.tier] = "encoded"
            headers[Self.serverTiming] = Self.timing(started: started, engine: engineDone, encode: nil)
            return .reply(Reply(status: .ok, headers: headers, body: hit.body, tier: "encoded"))
        }
        if format == .raw {
            headers[Self.bytesPerRow] = String(served.image.bytesPerRow)
            headers[Self.style] = served.image.style.description
            headers[.contentType] = format.contentType
            headers[Self.tier] = served.tier.rawValue
            headers[Self.serverTiming] = Self.timing(started: started, engine: engineDone, encode: nil)
            let body = served.image.withUnsafeBytes { ByteBuffer(bytes: $0) }
            return .reply(Reply(status: .ok, headers: headers, body: body, tier: served.tier.rawValue))
        }
        return .encode(
            Encode(
                image: served.image, format: format, quality: quality, key: encodedKey(format), headers: headers, etag: etag,
                width: width, height: height, tier: served.tier.rawValue))
    }

    /// Encodes on the engine's threads, keeps the bytes in the encoded cache, answers.
    private func encode(_ work: Encode, key: String, started: ContinuousClock.Instant) async throws(ServiceError) -> Reply {
        let engineDone = ContinuousClock.now
        let image = work.image
        let imageFormat = work.format.imageFormat ?? .jpeg
        let quality = work.quality
        let result: Result<[UInt8], ImageEncodingError>
        do {
            result = try await cache.runOnEngineThreads { () throws(ImageEncodingError) -> [UInt8] in
                try ImageEncoder.encode(image, as: imageFormat, quality: quality)
            }
        } catch {
            throw ServiceError(error)
        }
        let body: ByteBuffer
        switch result {
        case .success(let bytes):
            body = ByteBuffer(bytes: bytes)
            encoded.insert(
                EncodedImage(body: body, format: work.format, etag: work.etag, width: work.width, height: work.height), for: work.key)
        case .failure(let error):
            throw ServiceError(.internalServerError, "encode_failed", "\(key.debugDescription): \(error)")
        }
        var headers = work.headers
        headers[.contentType] = work.format.contentType
        headers[Self.tier] = work.tier
        headers[Self.serverTiming] = Self.timing(started: started, engine: engineDone, encode: .now)
        return Reply(status: .ok, headers: headers, body: body, tier: work.tier)
    }

    // MARK: - Headers

    static let tier = HTTPField.Name("X-Strata-Tier")!
    static let width = HTTPField.Name("X-Strata-Width")!
    static let height = HTTPField.Name("X-Strata-Height")!
    static let bytesPerRow = HTTPField.Name("X-Strata-Bytes-Per-Row")!
    static let style = HTTPField.Name("X-Strata-Style")!
    static let serverTiming = HTTPField.Name("Server-Timing")!

    /// A strong validator: the source version, the variant and the encoding name exactly the
    /// bytes sent.
    static func etag(version: UInt64, variant: VariantDescriptor, format: ResponseFormat, quality: Int) -> String {
        "\"\(String(version, radix: 16))-\(variant)-\(format.rawValue)\(quality > 0 ? "-q\(quality)" : "")\""
    }

    /// `Server-Timing`: the engine's part, the encode's part and the whole, in milliseconds
    /// with microsecond digits.
    static func timing(started: ContinuousClock.Instant, engine: ContinuousClock.Instant, encode: ContinuousClock.Instant?) -> String {
        let now = ContinuousClock.now
        var text = "engine;dur="
        append(engine - started, to: &text)
        if let encode {
            text += ", encode;dur="
            append(encode - engine, to: &text)
        }
        text += ", total;dur="
        append(now - started, to: &text)
        return text
    }

    /// Appends `duration` as milliseconds with three decimals (`1.234`).
    static func append(_ duration: Duration, to text: inout String) {
        let micros = max(0, duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000)
        text += String(micros / 1000)
        text += "."
        let fraction = micros % 1000
        if fraction < 100 { text += fraction < 10 ? "00" : "0" }
        text += String(fraction)
    }
}
