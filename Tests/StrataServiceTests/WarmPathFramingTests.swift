import NIOCore
import NIOEmbedded
import NIOHTTP1
import StrataFuzzing
import StrataService
import Testing

/// The framing of answers passed on around warm ones, on a connection's pipeline as `strata
/// serve` sets it up (``WarmHTTP1Channel/addCodec(to:limits:)``: the request decoder is not
/// paired with NIO's encoder, so the warm path frames answers to `HEAD` itself).
@Suite("Warm path framing")
struct WarmPathFramingTests {
    /// Stands for Hummingbird: answers every request it is passed with a body of unknown length
    /// (chunked by NIO's encoder), whatever its method — a `HEAD`'s body must be dropped.
    final class ChunkedAnswers: ChannelInboundHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard case .head(let request) = unwrapInboundIn(data) else { return }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok))), promise: nil)
            let body = context.channel.allocator.buffer(string: "passed " + request.uri)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    final class PassThrough: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.fireChannelRead(data) }
    }

    /// Pipelined: a `HEAD` passed on, a warm `GET`, a `HEAD` of the warm URL (passed on: the warm
    /// path answers `GET`s only), then a `GET` passed on. Each answer is framed for its own
    /// request: the `HEAD`s' without their chunks (nor the last chunk), the `GET`'s chunked.
    @Test func chunkedAnswersToHeadGoWithoutTheirBodyAroundWarmAnswers() async throws {
        let bytes = try await offThePool { () throws -> String in
            let fixture = ServiceFuzzing.WarmPath()
            let channel = EmbeddedChannel(loop: EmbeddedEventLoop())
            try fixture.addHandlers(to: channel, between: PassThrough())
            try channel.pipeline.syncOperations.addHandler(ChunkedAnswers())
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
            let warm = ServiceFuzzing.WarmPath.targets[0]
            let requests = [
                "HEAD /passed/1 HTTP/1.1\r\nHost: s\r\n\r\n", "GET \(warm) HTTP/1.1\r\nHost: s\r\n\r\n",
                "HEAD \(warm) HTTP/1.1\r\nHost: s\r\n\r\n", "GET /passed/2 HTTP/1.1\r\nHost: s\r\n\r\n",
            ]
            try channel.writeInbound(channel.allocator.buffer(string: requests.joined()))
            var out: [UInt8] = []
            while let part = try channel.readOutbound(as: IOData.self) {
                guard case .byteBuffer(let buffer) = part else { continue }
                out += buffer.readableBytesView
            }
            _ = try channel.finish()
            return String(decoding: out, as: UTF8.self)
        }
        var rest = Substring(bytes)
        func next(_ prefix: String) throws -> String {
            let end = try #require(rest.range(of: "\r\n\r\n"), "no whole head left in \(bytes.debugDescription)")
            let head = String(rest[..<end.upperBound])
            rest = rest[end.upperBound...]
            #expect(head.hasPrefix(prefix), "\(head.debugDescription) in \(bytes.debugDescription)")
            return head
        }
        // The HEAD passed on: its head only (chunked framing advertised, no chunk sent).
        let firstHead = try next("HTTP/1.1 200 OK\r\n")
        #expect(firstHead.lowercased().contains("transfer-encoding: chunked"))
        // The warm GET: its head and its body of Content-Length bytes.
        let warmHead = try next("HTTP/1.1 200 OK\r\n")
        let length = try #require(
            warmHead.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) })
        #expect(warmHead.contains("X-Strata-Tier: encoded"))
        rest = rest.dropFirst(length)
        // The HEAD of the warm URL, passed on: its head only.
        _ = try next("HTTP/1.1 200 OK\r\n")
        // The GET passed on: chunked, with its body and the last chunk.
        _ = try next("HTTP/1.1 200 OK\r\n")
        let body = "passed /passed/2"
        #expect(rest == "\(String(body.utf8.count, radix: 16))\r\n\(body)\r\n0\r\n\r\n", "\(bytes.debugDescription)")
    }
}
