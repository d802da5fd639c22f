import Logging
import NIOCore
import NIOHTTP1

/// Bounds what one connection may hold of the server: the time a client takes to send a
/// request's head (`http.headerTimeout`, from the accept or from the first byte after an idle
/// pause: a slowloris), the time a keep-alive connection waits idle between requests and the
/// time a request's body or a response's drain may stall (`http.idleTimeout`), and the body
/// of a request, drained and discarded up to ``ConnectionLimits/maxDiscardedBody``. While the
/// connection's writes do not drain (the channel is not writable: a client that never reads),
/// nothing more is read from it, so that it cannot make the server buffer responses without
/// bound; it is closed when that lasts `http.idleTimeout`.
///
/// One per connection, first in the pipeline (it sees the socket's bytes), with its
/// ``RequestPhases`` after the HTTP/1 decoder telling it where each request and response
/// starts and ends. It serves both paths: the warm path and Hummingbird's. Cost: one
/// scheduled timer per connection, rescheduled when it fires (at most once per the shorter
/// timeout), never per request or per byte; per request, two clock reads and a few compares.
package final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = ByteBuffer
    package typealias InboundOut = ByteBuffer
    package typealias OutboundIn = IOData
    package typealias OutboundOut = IOData

    /// What the connection is waiting for.
    package enum Phase {
        /// A request's head: since the accept, or since its first byte after an idle pause.
        case head
        /// The end of a request's body, or the server's responses.
        case request
        /// The next request.
        case idle
    }

    /// Why a connection was closed (the `reason` label of `strata_http_connections_closed_total`).
    package enum Reason: String, CaseIterable, Sendable {
        case headerTimeout = "header_timeout"
        case idleTimeout = "idle_timeout"
        case bodyTimeout = "body_timeout"
        case stalledWrites = "stalled_writes"
        case bodyTooLarge = "body_too_large"
        case overLimit = "max_connections"
    }

    private let limits: ConnectionLimits
    private let metrics: ConnectionMetrics
    private let logger: Logger
    package private(set) var phase = Phase.head
    /// When the wait of ``phase`` ends (`distantFuture`: none, the server is answering).
    private var deadline = NIODeadline.distantFuture
    /// When a stall of the connection's writes ends it (`distantFuture`: writable).
    private var stalledUntil = NIODeadline.distantFuture
    /// Requests whose head was read and whose response has not ended.
    private var inFlight = 0
    /// Whether a request's body is still being read (its head read, its end not yet).
    private var bodyOpen = false
    /// A read asked for while the writes were not draining, made when they drain again.
    private var heldRead = false
    private var timer: Scheduled<Void>?
    private var context: ChannelHandlerContext?

    package init(limits: ConnectionLimits, metrics: ConnectionMetrics, logger: Logger) {
        self.limits = limits
        self.metrics = metrics
        self.logger = logger
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        if context.channel.isActive { start(context: context) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        self.context = nil
    }

    package func channelActive(context: ChannelHandlerContext) {
        if timer == nil { start(context: context) }
        context.fireChannelActive()
    }

    package func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        timer = nil
        context.fireChannelInactive()
    }

    /// The accept: the first request's head is awaited.
    private func start(context: ChannelHandlerContext) {
        guard timer == nil else { return }
        let now = NIODeadline.now()
        phase = .head
        deadline = now + limits.headerTimeout
        schedule(at: now + limits.tick, context: context)
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if phase == .idle {
            // The first bytes of the next request: its head must be in within headerTimeout.
            phase = .head
            deadline = .now() + limits.headerTimeout
        }
        context.fireChannelRead(data)
    }

    package func read(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            context.read()
        } else {
            heldRead = true
        }
    }

    package func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable {
            stalledUntil = .distantFuture
            // The stall was not the client's idleness.
            if phase == .idle { deadline = .now() + limits.idleTimeout }
            if heldRead {
                heldRead = false
                context.read()
            }
        } else if stalledUntil == .distantFuture {
            stalledUntil = .now() + limits.idleTimeout
        }
        context.fireChannelWritabilityChanged()
    }

    // MARK: What ``RequestPhases`` reports

    /// A request's head was read: the server answers it; its body, if any, must keep coming.
    package func requestHead() {
        inFlight += 1
        phase = .request
        bodyOpen = true
        deadline = .now() + limits.idleTimeout
    }

    /// A part of a request's body was read.
    package func requestBody() {
        deadline = .now() + limits.idleTimeout
    }

    /// A request's end was read.
    package func requestEnd() {
        bodyOpen = false
        if inFlight == 0 {
            becomeIdle()
        } else {
            deadline = .distantFuture
        }
    }

    /// A response's end was written.
    package func responseEnd() {
        inFlight = max(0, inFlight - 1)
        if inFlight == 0, !bodyOpen { becomeIdle() }
    }

    private func becomeIdle() {
        phase = .idle
        deadline = .now() + limits.idleTimeout
    }

    /// Closes the connection for `reason`.
    package func close(_ reason: Reason) {
        guard let context else { return }
        metrics.closed(reason)
        logger.debug(
            "connection closed", metadata: ["reason": "\(reason.rawValue)", "peer": "\(context.remoteAddress.map { "\($0)" } ?? "?")"])
        timer?.cancel()
        timer = nil
        context.close(promise: nil)
    }

    // MARK: The timer

    /// The timer fires at most ``ConnectionLimits/tick`` from now, and every deadline set is
    /// at least that far, so it never fires late however the deadlines move in between.
    private func schedule(at time: NIODeadline, context: ChannelHandlerContext) {
        timer = context.eventLoop.assumeIsolatedUnsafeUnchecked().scheduleTask(deadline: time) { [self] in
            fired()
        }
    }

    private func fired() {
        timer = nil
        guard let context, context.channel.isActive else { return }
        let now = NIODeadline.now()
        if now >= stalledUntil {
            close(.stalledWrites)
        } else if stalledUntil != .distantFuture {
            // Reads are held while the writes stall: the read-side deadlines wait for them.
            schedule(at: min(stalledUntil, now + limits.tick), context: context)
        } else if now >= deadline {
            switch phase {
            case .head: close(.headerTimeout)
            case .idle: close(.idleTimeout)
            case .request: close(.bodyTimeout)
            }
        } else {
            schedule(at: min(deadline, stalledUntil, now + limits.tick), context: context)
        }
    }
}

