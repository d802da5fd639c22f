import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Strata
import StrataConfiguration
import StrataTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `tracing.*`: `strata serve` as a real process, exporting over OTLP/HTTP (JSON bodies) to a
/// receiver this test starts on 127.0.0.1, which is also the HTTP origin (so it sees the
/// `traceparent` the origin gets).
@Suite("Tracing", .timeLimit(.minutes(5)))
struct TracingTests {
    #if OTLPExporter
    /// The cold request of a WebP original through the HTTP origin: its span tree, the
    /// `traceparent` the origin received, and the warm answer's own span.
    @Test func aColdRequestsSpanTreeIsExportedAndItsTraceReachesTheOrigin() async throws {
        let receiver = try await RecordingHTTPServer.start()
        let scratch = makeScratchDirectory("tracing")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (process, port, _, _) = try GracefulShutdownTests.startServe([
            "--source-http-base-url", "http://127.0.0.1:\(receiver.port)/origin", "--disk-path", scratch + "/disk",
            "--memory-pressure-enabled", "false", "--tracing-enabled", "true",
            "--tracing-endpoint", "http://127.0.0.1:\(receiver.port)/v1/traces", "--tracing-protocol", "http/json",
        ])
        let target = "/images/webp/path-2560x1600.webp?w=200&h=200&format=jpeg"
        let cold = try await get(port: port, target)
        #expect(cold.status == 200, "\(cold.text)")
        // The same request again: memory and the encoded cache hold it, the warm path answers.
        let warm = try await get(port: port, target)
        #expect(warm.status == 200)
        // SIGTERM: the exporter stops after the server, flushing every span.
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        await receiver.stop()

        let spans = try receiver.exportedSpans()
        let requests = spans.filter { $0.name == "GET /images/{key}" && $0.kind == 2 }
        #expect(requests.count == 2, "\(spans.map(\.name))")
        let root = try #require(requests.first { $0.attributes["strata.warm"] == nil })
        #expect(root.parentSpanID.isEmpty)
        #expect(root.attributes["http.response.status_code"] == "200")
        #expect(root.attributes["http.route"] == "/images/{key}")
        #expect(root.attributes["url.path"] == nil, "no key unless tracing.includeKeys")
        let trace = spans.filter { $0.traceID == root.traceID }
        func children(of parent: ExportedSpan, named name: String) -> [ExportedSpan] {
            trace.filter { $0.parentSpanID == parent.spanID && $0.name == name }
        }
        // request → disk lookup (a miss), the flight, the encode.
        let lookup = try #require(children(of: root, named: "strata.tier.lookup").first)
        #expect(lookup.attributes["strata.tier"] == "disk")
        #expect(lookup.attributes["strata.outcome"] == "miss")
        #expect(lookup.attributes["strata.key.digest"] == CacheKey("webp/path-2560x1600.webp").entityID.description)
        #expect(lookup.attributes["strata.key"] == nil)
        let flight = try #require(children(of: root, named: "strata.flight").first)
        #expect(flight.attributes["strata.flight.joined"] == "false")
        let encode = try #require(children(of: root, named: "strata.encode").first)
        #expect(encode.attributes["strata.format"] == "jpeg")
        #expect(Int(encode.attributes["strata.bytes"] ?? "") ?? 0 > 0)
        #expect(children(of: encode, named: "strata.lane.wait").count == 1)
        // flight → source fetch → the origin's GET; flight → lane wait, decode, resample.
        let fetch = try #require(children(of: flight, named: "strata.source.fetch").first)
        #expect(fetch.attributes["strata.outcome"] == "fetched")
        #expect(Int(fetch.attributes["strata.bytes"] ?? "") ?? 0 > 0)
        // One client span (the source's; AsyncHTTPClient's own, which would record the URL and
        // so the key, is off).
        #expect(children(of: fetch, named: "GET").count == 1)
        #expect(trace.allSatisfy { $0.attributes["url.full"] == nil })
        let originGet = try #require(children(of: fetch, named: "GET").first)
        #expect(originGet.kind == 3, "a client span")
        #expect(originGet.attributes["http.response.status_code"] == "200")
        #expect(children(of: flight, named: "strata.lane.wait").count == 1)
        let decode = try #require(children(of: flight, named: "strata.decode").first)
        #expect(decode.attributes["strata.format"] == "webp")
        #expect(decode.attributes["strata.size.original"] != nil)
        #expect(children(of: flight, named: "strata.resample").count == 1)
        // The warm answer: a span of its own, in a trace of its own, with no children.
        let warmSpan = try #require(requests.first { $0.attributes["strata.warm"] == "true" })
        #expect(warmSpan.traceID != root.traceID)
        #expect(spans.allSatisfy { $0.parentSpanID != warmSpan.spanID })
        #expect(spans.allSatisfy { $0.serviceName == "strata" })

        // The origin got the client span's context: same trace, the GET span as parent.
        let originRequests = receiver.requests().filter { $0.uri.hasPrefix("/origin/") }
        #expect(originRequests.count == 1)
        let traceparent = try #require(originRequests.first?.headers["traceparent"])
        let parts = traceparent.split(separator: "-").map(String.init)
        #expect(parts.count == 4)
        #expect(parts[1] == root.traceID)
        #expect(parts[2] == originGet.spanID)
        #expect(parts[3] == "01", "sampled")
    }
    #else
    /// A build without the OTLPExporter trait (`make run`, the sanitizer builds): tracing on is
    /// refused at start, naming the key and how to build with the exporter.
    @Test func withoutTheExporterTracingIsRefusedNamingTheKey() throws {
        let run = try StrataTestSupport.runStrata([
            "serve", "--port", "0", "--source-directory", fixturesDirectory, "--tracing-enabled", "true",
        ])
        #expect(run.status == 2, "\(run.stderr)")
        #expect(run.stderr.contains("tracing.enabled") && run.stderr.contains("OTLPExporter"), "\(run.stderr)")
    }
    #endif

