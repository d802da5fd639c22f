import NIOCore
import NIOEmbedded
import NIOHTTP1
import StrataService

/// The warm path fed raw bytes: a connection's pipeline as `strata serve` sets it up (NIO's
/// HTTP/1 decoder and encoder as Hummingbird configures them, the warm path's handlers) on an
/// `EmbeddedChannel`, in front of a stand-in for Hummingbird that answers each request passed
/// on, in order, with its target as the body. The engine's memory tier holds a few variants
/// (``ServiceFuzzing/WarmPath``) whose encoded bodies name their key, so warm hits happen and
/// can be told apart.
///
/// The first byte: bit 0, whether the stand-in answers at once or only after each chunk of
/// input (a request still being answered while the next arrives); bits 1–3, the chunk size
/// the rest is fed in (1 byte to all at once). Checks, for every input:
/// - nothing traps; the bytes written parse as whole responses, nothing left over;
/// - responses come in the order of the requests, one each: the n-th is the stand-in's
///   answer to the n-th request head, or a warm answer whose body is the encoding of the key
///   the n-th target names (in the format it asks for, with the size its head says);
/// - never a warm answer with a restricted key's bytes (``ServiceFuzzing/WarmPath/restricted``:
///   their encodings are cached, and only the route, which checks the credential, answers them);
/// - warm answers only for HTTP/1.1 keep-alive GETs of `/images/` and `/iiif/`, a IIIF one
///   with the bytes of the identifier its target names, in its format, with CORS and `Link`;
/// - every request whose end arrived is answered, unless the connection was closed (a
///   decoding error, or an answer to a request that did not keep the connection alive, after
///   which nothing more is written).
///
/// The `FuzzWarmPath` harness (`FuzzHarness.warmPath`).
package enum WarmPathHarness {
    static let fixture = ServiceFuzzing.WarmPath()
    static let loop = EmbeddedEventLoop()

    static func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
        if !condition { fatalError(message()) }
    }

    /// Records the request heads and ends the decoder produced, in order.
    final class Recorder: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        var heads: [HTTPRequestHead] = []
        var ends = 0

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head): heads.append(head)
            case .body: break
            case .end: ends += 1
            }
            context.fireChannelRead(data)
        }
    }

    /// Stands for Hummingbird: answers every request it is passed, in order, once its end has
    /// arrived (at once, or when ``answerWaiting()`` is called), with `passed\n{target}`; closes
    /// the connection after answering a request that does not keep it alive, and on an error.
    final class StandIn: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let deferred: Bool
        var context: ChannelHandlerContext?
        var current: HTTPRequestHead?
        var waiting: [HTTPRequestHead] = []
        var closed = false
        var failed = false

        init(deferred: Bool) { self.deferred = deferred }

        func handlerAdded(context: ChannelHandlerContext) { self.context = context }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                require(current == nil, "a head before the previous request's end")
                current = head
            case .body:
                require(current != nil, "a body part outside a request")
            case .end:
                require(current != nil, "an end outside a request")
                waiting.append(current!)
                current = nil
                if !deferred { answerWaiting() }
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            failed = true
            close()
        }

        func answerWaiting() {
            guard let context else { return }
            while !waiting.isEmpty, !closed {
                let head = waiting.removeFirst()
                let body = context.channel.allocator.buffer(string: "passed\n" + head.uri)
                var headers = HTTPHeaders([("X-Fuzz-Passed", "1"), ("Content-Length", String(body.readableBytes))])
                if !head.isKeepAlive { headers.add(name: "Connection", value: "close") }
                context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
                if !head.isKeepAlive { close() }
            }
        }

        func close() {
            guard !closed else { return }
            closed = true
            context?.close(promise: nil)
        }
    }

    /// One response as written: its head's lines and its body.
    struct Response {
        var status: String
        var fields: [(String, String)]
        var body: [UInt8]

        func field(_ name: String) -> String? { fields.first { $0.0.lowercased() == name.lowercased() }?.1 }
    }

    /// The responses in `bytes` to the requests `heads`, in order; traps on anything but a
    /// sequence of whole responses with `Content-Length` bodies (none for a `HEAD` or `CONNECT`,
    /// whose answers NIO's encoder sends without one).
    static func responses(in bytes: [UInt8], to heads: [HTTPRequestHead]) -> [Response] {
        var all: [Response] = []
        var rest = bytes[...]
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        while !rest.isEmpty {
            guard let end = rest.firstRange(of: separator) else {
                fatalError("a partial response head: \(String(decoding: rest, as: UTF8.self))")
            }
            let lines = String(decoding: rest[..<end.lowerBound], as: UTF8.self).split(separator: "\r\n", omittingEmptySubsequences: false)
            require(lines.first?.hasPrefix("HTTP/1.1 ") == true, "a response that does not start with a status line: \(lines)")
            var fields: [(String, String)] = []
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { fatalError("a field line without a colon: \(line.debugDescription)") }
                fields.append((String(line[..<colon]), String(line[line.index(after: colon)...].drop { $0 == " " })))
            }
            require(all.count < heads.count, "more responses than requests: \(String(decoding: bytes, as: UTF8.self).debugDescription)")
            let method = heads[all.count].method
            let lengths = fields.filter { $0.0.lowercased() == "content-length" }
            require(lengths.count == (method == .CONNECT ? 0 : 1), "a response with \(lengths.count) Content-Length fields: \(lines)")
            var length = 0
            if method != .HEAD && method != .CONNECT {
                guard let given = Int(lengths[0].1), given >= 0 else { fatalError("a bad Content-Length: \(lengths[0].1)") }
                length = given
            }
            let bodyStart = end.upperBound
            require(
                rest.endIndex - bodyStart >= length, "a response body cut short: \(String(decoding: bytes, as: UTF8.self).debugDescription)"
            )
            all.append(Response(status: String(lines[0]), fields: fields, body: Array(rest[bodyStart..<bodyStart + length])))
            rest = rest[(bodyStart + length)...]
        }
        return all
    }

    /// What the `n`-th request's answer must be, checked.
    static func check(_ response: Response, answers head: HTTPRequestHead) {
        if response.field("X-Fuzz-Passed") != nil {
            let expected = head.method == .HEAD || head.method == .CONNECT ? "" : "passed\n" + head.uri
            require(
                String(decoding: response.body, as: UTF8.self) == expected,
                "an answer to another request than \(head.method) \(head.uri.debugDescription): \(response.status) \(response.fields)")
            return
        }
        require(response.field("X-Strata-Tier") == "encoded", "neither passed on nor warm: \(response.status) \(response.fields)")
        require(
            head.method == .GET && head.version == .http1_1 && head.isKeepAlive
                && (head.uri.hasPrefix("/images/") || head.uri.hasPrefix("/iiif/")),
            "a warm answer to \(head.method) \(head.uri.debugDescription) \(head.version) keep-alive \(head.isKeepAlive)")
        guard let marker = ServiceFuzzing.WarmPath.Marker(response.body) else { fatalError("a warm body that is not the fixture's") }
        require(
            !ServiceFuzzing.WarmPath.access.protects(marker.key),
            "a restricted key's encoding (\(marker.key.debugDescription)) answered on the warm path to \(head.uri.debugDescription)")
        require(
            response.field("X-Strata-Width") == String(marker.width) && response.field("X-Strata-Height") == String(marker.height),
            "the head's size is not the body's")
        require(response.field("Content-Type")?.hasSuffix(marker.format) == true, "the head's type is not the body's")
        if head.uri.hasPrefix("/iiif/") {
            // The path parsed on its own: the answer's key and format must be the ones it names.
            guard case .image(let request)? = try? IIIFRoute(path: head.uri.prefix { $0 != "?" }) else {
                fatalError("a warm answer to a IIIF target that is no image request: \(head.uri.debugDescription)")
            }
            require(
                marker.key == request.identifier.key,
                "\(head.uri.debugDescription) answered with the bytes of \(marker.key.debugDescription)")
            require(
                marker.format == (request.format == .jpg ? "jpeg" : request.format.rawValue),
                "\(head.uri.debugDescription) answered as \(marker.format)")
            require(
                response.field("Access-Control-Allow-Origin") == "*" && response.field("Link")?.contains(#"rel="canonical""#) == true,
                "a warm IIIF answer without its CORS or Link field: \(response.fields)")
            return
        }
        // The target parsed on its own: the answer's key and format must be the ones it names.
        let target = head.uri.dropFirst("/images/".count)
        let question = target.firstIndex(of: "?")
        guard
            let parameters = try? ImageParameters(
                path: target[..<(question ?? target.endIndex)], query: question.map { target[target.index(after: $0)...] },
                maxDimension: 4096)
        else {
            // With `preset=` the query is merged first; this fixture has no presets, so it is a 400.
            fatalError("a warm answer to a target that does not parse: \(head.uri.debugDescription)")
        }
        require(marker.key == parameters.key, "\(head.uri.debugDescription) answered with the bytes of \(marker.key.debugDescription)")
        if let format = parameters.format {
            require(marker.format == format.rawValue, "\(head.uri.debugDescription) answered as \(marker.format)")
        }
    }

    static func run(_ bytes: UnsafeRawBufferPointer) {
        let data = bytes
        guard let flags = data.first else { return }
        let chunk = [1, 2, 3, 7, 16, 64, 512, Int.max][Int(flags >> 1 & 7)]
        let channel = EmbeddedChannel(loop: loop)
        let recorder = Recorder()
        let standIn = StandIn(deferred: flags & 1 != 0)
        do {
            try fixture.addHandlers(to: channel, between: recorder)
            try channel.pipeline.syncOperations.addHandler(standIn)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        } catch {
            fatalError("the pipeline cannot be set up: \(error)")
        }
        var written: [UInt8] = []
        func collect() {
            while let part = try? channel.readOutbound(as: IOData.self) {
                switch part {
                case .byteBuffer(let buffer): written += buffer.readableBytesView
                case .fileRegion: fatalError("a file region")
                }
            }
        }
        var position = 1
        while position < data.count, !standIn.closed {
            let end = position + min(chunk, data.count - position)
            do {
                try channel.writeInbound(channel.allocator.buffer(bytes: data[position..<end]))
            } catch {
                // Errors reach the stand-in, which closes; an error left over means a closed channel.
                require(standIn.closed, "an error the pipeline did not handle: \(error)")
            }
            position = end
            standIn.answerWaiting()
            collect()
        }
        standIn.answerWaiting()
        collect()
        let heads = recorder.heads
        let answers = responses(in: written, to: heads)
        require(answers.count <= heads.count, "\(answers.count) responses to \(heads.count) requests")
        for (response, head) in zip(answers, heads) { check(response, answers: head) }
        if !standIn.closed {
            require(answers.count >= recorder.ends, "\(recorder.ends) requests ended, \(answers.count) answered")
        }
        if let closing = answers.firstIndex(where: { $0.field("Connection") == "close" }) {
            require(closing == answers.count - 1, "a response after one that closed the connection")
        }
        _ = try? channel.finish()
    }
}