/// Tells a connection's ``ConnectionGuard`` where its requests and responses start and end,
/// and bounds the body of a request: up to ``ConnectionLimits/maxDiscardedBody`` is passed on
/// (the warm path drops it, Hummingbird drains it after answering: no route of the service
/// reads a body), beyond it the connection is closed.
///
/// One per connection, right after NIO's HTTP/1 decoder: it sees every request part, and every
/// response part the encoder gets; the warm path tells it of each answer it writes below the
/// encoder (``answeredBelowTheEncoder()``). Cost: a call into the guard per part, no allocation.
package final class RequestPhases: ChannelDuplexHandler, RemovableChannelHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias InboundOut = HTTPServerRequestPart
    package typealias OutboundIn = HTTPServerResponsePart
    package typealias OutboundOut = HTTPServerResponsePart

    private let guardian: ConnectionGuard
    private let maxBody: Int
    /// Bytes of the current request's body read so far.
    private var bodyBytes = 0
    /// Requests whose head was read, and responses whose end was written, on this connection.
    private var requestsRead = 0
    private var responsesWritten = 0
    /// The numbers (``requestsRead`` at their head) of the requests read that do not keep the
    /// connection (HTTP/1.0 without `keep-alive`, or `Connection: close`): the connection is
    /// closed once the first one's response is written. Hummingbird stops after a
    /// `Connection: close` request but would keep an HTTP/1.0 connection open; nginx closes both.
    private var closing: [Int] = []

    package init(guardian: ConnectionGuard, maxBody: Int) {
        self.guardian = guardian
        self.maxBody = maxBody
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            bodyBytes = 0
            guardian.requestHead()
            if !head.isKeepAlive { closing.append(requestsRead) }
            requestsRead &+= 1
        case .body(let part):
            bodyBytes += part.readableBytes
            guard bodyBytes <= maxBody else {
                guardian.close(.bodyTooLarge)
                return
            }
            guardian.requestBody()
        case .end:
            guardian.requestEnd()
        }
        context.fireChannelRead(data)
    }

    /// A whole answer was written below the encoder (``WarmPathHandler``: HTTP/1.1 keep-alive
    /// requests only, so never one that closes the connection): counted as if its end had passed.
    package func answeredBelowTheEncoder() {
        guardian.responseEnd()
        responsesWritten &+= 1
    }

    package func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        guardian.responseEnd()
        let answered = responsesWritten
        responsesWritten &+= 1
        // Only when a request that closes the connection is answered (never on the warm path,
        // which answers HTTP/1.1 keep-alive requests only).
        if closing.first == answered {
            closing.removeFirst()
            let written = promise ?? context.eventLoop.makePromise()
            written.futureResult.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            context.write(data, promise: written)
            context.flush()
            return
        }
        context.write(data, promise: promise)
    }
}