    /// Tracing off (the default), with an endpoint configured: nothing is exported and the
    /// origin gets no `traceparent`.
    @Test func nothingIsExportedWhenTracingIsOff() async throws {
        let receiver = try await RecordingHTTPServer.start()
        let scratch = makeScratchDirectory("tracing-off")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (process, port, _, _) = try GracefulShutdownTests.startServe([
            "--source-http-base-url", "http://127.0.0.1:\(receiver.port)/origin", "--disk-path", scratch + "/disk",
            "--memory-pressure-enabled", "false", "--tracing-endpoint", "http://127.0.0.1:\(receiver.port)/v1/traces",
        ])
        let target = "/images/webp/path-2560x1600.webp?w=120&h=120&format=jpeg"
        for _ in 0..<2 { #expect(try await get(port: port, target).status == 200) }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        await receiver.stop()
        let requests = receiver.requests()
        #expect(!requests.contains { $0.uri.hasPrefix("/v1/") })
        let origin = requests.filter { $0.uri.hasPrefix("/origin/") }
        #expect(origin.count == 1)
        #expect(origin.allSatisfy { $0.headers["traceparent"] == nil })
    }

    /// The `tracing.*` keys: off by default, and a bad value names its key.
    @Test func tracingKeysDefaultOffAndBadValuesNameTheKey() async throws {
        let defaults = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:]))
        #expect(defaults.tracing == TracingSettings())
        #expect(!defaults.tracing.enabled)
        #expect(defaults.tracing.endpoint == "http://127.0.0.1:4318/v1/traces")
        #expect(defaults.tracing.samplingRatio == 1)
        #expect(defaults.tracing.serviceName == "strata")
        let set = try StrataConfiguration(
            from: try await ConfigurationLayers(
                arguments: ["--tracing-protocol", "http/json", "--tracing-include-keys", "true"],
                environment: ["STRATA_TRACING_ENABLED": "true", "STRATA_TRACING_SAMPLING_RATIO": "0.01"]))
        #expect(set.tracing.enabled && set.tracing.includeKeys)
        #expect(set.tracing.samplingRatio == 0.01)
        #expect(set.tracing.wireProtocol == .json)
        for (arguments, key) in [
            (["--tracing-sampling-ratio", "1.5"], "tracing.samplingRatio"),
            (["--tracing-enabled", "sometimes"], "tracing.enabled"),
            (["--tracing-endpoint", "localhost:4318"], "tracing.endpoint"),
            (["--tracing-protocol", "grpc"], "tracing.protocol"),
        ] {
            let error = await #expect(throws: ConfigurationError.self) {
                try StrataConfiguration(from: try await ConfigurationLayers(arguments: arguments, environment: [:]))
            }
            #expect(error?.key == key)
        }
    }
}

/// One span as exported (OTLP JSON), attributes as text.
struct ExportedSpan {
    var serviceName: String
    var name: String
    var kind: Int
    var traceID: String
    var spanID: String
    var parentSpanID: String
    var attributes: [String: String]
}

