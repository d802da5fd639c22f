import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import Strata
import StrataConfiguration
@testable import StrataService
import Testing

/// The repository's `Fixtures/` directory (found from this file: the first parent that holds
/// `Package.swift`).
let fixturesDirectory: String = {
    var dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while dir.path != "/", !FileManager.default.fileExists(atPath: dir.appendingPathComponent("Package.swift").path) {
        dir.deleteLastPathComponent()
    }
    return dir.appendingPathComponent("Fixtures").path
}()

/// A fresh, empty directory under the system's temporary directory.
func makeScratchDirectory(_ name: String) -> String {
    let path = NSTemporaryDirectory() + "strata-service-\(name)-\(UUID().uuidString.prefix(8))"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// One HTTP answer, whole.
struct Answer: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]

    func header(_ name: String) -> String? { headers.first(name: name) }
    var text: String { String(decoding: body, as: UTF8.self) }
    /// The JSON error body's `error` code.
    var errorCode: String? {
        (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["error"] as? String
    }
}

/// The tests' HTTP client: up to 64 connections per server (the shared client's 8 would queue
/// a test's concurrent requests, and its `/stats` polls behind them). Lives as long as the
/// process.
let testClient: HTTPClient = {
    var configuration = HTTPClient.Configuration()
    configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
    return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
}()

/// Sends `GET target` to 127.0.0.1:`port` with AsyncHTTPClient. A request that finds its
/// pooled keep-alive connection reset (the server closed it for idleness while a starved test
/// process held it) is sent once more, on a new connection: GET and HEAD are idempotent.
func get(port: Int, _ target: String, headers: [(String, String)] = [], method: HTTPMethod = .GET) async throws -> Answer {
    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(target)")
    request.method = method
    for (name, value) in headers { request.headers.add(name: name, value: value) }
    func send() async throws -> Answer {
        // Generous: a debug build under the full parallel suite renders large originals slowly.
        let response = try await testClient.execute(request, timeout: .seconds(300))
        let body = try await response.body.collect(upTo: 64 << 20)
        return Answer(status: Int(response.status.code), headers: response.headers, body: Array(buffer: body))
    }
    do {
        return try await send()
    } catch let error as IOError where [ECONNRESET, EPIPE].contains(error.errnoCode) {
        return try await send()
    } catch let error as HTTPClientError where error == .remoteConnectionClosed {
        return try await send()
    }
}

/// A `StrataServer` running in this process on an ephemeral port of 127.0.0.1, in its own
/// `ServiceGroup`; ``stop()`` shuts it down gracefully and waits.
final class TestServer: Sendable {
    let server: StrataServer
    let port: Int
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let scratch: String

    /// Starts a server over `Fixtures/` (disk tier in a scratch directory) with `settings`
    /// (configuration keys and values) on top.
    /// `probes`: the service's test seams.
    static func start(
        _ settings: [String: String] = [:], disk: Bool = true, sourceDirectory: Bool = true, probes: ServiceProbes = ServiceProbes()
    ) async throws -> TestServer {
        let scratch = makeScratchDirectory("server")
        var overrides: [String: ConfigurationRawValue] = ["http.port": .scalar("0"), "memory.pressure.enabled": .scalar("false")]
        if sourceDirectory { overrides["source.directory"] = .scalar(fixturesDirectory) }
        if disk { overrides["disk.path"] = .scalar(scratch + "/disk") }
        for (key, value) in settings { overrides[key] = .scalar(value) }
        let layers = try await ConfigurationLayers(environment: [:], overrides: overrides)
        let configuration = try StrataConfiguration(from: layers)
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "strata.test-server")
        logger.logLevel = .error
        let server = try StrataServer(configuration: configuration, logger: logger, probes: probes) { _, port in
            continuation.yield(port)
            continuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [server], logger: logger))
        let running = Task { try await group.run() }
        var port: Int?
        for await bound in ports {
            port = bound
            break
        }
        return TestServer(server: server, port: try #require(port), group: group, running: running, scratch: scratch)
    }

    private init(server: StrataServer, port: Int, group: ServiceGroup, running: Task<Void, any Error>, scratch: String) {
        self.server = server
        self.port = port
        self.group = group
        self.running = running
        self.scratch = scratch
    }

    var cache: ImageCache { server.cache }
    /// Encodings held by the service's encoded cache.
    var encodedEntries: Int { server.encoded.statistics?.count ?? 0 }
    /// `http.nodeName`: the `node` label of its metrics, its `X-Strata-Node`.
    var nodeName: String { server.settings.nodeName }

    func get(_ target: String, headers: [(String, String)] = [], method: HTTPMethod = .GET) async throws -> Answer {
        try await StrataServiceTests.get(port: port, target, headers: headers, method: method)
    }

    /// Graceful shutdown; waits for the server (and the engine's shutdown) to finish.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
        try? FileManager.default.removeItem(atPath: scratch)
    }
}
