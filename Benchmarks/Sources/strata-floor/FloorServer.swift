import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The floor for a warm answer on this stack (issue 50): a bare swift-nio HTTP/1.1 server that
/// answers `GET` from a dictionary of bytes loaded at start, with the headers Strata sent for
/// the same answer, on as many event loops as `strata serve` (NIO's singleton group: one per
/// core). No routing, no cache, no parsing beyond the path: what is left is NIO's HTTP/1 decoder,
/// the channel pipeline and the socket. `Scripts/loadtest.sh` runs it beside nginx and Strata's
/// warm path. Two ways to answer (`--mode`):
/// - `bytes` (the default, the floor): each answer's head rendered as bytes at start, copied with
///   the `Date` field and written with the shared body in one `writev`, below NIO's response
///   encoder — what Strata's warm path does, without its lookups;
/// - `headers`: an `HTTPResponseHead` with `HTTPHeaders`, the body and the end through NIO's
///   `HTTPResponseEncoder` — how a NIO server is usually written.
///
///     strata-floor --bodies DIR --heads DIR --port PORT [--mode bytes|headers] [--threads N]
///
/// Every file under `--bodies` is an answer, at the path `/` + its path under DIR (a query is
/// ignored, as nginx does); the same path under `--heads` holds the answer's head as
/// `curl -D` wrote it (a status line, then `Name: value` lines). `Content-Length` and `Date`
/// are the server's own (`Date` formatted once a second), `Connection` is left to NIO.
@main
struct FloorServer {
    static func main() throws {
        let options = try FloorOptions(CommandLine.arguments.dropFirst())
        let answers = try Answers.load(bodies: options.bodies, heads: options.heads)
        let group = options.threads.map { MultiThreadedEventLoopGroup(numberOfThreads: $0) } ?? MultiThreadedEventLoopGroup.singleton
        let channel = try ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 1024)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [mode = options.mode] channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    switch mode {
                    case .headers:
                        try pipeline.configureHTTPServerPipeline(withErrorHandling: true)
                        try pipeline.addHandler(FloorHeadersHandler(answers: answers))
                    case .bytes:
                        try pipeline.addHandler(ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
                        try pipeline.addHandler(FloorBytesHandler(answers: answers))
                    }
                }
            }
            .bind(host: options.host, port: options.port)
            .wait()
        FileHandle.standardError.write(
            Data(
                "strata-floor (\(options.mode)): \(answers.count) answers on \(channel.localAddress.map { "\($0)" } ?? "?"), \(options.threads ?? System.coreCount) event loops\n"
                    .utf8))
        try channel.closeFuture.wait()
    }
}

/// `--bodies DIR --heads DIR --port PORT [--host HOST] [--mode bytes|headers] [--threads N]`.
struct FloorOptions {
    enum Mode: String { case bytes, headers }
    var bodies = "", heads = "", host = "127.0.0.1", port = 0
    var mode = Mode.bytes
    /// Event loops (`--threads`); `nil`: NIO's singleton group, one per core, as `strata serve`.
    var threads: Int?

    init(_ arguments: ArraySlice<String>) throws {
        var rest = arguments
        while let name = rest.popFirst() {
            guard let value = rest.popFirst() else { throw FloorError("\(name) needs a value") }
            switch name {
            case "--bodies": bodies = value
            case "--heads": heads = value
            case "--host": host = value
            case "--threads":
                guard let number = Int(value), number > 0 else { throw FloorError("--threads: \(value) is not a positive count") }
                threads = number
            case "--mode":
                guard let chosen = Mode(rawValue: value) else { throw FloorError("--mode: \(value) is neither bytes nor headers") }
                mode = chosen
            case "--port":
                guard let number = Int(value), (0...65535).contains(number) else { throw FloorError("--port: \(value) is not a port") }
                port = number
            default: throw FloorError("unknown option \(name) (usage: strata-floor --bodies DIR --heads DIR --port PORT)")
            }
        }
        guard !bodies.isEmpty, !heads.isEmpty else { throw FloorError("--bodies and --heads are required") }
    }
}

struct FloorError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// The answers, by path: each a head's fields (without `Content-Length`, `Date`, `Connection`)
/// and a body, built once and shared by every event loop.
struct Answers: Sendable {
    struct Answer: Sendable {
        var fields: [(String, String)]
        var body: ByteBuffer
        /// The head as bytes up to the `Date` field's value: the status line, `fields`,
        /// `Content-Length`, then `Date: `.
        var headPrefix: ByteBuffer

