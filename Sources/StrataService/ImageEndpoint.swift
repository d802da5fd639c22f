import HTTPTypes
import Hummingbird
import NIOCore
import Strata
import StrataConfiguration

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
        // Byte offsets, not characters: the target is ASCII in practice, and `?` and the
        // prefix are ASCII, so these indices are valid for the Substring too.
        let bytes = target.utf8
        let question = bytes.firstIndex(of: UInt8(ascii: "?"))
        let path = target[..<(question ?? target.endIndex)]
        let query = question.map { target[bytes.index(after: $0)...] }
        guard path.utf8.starts(with: ImageParameters.prefix.utf8) else {
            throw ServiceError(.notFound, "not_found", "image URLs are /images/{key}?w=…&h=…")
        }
        let parameters = try ImageParameters(
            path: path[path.utf8.index(path.startIndex, offsetBy: ImageParameters.prefix.utf8.count)...], query: query,
            maxDimension: settings.maxDimension)
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

    /// The encoding a request gets: its format and quality (from the URL, else negotiated
    /// from `Accept`), and the encoded cache's bytes of it when they are there.
    struct Choice {
        var format: ResponseFormat
        var quality: Int
        var negotiated: Bool
        var hit: EncodedImage?
    }

    /// The encoded cache's key of `served` in `format` (quality only for the lossy formats).
    func encodedKey(_ parameters: ImageParameters, _ served: CachedImage, _ format: ResponseFormat, _ quality: Int) -> EncodedKey {
        EncodedKey(
            key: parameters.key, variant: served.variant.descriptor, version: served.variant.sourceVersion.stamp, format: format,
            quality: format == .jpeg || format == .webp ? quality : 0)
    }

    /// Format negotiation and the encoded-cache lookup, shared by ``reply(to:served:accept:ifNoneMatch:started:engineDone:)``
    /// and the warm path. Without `format`: WebP when `Accept` allows it; else the JPEG or
    /// PNG already cached for this variant; else PNG for an image with transparency, JPEG
    /// otherwise.
    func choose(_ parameters: ImageParameters, served: CachedImage, accept: [String]) -> Choice {
        let negotiated = parameters.format == nil
        var quality = parameters.quality ?? settings.quality
        var format = parameters.format ?? .jpeg
        var cachedEncoding: EncodedImage?
        if negotiated {
            if FormatNegotiation.accepts("image/webp", in: accept) {
                format = .webp
            } else if let hit = encoded.value(for: encodedKey(parameters, served, .jpeg, quality))
                ?? encoded.value(for: encodedKey(parameters, served, .png, quality))
            {
                // A cached JPEG or PNG of this variant already says whether it has alpha.
                cachedEncoding = hit
                format = hit.format
            } else {
                format = FormatNegotiation.hasTransparency(served.image) ? .png : .jpeg
            }
        }
        if format == .png || format == .raw { quality = 0 }
        let hit = format == .raw ? nil : (cachedEncoding ?? encoded.value(for: encodedKey(parameters, served, format, quality)))
        return Choice(format: format, quality: quality, negotiated: negotiated, hit: hit)
    }

    /// What the warm path sends for a request whose variant memory holds: the cached encoding
    /// with its ready-made head, when there is one and the answer is a 200 (not a 304: an
    /// `If-None-Match` that matches goes the ordinary way). `negotiated`: the answer varies
    /// with `Accept`.
    func warmEncoding(
        for prepared: Prepared, served: CachedImage, accept: [String], ifNoneMatch: [String]
    ) -> (image: EncodedImage, head: ByteBuffer, negotiated: Bool)? {
        let choice = choose(prepared.parameters, served: served, accept: accept)
        guard let hit = choice.hit, let head = hit.head, !FormatNegotiation.matches(etag: hit.etag, ifNoneMatch: ifNoneMatch) else {
            return nil
        }
        return (hit, head, choice.negotiated)
    }

    /// Everything after the engine's answer that needs no encode: format negotiation, the
    /// validators, 304, raw rows, the encoded cache. Synchronous.
    func reply(
        to prepared: Prepared, served: CachedImage, accept: [String], ifNoneMatch: [String], started: ContinuousClock.Instant,
        engineDone: ContinuousClock.Instant
    ) -> Outcome {
        let parameters = prepared.parameters
        let choice = choose(parameters, served: served, accept: accept)
        let (format, quality, negotiated, hit) = (choice.format, choice.quality, choice.negotiated, choice.hit)
        let variant = served.variant.descriptor
        let version = served.variant.sourceVersion.stamp
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
                image: served.image, format: format, quality: quality, key: encodedKey(parameters, served, format, quality),
                headers: headers, etag: etag,
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
                EncodedImage(
                    body: body, format: work.format, etag: work.etag, width: work.width, height: work.height,
                    head: warmHead(etag: work.etag, width: work.width, height: work.height, format: work.format, length: body.readableBytes)
                ),
                for: work.key)
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

    /// The head of a warm answer up to its per-response fields (`Vary`, `Server-Timing` and
    /// `Date`, which the warm path appends): the status line and the fields the ordinary path
    /// sends with a 200 from the encoded cache, rendered once per encoding. `nil` when a
    /// configured value is not a legal field value (CR, LF or NUL in `http.cacheControl` or
    /// `http.nodeName`): such answers go the ordinary way, whose HTTP types make values legal,
    /// so no configured text can add a field of its own.
    func warmHead(etag: String, width: String, height: String, format: ResponseFormat, length: Int) -> ByteBuffer? {
        var fields: [(String, String)] = [(HTTPField.Name.eTag.rawName, etag)]
        if !settings.cacheControl.isEmpty { fields.append((HTTPField.Name.cacheControl.rawName, settings.cacheControl)) }
        fields += [
            (Self.width.rawName, width), (Self.height.rawName, height),
            (HTTPField.Name.contentType.rawName, format.contentType), (Self.tier.rawName, "encoded"),
            (HTTPField.Name.contentLength.rawName, String(length)), (HTTPField.Name.server.rawName, "strata"),
            (ServiceResponder.nodeField.rawName, settings.nodeName),
        ]
        guard fields.allSatisfy({ HTTPField.isValidValue($0.1) }) else { return nil }
        var head = ByteBuffer()
        head.writeStaticString("HTTP/1.1 200 OK\r\n")
        for (name, value) in fields {
            head.writeString(name)
            head.writeStaticString(": ")
            head.writeString(value)
            head.writeStaticString("\r\n")
        }
        return head
    }

    /// A strong validator: the source version, the variant and the encoding name exactly the
    /// bytes sent.
    static func etag(version: UInt64, variant: VariantDescriptor, format: ResponseFormat, quality: Int) -> String {
        "\"\(String(version, radix: 16))-\(variant)-\(format.rawValue)\(quality > 0 ? "-q\(quality)" : "")\""
    }

    /// `Server-Timing`: the engine's part, the encode's part and the whole, in milliseconds
    /// with microsecond digits.
    static func timing(started: ContinuousClock.Instant, engine: ContinuousClock.Instant, encode: ContinuousClock.Instant?) -> String {
        var text = ByteBuffer()
        writeTiming(started: started, engine: engine, encode: encode, into: &text)
        return String(buffer: text)
    }

    /// Writes the value of ``timing(started:engine:encode:)`` into `buffer` (the warm path's
    /// way: no string in between).
    static func writeTiming(
        started: ContinuousClock.Instant, engine: ContinuousClock.Instant, encode: ContinuousClock.Instant?, into buffer: inout ByteBuffer
    ) {
        let now = ContinuousClock.now
        buffer.writeStaticString("engine;dur=")
        write(engine - started, into: &buffer)
        if let encode {
            buffer.writeStaticString(", encode;dur=")
            write(encode - engine, into: &buffer)
        }
        buffer.writeStaticString(", total;dur=")
        write(now - started, into: &buffer)
    }

    /// Writes `duration` as milliseconds with three decimals (`1.234`).
    static func write(_ duration: Duration, into buffer: inout ByteBuffer) {
        let micros = max(0, duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000)
        buffer.writeString(String(micros / 1000))
        let fraction = micros % 1000
        buffer.writeInteger(UInt8(ascii: "."))
        buffer.writeInteger(UInt8(ascii: "0") + UInt8(fraction / 100))
        buffer.writeInteger(UInt8(ascii: "0") + UInt8(fraction / 10 % 10))
        buffer.writeInteger(UInt8(ascii: "0") + UInt8(fraction % 10))
    }
}
