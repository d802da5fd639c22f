import Foundation
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypesHTTP1
import Strata
import Tracing

/// Answers warm image requests on the connection's event loop, before Hummingbird sees them:
/// an HTTP/1.1 keep-alive `GET /images/…` whose variant is in the engine's memory tier and whose
/// encoding is in the encoded cache, or a IIIF image request or a thumbor URL whose encoding is
/// (``IIIFEndpoint/warmTile(path:authority:ifNoneMatch:)``,
/// ``ThumborEndpoint/warmAnswer(path:accept:ifNoneMatch:)``), is written back at once — no task, no thread hop, no
/// conversion to HTTP types and no response encoder: the encoding's head was rendered when it
/// was cached (``EncodedResponder/warmHead(_:length:)``), and the answer
/// is that head, three per-response fields and the shared body, written as bytes below NIO's
/// response encoder (through ``WarmPathOutput``). Every other request (and any request while
/// an earlier one on the connection is still being answered by Hummingbird, so that responses
/// keep their order) is passed on unchanged, and Hummingbird answers it, errors included; what
/// was parsed of an image request passed on goes with it (``PreparedHandOff``), so the route
/// does not parse its target again.
///
/// One per connection, between NIO's HTTP/1 decoder and the conversion to HTTP types
/// (``WarmHTTP1Channel`` puts it there). Cost of a warm answer: the URL's parse (a dictionary
/// lookup when its event loop has seen the URL: ``PreparedTargets``), the engine's memory
/// lookup, one encoded lookup, a copy of the head (~300 bytes) and one `writev`.
package final class WarmPathHandler: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart
    package typealias OutboundIn = HTTPServerResponsePart
    package typealias OutboundOut = HTTPServerResponsePart

    private let endpoint: ImageEndpoint
    /// IIIF image requests' warm answers (`nil`: every IIIF request is passed on).
    private let iiif: IIIFEndpoint?
    /// thumbor URLs' warm answers (`nil`: the route is off).
    private let thumbor: ThumborEndpoint?
    /// What each route's warm answer counts, looked up once.
    private let imagesMetrics: ServiceMetrics.WarmRoute
    private let iiifMetrics: ServiceMetrics.WarmRoute
    private let thumborMetrics: ServiceMetrics.WarmRoute
    /// Checked targets of this connection's event loop.
    private let targets: NIOLoopBound<PreparedTargets>
    /// Where the parse of an image request passed on is left for the route.
    private let handOff: PreparedHandOff
    /// Requests passed on to Hummingbird whose response has not ended yet.
    private var passedOn = 0
    /// Of the requests passed on whose answer has not started, oldest first: whether it is a
    /// `HEAD` (or `CONNECT`), answered without a body. Room for a few is made once per
    /// connection; a client pipelining more grows it.
    private var bodiless = CircularBuffer<Bool>(initialCapacity: 4)
    /// The answer being written is to a `HEAD` (or `CONNECT`) request.
    private var answeringBodiless = false
    /// The rest of a request answered here (its body parts and end) is dropped.
    private var dropping = false
    private var date = HTTPDate()
    /// `tracing.enabled`: a warm answer gets a server span (`traceWarmAnswer`).
    private let traces: Bool
    /// `tracing.includeKeys`.
    private let tracesKeys: Bool
    /// Where warm answers are written as bytes; `nil` (everything passed on) until
    /// ``WarmHTTP1Channel`` sets it, and again once the pipeline is torn down.
    package var output: ChannelHandlerContext?
    /// The connection's request and response phases, told of each warm answer (whose end does
    /// not pass through the encoder, where ``RequestPhases`` counts the others').
    package var phases: RequestPhases?

    package init(
        endpoint: ImageEndpoint, iiif: IIIFEndpoint?, thumbor: ThumborEndpoint? = nil, metrics: ServiceMetrics,
        targets: NIOLoopBound<PreparedTargets>, handOff: PreparedHandOff
    ) {
        self.endpoint = endpoint
        self.iiif = iiif
        self.thumbor = thumbor
        imagesMetrics = metrics.warmRoute("images")
        iiifMetrics = metrics.warmRoute("iiif")
        thumborMetrics = metrics.warmRoute("thumbor")
        self.targets = targets
        self.handOff = handOff
        traces = endpoint.cache.options.tracing.isEnabled
        tracesKeys = endpoint.cache.options.tracing.includesKeys
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if passedOn == 0, let output {
                switch warmAnswer(head, allocator: context.channel.allocator) {
                case .answer(let answer, let body):
                    dropping = true
                    output.write(NIOAny(answer), promise: nil)
                    output.writeAndFlush(NIOAny(body), promise: nil)
                    phases?.answeredBelowTheEncoder()
                    return
                case .passOn(let entry):
                    if let entry { handOff.put(entry, for: head.uri) }
                }
            }
            passedOn += 1
            bodiless.append(head.method == .HEAD || head.method == .CONNECT)
            context.fireChannelRead(data)
        case .body:
            if !dropping { context.fireChannelRead(data) }
        case .end:
            if dropping {
                dropping = false
            } else {
                context.fireChannelRead(data)
            }
        }
    }

    /// Hummingbird's answers on their way to NIO's encoder. An answer to a `HEAD` (or `CONNECT`)
    /// request goes without its body: its body parts are dropped here, and the encoder's bytes
    /// for its end (a chunked body's last chunk) are dropped by ``WarmPathOutput``. NIO's paired
    /// decoder would tell the encoder each request's method for this; the decoder here is
    /// unpaired (``WarmHTTP1Channel``), so a warm answer, written below the encoder, leaves
    /// nothing queued there and costs no encode of its own.
    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let head):
            // A 1xx other than 101 is followed by the final head, which answers the request.
            if !(100..<200).contains(head.status.code) || head.status == .switchingProtocols {
                answeringBodiless = bodiless.popFirst() ?? false
            }
            context.write(data, promise: promise)
        case .body:
            if answeringBodiless {
                promise?.succeed()
            } else {
                context.write(data, promise: promise)
            }
        case .end:
            passedOn = max(0, passedOn - 1)
            let withoutBody = answeringBodiless
            answeringBodiless = false
            guard withoutBody, let output = output?.handler as? WarmPathOutput else {
                context.write(data, promise: promise)
                return
            }
            output.swallowing = true
            context.write(data, promise: promise)
            output.swallowing = false
        }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        output = nil
        phases = nil
    }

    /// What the warm path does with a request.
    private enum Outcome {
        /// Answered: the head and the body to write.
        case answer(ByteBuffer, body: ByteBuffer)
        /// Passed on, with what was made of it for the route (an `/images` target's parse, a IIIF
        /// request's memory lookup).
        case passOn(PreparedHandOff.Entry?)
    }

    /// The answer's head and body when memory and the encoded cache have it; else the request
    /// is passed on.
    private func warmAnswer(_ head: HTTPRequestHead, allocator: ByteBufferAllocator) -> Outcome {
        // HTTP/1.1 only: the ready-made head says `HTTP/1.1` and no `Connection` field, which an
        // HTTP/1.0 keep-alive client would need to keep the connection.
        guard head.method == .GET, head.version == .http1_1, head.isKeepAlive, endpoint.cache.options.revalidateAfter == nil
        else { return .passOn(nil) }
        // The prefix first: binding an endpoint copies it (a struct of many references).
        guard head.uri.utf8.starts(with: ImageParameters.prefix.utf8) else {
            if head.uri.utf8.starts(with: IIIFRoute.prefix.utf8), let iiif { return iiifAnswer(head, iiif, allocator: allocator) }
            guard let thumbor else { return .passOn(nil) }
            return thumborAnswer(head, thumbor, allocator: allocator)
        }
        let started = ContinuousClock.now
        let spanStart = traces ? DefaultTracerClock.now : nil
        let prepared: ImageEndpoint.Prepared
        switch targets.value.prepared(head.uri, by: endpoint) {
        case .success(let checked): prepared = checked
        case .failure(let refusal): return .passOn(.images(.failure(refusal)))
        }
        // A restricted key's request is always the route's (``AccessGate``).
        if endpoint.access.isEnabled, endpoint.access.protects(prepared.parameters.key) { return .passOn(.images(.success(prepared))) }
        let found = endpoint.cache.cachedImage(for: prepared.request)
        guard let served = found,
            let warm = endpoint.warmEncoding(
                for: prepared, served: served, accept: head.headers["accept"], ifNoneMatch: head.headers["if-none-match"])
        else {
            // The route goes on from this lookup: one memory lookup for the request.
            var handed = prepared
            handed.memoryLookup = found.map { .hit($0) } ?? .miss
            return .passOn(.images(.success(handed)))
        }
        let engineDone = ContinuousClock.now
        var bytes = allocator.buffer(capacity: warm.head.readableBytes + 160)
        bytes.writeImmutableBuffer(warm.head)
        if warm.negotiated { bytes.writeStaticString("Vary: Accept\r\n") }
        if let dpr = prepared.parameters.dprText {
            bytes.writeStaticString("Content-DPR: ")
            bytes.writeString(dpr)
            bytes.writeStaticString("\r\n")
        }
        endpoint.cache.countMemoryHit()
        finish(&bytes, route: imagesMetrics, head, started: started, engineDone: engineDone, spanStart: spanStart)
        return .answer(bytes, body: warm.image.body)
    }

    /// Ends a warm answer's head — `Server-Timing`, `Date`, the blank line — and counts it (the
    /// HTTP metrics of `route`, the warm answers, its span when tracing is on).
    private func finish(
        _ bytes: inout ByteBuffer, route: ServiceMetrics.WarmRoute, _ head: HTTPRequestHead, started: ContinuousClock.Instant,
        engineDone: ContinuousClock.Instant, spanStart: DefaultTracerClock.Instant?
    ) {
        bytes.writeStaticString("Server-Timing: ")
        EncodedResponder.writeTiming(started: started, engine: engineDone, encode: nil, into: &bytes)
        bytes.writeStaticString("\r\nDate: ")
        bytes.writeString(date.now())
        bytes.writeStaticString("\r\n\r\n")
        route.record(nanoseconds: ServiceResponder.nanoseconds(since: started))
        if let spanStart { Self.traceWarmAnswer(head, start: spanStart, includeKeys: tracesKeys) }
    }

    /// A thumbor URL's answer when its encoding is at hand
    /// (``ThumborEndpoint/warmAnswer(path:accept:ifNoneMatch:)``); anything else is passed on.
    private func thumborAnswer(_ head: HTTPRequestHead, _ thumbor: ThumborEndpoint, allocator: ByteBufferAllocator) -> Outcome {
        let started = ContinuousClock.now
        let spanStart = traces ? DefaultTracerClock.now : nil
        let uri = Substring(head.uri)
        guard
            let warm = thumbor.warmAnswer(
                path: uri[..<(uri.firstIndex(of: "?") ?? uri.endIndex)], accept: head.headers["accept"],
                ifNoneMatch: head.headers["if-none-match"])
        else { return .passOn(nil) }
        let engineDone = ContinuousClock.now
        var bytes = allocator.buffer(capacity: warm.head.readableBytes + 100)
        bytes.writeImmutableBuffer(warm.head)
        if warm.negotiated { bytes.writeStaticString("Vary: Accept\r\n") }
        finish(&bytes, route: thumborMetrics, head, started: started, engineDone: engineDone, spanStart: spanStart)
        return .answer(bytes, body: warm.image.body)
    }

    /// A IIIF image request's answer when its encoding is at hand (``IIIFEndpoint/warmTile(path:authority:ifNoneMatch:)``):
    /// the encoding's head, the route's CORS and `Link` fields and the per-response ones — the
    /// fields the ordinary IIIF answer from the encoded cache has. Anything else is passed on,
    /// with the memory lookup when one was made (the IIIF route parses its own target).
    private func iiifAnswer(_ head: HTTPRequestHead, _ iiif: IIIFEndpoint, allocator: ByteBufferAllocator) -> Outcome {
        let started = ContinuousClock.now
        let spanStart = traces ? DefaultTracerClock.now : nil
        // Hummingbird takes the authority from `Host`; a request with several goes its way.
        let hosts = head.headers["host"]
        guard hosts.count <= 1 else { return .passOn(nil) }
        let uri = Substring(head.uri)
        let warm: IIIFEndpoint.WarmTile
        switch iiif.warmTile(
            path: uri[..<(uri.firstIndex(of: "?") ?? uri.endIndex)], authority: hosts.first, ifNoneMatch: head.headers["if-none-match"])
        {
        case .answer(let tile): warm = tile
        case .passOn(let lookup): return .passOn(lookup.map { .iiif($0) })
        }
        let engineDone = ContinuousClock.now
        var bytes = allocator.buffer(capacity: warm.head.readableBytes + warm.link.utf8.count + 200)
        bytes.writeImmutableBuffer(warm.head)
        bytes.writeStaticString("Access-Control-Allow-Origin: *\r\nLink: ")
        bytes.writeString(warm.link)
        bytes.writeStaticString("\r\n")
        if warm.memoryHit { endpoint.cache.countMemoryHit() }
        finish(&bytes, route: iiifMetrics, head, started: started, engineDone: engineDone, spanStart: spanStart)
        return .answer(bytes, body: warm.image.body)
    }
}

