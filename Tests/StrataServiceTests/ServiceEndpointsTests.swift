import AsyncHTTPClient
import Foundation
import Strata
import StrataService
import Testing

/// `/metrics`, `/stats`, `/healthz`; the node's name on each; load shedding; concurrent requests.
@Suite("Service endpoints", .timeLimit(.minutes(5)))
struct ServiceEndpointsTests {
    @Test func metricsStatsAndHealth() async throws {
        let server = try await TestServer.start(["http.nodeName": "edge-7"])
        let cold = try await server.get("/images/jpeg/kite-800x500-gray.jpg?w=128&format=jpeg")
        let warm = try await server.get("/images/jpeg/kite-800x500-gray.jpg?w=128&format=jpeg")
        let missing = try await server.get("/images/jpeg/missing.jpg?w=128")
        // Every answer names the node: served through Hummingbird, from the warm path, an error.
        #expect(cold.header("X-Strata-Node") == "edge-7")
        #expect(warm.header("X-Strata-Node") == "edge-7")
        #expect(missing.header("X-Strata-Node") == "edge-7")

        let health = try await server.get("/healthz")
        #expect(health.status == 200)
        #expect(health.text == "ok\n")
        #expect(health.header("X-Strata-Node") == "edge-7")

        let unknown = try await server.get("/favicon.ico")
        #expect(unknown.status == 404)
        #expect(unknown.errorCode == "not_found")
        #expect(unknown.header("X-Strata-Node") == "edge-7")
        var post = HTTPClientRequest(url: "http://127.0.0.1:\(server.port)/images/jpeg/kite-800x500-gray.jpg?w=128")
        post.method = .POST
        let refused = try await testClient.execute(post, timeout: .seconds(60))
        #expect(refused.status.code == 405)
        #expect(refused.headers.first(name: "Allow") == "GET, HEAD, DELETE")

        let metrics = try await server.get("/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.header("Content-Type")?.hasPrefix("text/plain") == true)
        let text = metrics.text
        #expect(text.contains(#"strata_http_requests_total{route="images",status="200",node="edge-7"} 2"#))
        #expect(text.contains(#"strata_http_requests_total{route="images",status="404",node="edge-7"} 1"#))
        #expect(text.contains(#"strata_http_images_total{tier="encoded",node="edge-7"} 1"#))
        #expect(text.contains(#"strata_http_images_total{tier="source",node="edge-7"} 1"#))
        #expect(text.contains("strata_http_request_duration_seconds_bucket"))
        // The engine's own metrics, through the same registry, labelled with the node too.
        #expect(text.contains(#"strata_requests_total{tier="source",node="edge-7"} 1"#))
        #expect(text.contains(#"strata_encoded_cache_entries{node="edge-7"} 1"#))
        // Every sample line names the node (comments and blank lines aside).
        let unlabelled = text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.contains(#"node="edge-7""#) }
        #expect(unlabelled.isEmpty, "\(unlabelled.prefix(5))")

        let stats = try await server.get("/stats")
        #expect(stats.status == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
        #expect(json["node"] as? String == "edge-7")
        let engine = try #require(json["engine"] as? [String: Any])
        #expect(engine["requests"] as? Int == 3)
        #expect((engine["errors"] as? [String: Int])?["not_found"] == 1)
        let encoded = try #require(json["encoded"] as? [String: Any])
        #expect(encoded["hits"] as? Int == 1)
        #expect(json["disk"] is [String: Any])
        #expect((json["tiers"] as? [String: Any])?["memory"] is [String: Any])
        #expect(json["queues"] is [String: Any])
        try await server.stop()
    }

    @Test func aFullUrgentQueueSheds503ButMemoryHitsAreServed() async throws {
        // Bound 0: any request that needs the engine's threads is shed.
        let server = try await TestServer.start(["http.maxQueue": "0", "http.retryAfter": "3s"])
        let shed = try await server.get("/images/jpeg/kite-800x500-gray.jpg?w=128&format=jpeg")
        #expect(shed.status == 503)
        #expect(shed.errorCode == "overloaded")
        #expect(shed.header("Retry-After") == "3")
        // A variant already in memory is still served (its encode is shed, not its pixels).
        _ = try await server.cache.image(for: ImageRequest(key: "jpeg/kite-800x500-gray.jpg", box: PixelSize(width: 128, height: 4096)))
        let raw = try await server.get("/images/jpeg/kite-800x500-gray.jpg?w=128&format=raw")
        #expect(raw.status == 200)
        #expect(raw.header("X-Strata-Tier") == "memory")
        let metrics = try await server.get("/metrics")
        #expect(metrics.text.contains(#"strata_http_shed_total{node="\#(server.nodeName)"} 1"#))
        try await server.stop()
    }

    @Test func concurrentRequestsAllSucceed() async throws {
        let server = try await TestServer.start()
        let keys = [
            "jpeg/fallenleaf-2048x1280-420.jpg", "jpeg/kite-800x500-gray.jpg", "webp/path-2560x1600.webp",
            "jpeg/eveningglow-1024x640-progressive.jpg",
        ]
        let targets = keys.flatMap { key in
            [160, 320, 640].flatMap { w in ["jpeg", "webp"].map { "/images/\(key)?w=\(w)&h=\(w)&format=\($0)" } }
        }
        let port = server.port
        let answers = try await withThrowingTaskGroup(of: (String, Answer).self) { group in
            for target in targets + targets {
                group.addTask { (target, try await get(port: port, target)) }
            }
            return try await group.reduce(into: [(String, Answer)]()) { $0.append($1) }
        }
        #expect(answers.count == targets.count * 2)
        for (target, answer) in answers {
            #expect(answer.status == 200, "\(target): \(answer.text)")
            let w = Int(target.split(separator: "w=")[1].prefix { $0.isNumber })!
            let width = Int(answer.header("X-Strata-Width") ?? "") ?? 0
            let height = Int(answer.header("X-Strata-Height") ?? "") ?? 0
            #expect(max(width, height) == w, "\(target)")
        }
        // Identical concurrent requests were coalesced or served from what the first one made.
        #expect(server.cache.statistics.engine.sourceDecodes <= keys.count * 3)
        try await server.stop()
    }
}
