import Foundation
import HTTPTypes
import NIOCore
import NIOHTTPTypes
import Strata

/// Answers warm image requests on the connection's event loop, before Hummingbird's async
/// request handling: a `GET /images/…` whose variant is in the engine's memory tier and whose
/// encoding is in the encoded cache is written back at once — no task, no thread hop. Every
/// other request (and any request while an earlier one on the connection is still being
/// answered by Hummingbird, so that responses keep their order) is passed on unchanged, and
/// Hummingbird answers it, errors included.
///
/// One per connection (a `ChannelDuplexHandler` between NIO's HTTP/1 codec and Hummingbird).
/// Cost of a warm answer: the parse, the engine's memory lookup, one encoded lookup, the write.
final class WarmPathHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let endpoint: ImageEndpoint
    private let metrics: ServiceMetrics
    private let node: String
    /// Requests passed on to Hummingbird whose response has not ended yet.
    private var passedOn = 0
    /// The rest of a request answered here (its body parts and end) is dropped.
    private var dropping = false
    private var date = HTTPDate()

    init(endpoint: ImageEndpoint, metrics: ServiceMetrics, node: String) {
        self.endpoint = endpoint
        self.metrics = metrics
        self.node = node
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            if passedOn == 0, let reply = warmReply(head) {
                dropping = true
                var fields = reply.headers
                fields[.contentLength] = String(reply.body?.readableBytes ?? 0)
                fields[.date] = date.now()
                fields[.server] = "strata"
                fields[ServiceResponder.nodeField] = node
                context.write(wrapOutboundOut(.head(HTTPResponse(status: reply.status, headerFields: fields))), promise: nil)
                if let body = reply.body { context.write(wrapOutboundOut(.body(body)), promise: nil) }
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                return
            }
            passedOn += 1
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

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { passedOn = max(0, passedOn - 1) }
        context.write(data, promise: promise)
    }

    /// The answer when memory and the encoded cache have it; `nil` passes the request on.
    private func warmReply(_ head: HTTPRequest) -> ImageEndpoint.Reply? {
        guard head.method == .get, let target = head.path, target.hasPrefix(ImageParameters.prefix),
            endpoint.cache.options.revalidateAfter == nil,
            !(head.headerFields[.connection]?.lowercased().contains("close") ?? false)
        else { return nil }
        let started = ContinuousClock.now
        guard let prepared = try? endpoint.prepare(target: Substring(target)),
            let served = endpoint.cache.cachedImage(for: prepared.request)
        else { return nil }
        let outcome = endpoint.reply(
            to: prepared, served: served, accept: head.headerFields[values: .accept],
            ifNoneMatch: head.headerFields[values: .ifNoneMatch], started: started, engineDone: .now)
        guard case .reply(let reply) = outcome, reply.status == .ok, reply.body != nil else { return nil }
        endpoint.cache.countMemoryHit()
        metrics.served(by: reply.tier)
        metrics.record(route: "images", status: 200, nanoseconds: ServiceResponder.nanoseconds(since: started))
        return reply
    }
}

/// The `Date` header's value (RFC 9110 IMF-fixdate), formatted once a second.
struct HTTPDate {
    private var second = -1
    private var text = ""

    mutating func now() -> String {
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