/// A pass-through placed in front of NIO's HTTP/1 response encoder: its context is where
/// ``WarmPathHandler`` writes a whole answer as bytes, so that the bytes go straight to the
/// socket in order with everything written before them. While ``swallowing`` is set (only
/// while ``WarmPathHandler`` passes on the end of an answer to a `HEAD`), what the encoder
/// writes is dropped.
package final class WarmPathOutput: ChannelOutboundHandler, RemovableChannelHandler {
    package init() {}

    package typealias OutboundIn = ByteBuffer

    package var swallowing = false

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if swallowing {
            promise?.succeed()
        } else {
            context.write(data, promise: promise)
        }
    }
}

/// Hummingbird's HTTP/1 child channel with the warm path added: a connection's pipeline as
/// `HTTP1Channel` sets it up (encoder, decoder, conversion to HTTP types, connection state,
/// the async channel), but with a request decoder not paired with the encoder
/// (``addCodec(to:limits:)``), ``ConnectionGuard`` first, ``WarmPathOutput`` in front of the
/// encoder, and ``RequestPhases`` and ``WarmPathHandler`` between the decoder and the
/// conversion; the connection's Hummingbird task runs with its
/// ``PreparedHandOff`` as the task-local ``PreparedHandOff/current``.
package struct WarmHTTP1Channel: ServerChildChannel {
    /// Hummingbird's connection and what the warm path hands over on it.
    package struct Value: ServerChildChannelValue {
        package let http1: HTTP1Channel.Value
        package let handOff: PreparedHandOff
        package var channel: any Channel { http1.channel }
    }

    package let http1: HTTP1Channel
    package let endpoint: ImageEndpoint
    package let iiif: IIIFEndpoint?
    package let thumbor: ThumborEndpoint?
    package let metrics: ServiceMetrics
    package let limits: ConnectionLimits
    package let connectionMetrics: ConnectionMetrics
    package let connections: OpenConnections
    package let targets = PreparedTargetsByLoop()

    package init(
        http1: HTTP1Channel, endpoint: ImageEndpoint, iiif: IIIFEndpoint?, thumbor: ThumborEndpoint? = nil, metrics: ServiceMetrics,
        limits: ConnectionLimits
    ) {
        self.http1 = http1
        self.endpoint = endpoint
        self.iiif = iiif
        self.thumbor = thumbor
        self.metrics = metrics
        self.limits = limits
        connectionMetrics = ConnectionMetrics(factory: metrics.factory)
        connections = OpenConnections(limit: limits.maxConnections, metrics: connectionMetrics)
    }

    /// Refused: the connection was accepted beyond `http.maxConnections` and closed.
    package struct OverLimit: Error {}

    package func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        guard connections.admit(channel) else {
            connectionMetrics.closed(.overLimit)
            channel.close(promise: nil)
            return channel.eventLoop.makeFailedFuture(OverLimit())
        }
        let endpoint = self.endpoint
        let iiif = self.iiif
        let thumbor = self.thumbor
        let metrics = self.metrics
        let targets = self.targets.memo(for: channel.eventLoop)
        let guardian: NIOLoopBound<ConnectionGuard>
        do {
            // At most 16 KiB read per connection per turn of its event loop (NIO: 4 reads of up
            // to 64 KiB): a client pipelining thousands of requests gets a few hundred answered
            // before the loop serves the other connections. Requests are small; no route reads
            // a body.
            if let options = channel.syncOptions {
                try options.setOption(.maxMessagesPerRead, value: 1)
                try options.setOption(
                    .recvAllocator, value: AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 16384))
            }
            // First in the pipeline, before Hummingbird's handlers: it sees the socket's bytes.
            let handler = ConnectionGuard(limits: limits, metrics: connectionMetrics, logger: logger)
            try channel.pipeline.syncOperations.addHandler(handler)
            guardian = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        let maxBody = limits.maxDiscardedBody
        let configuration = http1.configuration
        return channel.eventLoop.makeCompletedFuture {
            // Hummingbird's HTTP/1 pipeline (`HTTP1Channel.setup`: NIO's encoder and decoder
            // with its limits, no pipelining aid, error handling or header validation, the
            // conversion to HTTP types, its extra handlers, the idle timeout), set up here
            // because its request decoder must not be paired with the encoder (``addCodec``),
            // with the request phases and the warm path between the decoder and the conversion.
            let pipeline = channel.pipeline.syncOperations
            var decoderLimits = NIOHTTPDecoderLimitConfiguration()
            decoderLimits.maxHeaderFieldSize = configuration.httpDecoder.maxHeaderFieldSize
            decoderLimits.maxHeaderListSize = configuration.httpDecoder.maxHeaderListSize
            decoderLimits.maxHeaderFieldCount = configuration.httpDecoder.maxHeaderFieldCount
            let output = try Self.addCodec(to: pipeline, limits: decoderLimits)
            let phases = RequestPhases(guardian: guardian.value, maxBody: maxBody)
            let handOff = PreparedHandOff()
            let warm = WarmPathHandler(
                endpoint: endpoint, iiif: iiif, thumbor: thumbor, metrics: metrics, targets: targets, handOff: handOff)
            try pipeline.addHandler(phases)
            try pipeline.addHandler(warm)
            warm.output = try pipeline.context(handler: output)
            warm.phases = phases
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandlers(configuration.additionalChannelHandlers())
            try pipeline.addHandler(
                HTTPConnectionStateHandler(idleTimeout: configuration.idleTimeout.map { .nanoseconds($0.nanoseconds) }, logger: logger))
            let http1 = try HTTP1Channel.Value(
                wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
            return Value(http1: http1, handOff: handOff)
        }
    }

    /// Adds NIO's HTTP/1 response encoder, with ``WarmPathOutput`` in front of it, and a request
    /// decoder with `limits` that is not paired with the encoder, and returns the output. NIO's
    /// own server pipeline (`configureHTTPServerPipeline`) pairs them: the decoder hands the
    /// encoder each request's method, so that an answer to `HEAD` goes without a body. A warm
    /// answer, written below the encoder, would leave its method queued there and need an encode
    /// of its own to take it; ``WarmPathHandler`` frames answers to `HEAD` instead.
    package static func addCodec(
        to pipeline: ChannelPipeline.SynchronousOperations, limits: NIOHTTPDecoderLimitConfiguration
    ) throws -> WarmPathOutput {
        let output = WarmPathOutput()
        try pipeline.addHandler(output)
        try pipeline.addHandler(HTTPResponseEncoder(configuration: .init()))
        try pipeline.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes, limitConfiguration: limits)))
        return output
    }

    package func handle(value: Value, logger: Logger) async {
        await PreparedHandOff.$current.withValue(value.handOff) {
            await http1.handle(value: value.http1, logger: logger)
        }
    }
}

/// The `Date` header's value (RFC 9110 IMF-fixdate), formatted once a second.
package struct HTTPDate {
    private var second = -1
    private var text = ""

    package mutating func now() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        if now.tv_sec != second {
            second = now.tv_sec
            var time = now.tv_sec
            var parts = tm()
            gmtime_r(&time, &parts)
            var buffer = [CChar](repeating: 0, count: 64)
            let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
            text = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return text
    }
}