/// A small HTTP server on 127.0.0.1: an OTLP/HTTP receiver (`POST /v1/traces`, answered `{}`)
/// and an HTTP origin (`GET /origin/{path}`: the fixture at `path`); it records every request.
final class RecordingHTTPServer: Sendable {
    struct Request: Sendable {
        var method: String
        var uri: String
        var headers: [String: String]
        var body: [UInt8]
    }

    /// What the server's connections received.
    final class Log: Sendable {
        let requests = Mutex<[Request]>([])
    }

    private let log: Log
    private let channel: any Channel
    let port: Int

    private init(log: Log, channel: any Channel) {
        self.log = log
        self.channel = channel
        port = channel.localAddress?.port ?? 0
    }

    static func start() async throws -> RecordingHTTPServer {
        let log = Log()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(RecordingHandler(log: log))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return RecordingHTTPServer(log: log, channel: channel)
    }

    func stop() async {
        try? await channel.close()
    }

    func requests() -> [Request] { log.requests.withLock { $0 } }

    /// Every span of every `POST /v1/traces` body.
    func exportedSpans() throws -> [ExportedSpan] {
        var spans: [ExportedSpan] = []
        for request in requests() where request.uri == "/v1/traces" {
            let json = try #require(try JSONSerialization.jsonObject(with: Data(request.body)) as? [String: Any])
            for resourceSpans in json["resourceSpans"] as? [[String: Any]] ?? [] {
                let resource = resourceSpans["resource"] as? [String: Any] ?? [:]
                let service = Self.attributes(resource["attributes"])["service.name"] ?? ""
                for scope in resourceSpans["scopeSpans"] as? [[String: Any]] ?? [] {
                    for span in scope["spans"] as? [[String: Any]] ?? [] {
                        spans.append(
                            ExportedSpan(
                                serviceName: service, name: span["name"] as? String ?? "", kind: span["kind"] as? Int ?? 0,
                                traceID: Self.hex(span["traceId"]), spanID: Self.hex(span["spanId"]),
                                parentSpanID: Self.hex(span["parentSpanId"]), attributes: Self.attributes(span["attributes"])))
                    }
                }
            }
        }
        return spans
    }

    /// swift-protobuf writes `bytes` fields as base64: the ids in hex.
    static func hex(_ value: Any?) -> String {
        guard let text = value as? String, let data = Data(base64Encoded: text) else { return "" }
        return data.map { String(format: "%02x", $0) }.joined()
    }

    /// OTLP key-value attributes, each value as text.
    static func attributes(_ value: Any?) -> [String: String] {
        var result: [String: String] = [:]
        for attribute in value as? [[String: Any]] ?? [] {
            guard let key = attribute["key"] as? String, let value = attribute["value"] as? [String: Any] else { continue }
            if let text = value["stringValue"] as? String {
                result[key] = text
            } else if let number = value["intValue"] {
                result[key] = "\(number)"
            } else if let flag = value["boolValue"] as? Bool {
                result[key] = flag ? "true" : "false"
            } else if let number = value["doubleValue"] {
                result[key] = "\(number)"
            }
        }
        return result
    }
}

/// Collects one request, records it and answers it.
final class RecordingHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let log: RecordingHTTPServer.Log
    var head: HTTPRequestHead?
    var body: [UInt8] = []

    init(log: RecordingHTTPServer.Log) { self.log = log }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(let buffer):
            body += Array(buffer: buffer)
        case .end:
            guard let head else { return }
            var headers: [String: String] = [:]
            for (name, value) in head.headers { headers[name.lowercased()] = value }
            let request = RecordingHTTPServer.Request(method: head.method.rawValue, uri: head.uri, headers: headers, body: body)
            log.requests.withLock { $0.append(request) }
            var status = HTTPResponseStatus.ok
            var answer: [UInt8]
            var contentType = "application/json"
            if head.uri.hasPrefix("/origin/") {
                contentType = "application/octet-stream"
                let path = fixturesDirectory + "/" + head.uri.dropFirst("/origin/".count)
                if let data = FileManager.default.contents(atPath: path) {
                    answer = Array(data)
                } else {
                    status = .notFound
                    answer = []
                }
            } else {
                answer = Array("{}".utf8)
            }
            let response = HTTPResponseHead(
                version: head.version, status: status,
                headers: ["content-type": contentType, "content-length": "\(answer.count)"])
            context.write(wrapOutboundOut(.head(response)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: answer)))), promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            self.head = nil
        }
    }
}
