import HTTPTypes
import Hummingbird
import NIOCore
import Strata
import Tracing
import StrataConfiguration

/// The encodes in flight, keyed by encoding: the engine's ``Coalescer``, one operation per
/// ``EncodedKey`` that every request for it joins.
package typealias EncodeCoalescer = Coalescer<EncodedKey, Void, Int, EncodedImage, ServiceError>

/// An image answer, ready to write, with the tier label for metrics.
package struct ImageReply: Sendable {
    package var status: HTTPResponse.Status
    package var headers: HTTPFields
    package var body: ByteBuffer?
    package var tier: String

    package var response: Response {
        Response(status: status, headers: headers, body: body.map { .init(byteBuffer: $0) } ?? .init())
    }
}

/// The one way the service answers with encoded image bytes, for `/images` and IIIF alike:
/// load shedding before the engine (``admit(unless:)``), the strong validator (``EncodedKey/etag``),
/// `If-None-Match` → 304, the encoded cache, the encode (after a IIIF tile's cut) on the
/// engine's threads — one per encoding however many requests ask for it at once: the others
/// wait for it (``encodes``, the engine's ``Coalescer``) — and its one insertion, and the
/// answer's fields — one builder
/// (``fields(etag:size:format:)``) for the ordinary answers and for the warm path's ready-made
/// head (``warmHead(_:length:)``).
///
/// Cost of an encoded-cache answer: one lookup (none when the caller looked it up) and its
/// five fields; of a miss: a coalescer hand-off, and for the request that starts the encode a
/// second lookup, a job on the engine's urgent lane (cut, encode) and an insertion.
package struct EncodedResponder: Sendable {
    package let cache: ImageCache
    package let encoded: EncodedCache
    package let settings: HTTPServiceSettings
    package let metrics: ServiceMetrics
    package let probes: ServiceProbes
    /// `color.output` in force (read when a request's key is made).
    package let colour: ColourChoice
    /// The profiles `original` answers embed.
    package let originalProfiles = OriginalProfiles()
    /// Encodes in flight, one per encoding (``EncodedKey``): a request whose encoding another
    /// is making waits for it rather than encoding it again (``answer(_:ifNoneMatch:started:engineDone:)``).
    package let encodes: EncodeCoalescer
    /// Whether the configured field values (`http.cacheControl`, `http.nodeName`) are legal
    /// field values, which a ready-made head needs.
    private let legalConfiguredValues: Bool

    package init(
        cache: ImageCache, encoded: EncodedCache, settings: HTTPServiceSettings, metrics: ServiceMetrics, probes: ServiceProbes,
        colour: ColourChoice = ColourChoice(.srgb), encodes: EncodeCoalescer = EncodeCoalescer()
    ) {
        self.cache = cache
        self.encodes = encodes
        self.colour = colour
        self.encoded = encoded
        self.settings = settings
        self.metrics = metrics
        self.probes = probes
        legalConfiguredValues = HTTPField.isValidValue(settings.cacheControl) && HTTPField.isValidValue(settings.nodeName)
    }

    /// Load shedding: work that would queue behind `http.maxQueue` others on the engine's
    /// urgent lane is refused (503 `overloaded`, `Retry-After`), unless `ready` (asked only
    /// then) says it needs no work there: memory holds the variant asked for, or a IIIF
    /// original's size is known.
    package func admit(unless ready: @autoclosure () -> Bool) throws(ServiceError) {
        guard cache.queueDepths.urgent >= settings.maxQueue, !ready() else { return }
        metrics.shed.increment()
        throw ServiceError(
            .serviceUnavailable, "overloaded", "the service is busy (\(settings.maxQueue) renders waiting): retry later",
            retryAfter: max(1, Int(settings.retryAfter.components.seconds)))
    }

    /// Whether any pixel of `image` is translucent: the scan runs on the engine's urgent lane,
    /// never on the caller's thread (an event loop or the cooperative pool).
    package func hasTransparency(_ image: PixelImage) async throws(ServiceError) -> Bool {
        let probe = probes.transparencyScanned
        do {
            return try await cache.runOnEngineThreads { () -> Bool in
                probe?()
                return FormatNegotiation.hasTransparency(image)
            }.get()
        } catch {
            throw ServiceError(error)
        }
    }

    /// One encoded answer to make.
    package struct Work: Sendable {
        /// What the engine served: the pixels and their tier.
        package var served: CachedImage
        /// The encoding: variant, source version, format, quality, derivation.
        package var key: EncodedKey
        /// The encoded image's size.
        package var size: PixelSize
        /// The encoded cache's entry when the caller looked it up already (`nil`: look it up).
        package var hit: EncodedImage?
        /// The route's own fields (IIIF: CORS and `Link`; a negotiated format: `Vary`).
        package var extra: HTTPFields
        /// Cut from the variant before the encode (a IIIF tile); `nil` encodes it whole.
        package var derive: (@Sendable (PixelImage) -> PixelImage)?
        /// Whether the entry gets the warm path's ready-made head (`/images` answers).
        package var warm: Bool
        /// Makes the bytes instead of the format's encoder (an animation, from its original),
        /// holding at most `reserve` bytes of `render.memoryLimit` while it runs.
        package var encode: (@Sendable () throws(ServiceError) -> [UInt8])? = nil
        package var reserve = 0
    }

    /// The answer to `work`: 304 when `If-None-Match` names its validator, else the encoded
    /// cache's bytes, else a fresh encode (kept in the encoded cache), shared with the requests
    /// for the same encoding that arrive while it runs.
    package func answer(
        _ work: Work, ifNoneMatch: [String], started: ContinuousClock.Instant, engineDone: ContinuousClock.Instant
    ) async throws(ServiceError) -> ImageReply {
        let hit = work.hit ?? encoded.value(for: work.key)
        let etag = hit?.etag ?? work.key.etag
        let fields = fields(etag: etag, size: hit?.size ?? work.size, format: work.key.format)
        if FormatNegotiation.matches(etag: etag, ifNoneMatch: ifNoneMatch) {
            return notModified(work.extra, fields: fields, tier: work.served.tier.rawValue, started: started, engineDone: engineDone)
        }
        var headers = work.extra
        if let hit {
            headers.append(contentsOf: fields)
            headers[Self.tier] = "encoded"
            headers[Self.serverTiming] = Self.timing(started: started, engine: engineDone, encode: nil)
            return ImageReply(status: .ok, headers: headers, body: hit.body, tier: "encoded")
        }
        let made: (value: EncodedImage, joined: Bool)
        do {
            made = try await encodes.run(group: work.key, descriptor: (), priority: 0, joining: { _ in true }) {
                [self] _ async throws(ServiceError) -> EncodedImage in
                try await encode(work, etag: etag, fields: fields)
            }
        } catch {
            switch error {
            case .failed(let failure): throw failure
            case .cancelled: throw ServiceError(.serviceUnavailable, "cancelled", "the request was cancelled", retryAfter: 1)
            }
        }
        if made.joined { metrics.encodesJoined.increment() }
        headers.append(contentsOf: fields)
        headers[Self.tier] = work.served.tier.rawValue
        headers[Self.serverTiming] = Self.timing(started: started, engine: engineDone, encode: .now)
        return ImageReply(status: .ok, headers: headers, body: made.value.body, tier: work.served.tier.rawValue)
    }

    /// The shared part of ``answer(_:ifNoneMatch:started:engineDone:)``'s miss, run once per
    /// encoding however many requests wait for it (``encodes``): the encoded cache's entry when
    /// an encode that finished meanwhile left one, else the encode on the engine's threads and
    /// its one insertion.
    private func encode(_ work: Work, etag: String, fields: HTTPFields) async throws(ServiceError) -> EncodedImage {
        if let done = encoded.value(for: work.key) { return done }
        let image = work.served.image
        let derive = work.derive
        let format = work.key.format.imageFormat ?? .jpeg
        let quality = work.key.quality
        let speed = work.key.speed ?? settings.avifSpeed
        let profile =
            work.key.colour == .original
            ? await originalProfiles.profile(for: work.key.key, version: work.served.variant.sourceVersion, cache: cache) : nil
        await probes.encodeStarting?()
        let probe = probes.encodeRunning
        let result: Result<[UInt8], EncodeFailure>
        // The encode's span (with tracing on): its wait for a thread is its child.
        let span = cache.options.tracing.isEnabled ? Spans.start("strata.encode", parent: ServiceContext.current ?? .topLevel) : nil
        span?.attributes["strata.format"] = work.key.format.rawValue
        span?.attributes["strata.quality"] = quality
        span?.attributes["strata.size"] = "\(work.size)"
        do {
            result = try await Spans.around(span) { () async throws(ImageCacheError) -> Result<[UInt8], EncodeFailure> in
                let budget = cache.memoryBudget
                let custom = work.encode
                let reserved = custom != nil ? work.reserve : ImageEncoder.workingBytes(as: format, size: image.size)
                let result = try await cache.runOnEngineThreads { () throws(EncodeFailure) -> [UInt8] in
                    probe?()
                    return try Self.withinBudget(budget, reserved) { () throws(EncodeFailure) -> [UInt8] in
                        if let custom {
                            do throws(ServiceError) { return try custom() } catch { throw .refused(error) }
                        }
                        do throws(ImageEncodingError) {
                            return try ImageEncoder.encode(
                                derive?(image) ?? image, as: format, quality: quality, profile: profile, speed: speed)
                        } catch {
                            throw .encoding(error)
                        }
                    }
                }
                switch result {
                case .success(let bytes): span?.attributes["strata.bytes"] = bytes.count
                case .failure(let error): span?.recordError(error)
                }
                return result
            }
        } catch {
            throw ServiceError(error)
        }
        let body: ByteBuffer
        switch result {
        case .success(let bytes):
            body = ByteBuffer(bytes: bytes)
        case .failure(.encoding(let error)):
            throw ServiceError(.internalServerError, "encode_failed", "\(work.key.key.debugDescription): \(error)")
        case .failure(.overLimit(let refusal)):
            throw ServiceError(ImageCacheError.overMemoryLimit(key: work.key.key, refusal))
        case .failure(.refused(let error)):
            throw error
        }
        metrics.encoded(work.key.format)
        let made = EncodedImage(
            body: body, format: work.key.format, etag: etag, size: work.size,
            head: work.warm ? warmHead(fields, length: body.readableBytes) : nil)
        encoded.insert(made, for: work.key)
        return made
    }

    /// The answer from an encoded-cache entry a route found before asking the engine (its
    /// encoding known from the request alone, as a thumbor URL's exact size is): 304 when
    /// `If-None-Match` names it, else its bytes, `X-Strata-Tier: encoded`.
    package func answer(hit: EncodedImage, extra: HTTPFields, ifNoneMatch: [String], started: ContinuousClock.Instant) -> ImageReply {
        let fields = fields(etag: hit.etag, size: hit.size, format: hit.format)
        let now = ContinuousClock.now
        if FormatNegotiation.matches(etag: hit.etag, ifNoneMatch: ifNoneMatch) {
            return notModified(extra, fields: fields, tier: "encoded", started: started, engineDone: now)
        }
        var headers = extra
        headers.append(contentsOf: fields)
        headers[Self.tier] = "encoded"
        headers[Self.serverTiming] = Self.timing(started: started, engine: now, encode: nil)
        return ImageReply(status: .ok, headers: headers, body: hit.body, tier: "encoded")
    }

    /// A 304: the route's fields and the 200's (`fields`) but `Content-Type`.
    package func notModified(
        _ extra: HTTPFields, fields: HTTPFields, tier: String, started: ContinuousClock.Instant, engineDone: ContinuousClock.Instant
    ) -> ImageReply {
        var headers = extra
        headers.append(contentsOf: fields)
        headers[.contentType] = nil
        headers[Self.tier] = tier
        headers[Self.serverTiming] = Self.timing(started: started, engine: engineDone, encode: nil)
        return ImageReply(status: .notModified, headers: headers, body: nil, tier: tier)
    }

    // MARK: - The head

    package static let tier = HTTPField.Name("X-Strata-Tier")!
    package static let width = HTTPField.Name("X-Strata-Width")!
    package static let height = HTTPField.Name("X-Strata-Height")!
    package static let serverTiming = HTTPField.Name("Server-Timing")!

    /// The fields of an encoding's 200 that are the same in every answer with it: `ETag`,
    /// `Cache-Control` (`http.cacheControl`), `X-Strata-Width`/`-Height`, `Content-Type`; a 304
    /// sends them but `Content-Type`, and the warm head is rendered from them.
    package func fields(etag: String, size: PixelSize, format: ResponseFormat) -> HTTPFields {
        var fields = HTTPFields()
        fields.reserveCapacity(5)
        fields[.eTag] = etag
        if !settings.cacheControl.isEmpty { fields[.cacheControl] = settings.cacheControl }
        fields[Self.width] = String(size.width)
        fields[Self.height] = String(size.height)
        fields[.contentType] = format.contentType
        return fields
    }

    /// The head of a warm answer up to its per-response fields (`Vary`, `Server-Timing` and
    /// `Date`, which the warm path appends): the status line, `fields`, and what the ordinary
    /// path adds to a 200 from the encoded cache (`X-Strata-Tier: encoded`, `Content-Length`,
    /// `Server`, `X-Strata-Node`), rendered once per encoding. `nil` when a configured value is
    /// not a legal field value (CR, LF or NUL in `http.cacheControl` or `http.nodeName`): such
    /// answers go the ordinary way, whose HTTP types make values legal, so no configured text
    /// can add a field of its own.
    package func warmHead(_ fields: HTTPFields, length: Int) -> ByteBuffer? {
        guard legalConfiguredValues else { return nil }
        var head = ByteBuffer()
        head.writeStaticString("HTTP/1.1 200 OK\r\n")
        func write(_ name: String, _ value: String) {
            head.writeString(name)
            head.writeStaticString(": ")
            head.writeString(value)
            head.writeStaticString("\r\n")
        }
        for field in fields { write(field.name.rawName, field.value) }
        write(Self.tier.rawName, "encoded")
        write(HTTPField.Name.contentLength.rawName, String(length))
        write(HTTPField.Name.server.rawName, "strata")
        write(ServiceResponder.nodeField.rawName, settings.nodeName)
        return head
    }

    /// `Server-Timing`: the engine's part, the encode's part and the whole, in milliseconds
    /// with microsecond digits.
    package static func timing(
        started: ContinuousClock.Instant, engine: ContinuousClock.Instant, encode: ContinuousClock.Instant?
    ) -> String {
        var text = ByteBuffer()
        writeTiming(started: started, engine: engine, encode: encode, into: &text)
        return String(buffer: text)
    }

    /// Writes the value of ``timing(started:engine:encode:)`` into `buffer` (the warm path's
    /// way: no string in between).
    package static func writeTiming(
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
    package static func write(_ duration: Duration, into buffer: inout ByteBuffer) {
        let micros = max(0, duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000)
        buffer.writeString(String(micros / 1000))
        let fraction = micros % 1000
        buffer.writeInteger(UInt8(ascii: "."))
        buffer.writeInteger(UInt8(ascii: "0") + UInt8(fraction / 100))
        buffer.writeInteger(UInt8(ascii: "0") + UInt8(fraction / 10 % 10))
        buffer.writeInteger(UInt8(ascii: "0") + UInt8(fraction % 10))
    }
}

extension EncodedResponder {
    /// Runs `encode` once `bytes` fit in `budget` (waiting in the urgent lane).
    fileprivate static func withinBudget(
        _ budget: MemoryBudget, _ bytes: Int, _ encode: () throws(EncodeFailure) -> [UInt8]
    ) throws(EncodeFailure) -> [UInt8] {
        do throws(MemoryBudgetFailure<EncodeFailure>) {
            return try budget.withReservation(bytes, lane: .urgent, encode)
        } catch {
            switch error {
            case .refused(let refusal): throw .overLimit(refusal)
            case .failed(let failure): throw failure
            }
        }
    }
}

/// Why an encode on the engine's threads produced no bytes.
fileprivate enum EncodeFailure: Error {
    case encoding(ImageEncodingError)
    case overLimit(MemoryBudgetError)
    /// A custom encode's own refusal (an animation past its limits).
    case refused(ServiceError)
}