        init(fields: [(String, String)], body: ByteBuffer) {
            self.fields = fields
            self.body = body
            var head = "HTTP/1.1 200 OK\r\n"
            for (name, value) in fields { head += "\(name): \(value)\r\n" }
            head += "Content-Length: \(body.readableBytes)\r\nDate: "
            headPrefix = ByteBuffer(string: head)
        }
    }
    private var byPath: [String: Answer] = [:]
    var count: Int { byPath.count }

    subscript(path: Substring) -> Answer? { byPath[String(path)] }

    static func load(bodies: String, heads: String) throws -> Answers {
        var answers = Answers()
        let root = URL(fileURLWithPath: bodies).standardizedFileURL.path
        guard let walker = FileManager.default.enumerator(atPath: root) else { throw FloorError("cannot read \(root)") }
        for case let relative as String in walker {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: root + "/" + relative, isDirectory: &isDirectory), !isDirectory.boolValue else {
                continue
            }
            let body = try Data(contentsOf: URL(fileURLWithPath: root + "/" + relative))
            guard let head = try? String(contentsOfFile: heads + "/" + relative, encoding: .utf8) else {
                throw FloorError("no head for \(relative) under \(heads)")
            }
            answers.byPath["/" + relative] = Answer(fields: fields(of: head), body: ByteBuffer(bytes: body))
        }
        guard answers.count > 0 else { throw FloorError("no files under \(root)") }
        return answers
    }

    /// The fields of a head that `curl -D` wrote, less those the server sets itself.
    static func fields(of head: String) -> [(String, String)] {
        let own: Set<String> = ["content-length", "date", "connection", "keep-alive", "transfer-encoding"]
        return head.split(whereSeparator: \.isNewline).dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let name = line[..<colon].trimmingCharacters(in: .whitespaces)
            guard !own.contains(name.lowercased()) else { return nil }
            return (name, line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
    }
}

/// One connection's requests (`--mode headers`): the answer for each `GET`'s path through NIO's
/// response encoder, or 404.
final class FloorHeadersHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let answers: Answers
    private var date = FloorDate()
    private var keepAlive = true

    init(answers: Answers) { self.answers = answers }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(let request) = unwrapInboundIn(data) else { return }
        keepAlive = request.isKeepAlive
        let path = request.uri.prefix { $0 != "?" }
        var headers = HTTPHeaders()
        let status: HTTPResponseStatus
        let body: ByteBuffer
        if request.method == .GET, let answer = answers[path] {
            status = .ok
            body = answer.body
            headers.reserveCapacity(answer.fields.count + 2)
            for (name, value) in answer.fields { headers.add(name: name, value: value) }
        } else {
            status = .notFound
            body = ByteBuffer()
        }
        headers.add(name: "Content-Length", value: String(body.readableBytes))
        headers.add(name: "Date", value: date.now())
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        if keepAlive {
            context.write(wrapOutboundOut(.end(nil)), promise: nil)
        } else {
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

/// One connection's requests (`--mode bytes`): for each `GET`, once its end has come, the
/// answer's head bytes with the `Date` field (one copy) and its shared body, flushed together at
/// the end of the read (one `writev`); 404 for an unknown path, and the connection closed after
/// a request that does not keep it alive.
final class FloorBytesHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = ByteBuffer

    private static let notFound = ByteBuffer(string: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    private let answers: Answers
    private var date = FloorDate()
    private var current: HTTPRequestHead?

    init(answers: Answers) { self.answers = answers }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let request): current = request
        case .body: break
        case .end:
            guard let request = current else { return }
            current = nil
            if request.method == .GET, let answer = answers[request.uri.prefix { $0 != "?" }] {
                let now = date.now()
                var head = context.channel.allocator.buffer(capacity: answer.headPrefix.readableBytes + now.utf8.count + 4)
                head.writeImmutableBuffer(answer.headPrefix)
                head.writeString(now)
                head.writeStaticString("\r\n\r\n")
                context.write(wrapOutboundOut(head), promise: nil)
                context.write(wrapOutboundOut(answer.body), promise: nil)
            } else {
                context.write(wrapOutboundOut(Self.notFound), promise: nil)
            }
            if !request.isKeepAlive {
                let channel = context.channel
                context.writeAndFlush(wrapOutboundOut(ByteBuffer())).whenComplete { _ in channel.close(promise: nil) }
            }
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) { context.flush() }
}

/// The `Date` field's value, formatted once a second (as a server that cares would).
struct FloorDate {
    private var second = -1
    private var text = ""

    mutating func now() -> String {
        var clock = timespec()
        clock_gettime(CLOCK_REALTIME, &clock)
        let current = clock.tv_sec
        if current != second {
            second = current
            var time = current
            var parts = tm()
            gmtime_r(&time, &parts)
            var buffer = [CChar](repeating: 0, count: 64)
            let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
            text = String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
        return text
    }
}
