import Foundation
import Strata
import StrataService
import Testing

/// IIIF image requests on the warm path (``IIIFEndpoint/warmTile(path:authority:ifNoneMatch:)``):
/// a tile whose encoding is cached is written on the event loop with exactly the ordinary
/// answer's fields and bytes; everything else is left to Hummingbird.
@Suite("IIIF on the warm path", .timeLimit(.minutes(5)))
struct IIIFWarmPathTests {
    static let token = "iiif-warm-admin-token-0123456789"

    /// A server whose originals above 1 MP are cut from tile pyramids (`path-2560x1600.jpg`),
    /// the others from whole-image variants.
    static func start(_ settings: [String: String] = [:]) async throws -> TestServer {
        var all = [
            "iiif.pyramidPath": makeScratchDirectory("warm-pyramids"), "iiif.tiledAbove": "1000000", "iiif.tileSize": "256",
            "http.cacheControl": "public, max-age=60", "http.adminToken": token,
        ]
        all.merge(settings) { $1 }
        return try await TestServer.start(all, disk: false)
    }

    @Test func warmTilesCarryTheOrdinaryFieldsAndBytes() async throws {
        let server = try await Self.start()
        let port = server.port
        for target in [
            // A region of a whole-image variant (3.0), a whole image made gray as PNG (2.1), a
            // square at the default gravity, turned; a tile of a pyramid, and a region pasted
            // from four of its tiles and resampled.
            "/iiif/3/jpeg%2Fkite-800x500-gray.jpg/0,0,400,250/200,/0/default.jpg",
            "/iiif/2/jpeg%2Feveningglow-1024x640-progressive.jpg/full/100,/0/gray.png",
            "/iiif/3/jpeg%2Ffallenleaf-1024x640-420-restart.jpg/square/120,/90/default.jpg",
            "/iiif/3/jpeg%2Fpath-2560x1600.jpg/512,256,256,256/256,/0/default.jpg",
            "/iiif/3/jpeg%2Fpath-2560x1600.jpg/100,100,300,300/150,/!0/default.webp",
        ] {
            let first = try await server.get(target)
            #expect(first.status == 200, "\(target): \(first.status) \(first.text)")
            let before = try await WarmPathTests.warmAnswers(server)
            // The second request asks to close the connection: Hummingbird answers it.
            let answers = try await offThePool {
                try WarmPathTests.exchange(
                    port: port,
                    "GET \(target) HTTP/1.1\r\nHost: viewer.test:81\r\n\r\nGET \(target) HTTP/1.1\r\nHost: viewer.test:81\r\nConnection: close\r\n\r\n",
                    responses: 2)
            }
            #expect(try await WarmPathTests.warmAnswers(server) == before + 1, "\(target)")
            #expect(answers.allSatisfy { $0.head.hasPrefix("HTTP/1.1 200 OK\r\n") }, "\(answers.map(\.head))")
            let warm = WarmPathTests.fields(answers[0].head)
            let ordinary = WarmPathTests.fields(answers[1].head)
            let perResponse: Set = ["date", "server-timing", "connection"]
            #expect(
                warm.filter { !perResponse.contains($0.key) } == ordinary.filter { !perResponse.contains($0.key) },
                "\(target)\n\(answers[0].head)\n\(answers[1].head)")
            #expect(warm["x-strata-tier"] == "encoded" && warm["access-control-allow-origin"] == "*")
            #expect(warm["link"]?.hasPrefix("<http://viewer.test:81/iiif/") == true, "\(warm)")
            #expect(warm["server-timing"]?.hasPrefix("engine;dur=") == true && warm["date"]?.hasSuffix(" GMT") == true)
            #expect(answers[0].body == first.body && answers[1].body == first.body, "\(target)")
            #expect(Int(warm["content-length"] ?? "") == first.body.count)
        }
        // Counted as IIIF answers from the encoded cache.
        let metrics = try await server.get("/metrics").text
        #expect(metrics.contains(#"strata_http_requests_total{route="iiif",status="200",node="\#(server.nodeName)"} 15"#), "\(metrics)")
        try await server.stop()
    }

    /// What the warm path leaves to Hummingbird, answered right there: a matching
    /// `If-None-Match` (304), HTTP/1.0, a `square` placed by saliency, `info.json`, a malformed
    /// request (400, with CORS), an original whose size is not known yet, two `Host` fields, and
    /// — after a purge — the tile itself until it is encoded again.
    @Test func theRestGoesTheOrdinaryWay() async throws {
        let server = try await Self.start(["iiif.squareGravity": "smart"])
        let port = server.port
        let target = "/iiif/3/jpeg%2Fkite-800x500-gray.jpg/0,0,400,250/200,/0/default.jpg"
        let smart = "/iiif/3/jpeg%2Fkite-800x500-gray.jpg/square/100,/0/default.jpg"
        let first = try await server.get(target)
        let etag = try #require(first.header("ETag"))
        #expect(try await server.get(smart).status == 200)
        let before = try await WarmPathTests.warmAnswers(server)
        let notModified = try await server.get(target, headers: [("If-None-Match", etag)])
        #expect(notModified.status == 304 && notModified.header("Access-Control-Allow-Origin") == "*")
        let old = try await offThePool { try WarmPathTests.exchange(port: port, "GET \(target) HTTP/1.0\r\n\r\n", responses: 1) }
        #expect(old[0].head.contains(" 200 ") && old[0].body == first.body)
        let twoHosts = try await offThePool {
            try WarmPathTests.exchange(
                port: port, "GET \(target) HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n", responses: 1)
        }
        #expect(!twoHosts[0].head.contains(" 200 ") || twoHosts[0].body == first.body, "\(twoHosts[0].head)")
        #expect(try await server.get(smart).header("X-Strata-Tier") == "encoded")
        #expect(try await server.get("/iiif/3/jpeg%2Fkite-800x500-gray.jpg/info.json").status == 200)
        let bad = try await server.get("/iiif/3/jpeg%2Fkite-800x500-gray.jpg/0,0,400,250/200,/45x/default.jpg")
        #expect(bad.status == 400 && bad.header("Access-Control-Allow-Origin") == "*")
        #expect(try await server.get("/iiif/3/jpeg%2Fcups-320x200-rgb-reference.jpg/full/max/0/default.jpg").status == 200)
        #expect(try await WarmPathTests.warmAnswers(server) == before)
        // Warm now, then purged: the next answer is encoded again by the ordinary path.
        #expect(try await server.get(target).header("X-Strata-Tier") == "encoded")
        #expect(try await WarmPathTests.warmAnswers(server) == before + 1)
        let purged = try await server.get(
            "/iiif/3/jpeg%2Fkite-800x500-gray.jpg", headers: [("Authorization", "Bearer \(Self.token)")], method: .DELETE)
        #expect(purged.status == 200, "\(purged.text)")
        let again = try await server.get(target)
        #expect(again.status == 200 && again.header("X-Strata-Tier") != "encoded" && again.body == first.body)
        #expect(try await WarmPathTests.warmAnswers(server) == before + 1)
        try await server.stop()
    }

    /// With `revalidateAfter`, every IIIF request goes the ordinary way (its memo entry may be
    /// due for a check).
    @Test func revalidationKeepsIIIFOffTheWarmPath() async throws {
        let server = try await Self.start(["revalidateAfter": "1h"])
        let target = "/iiif/3/jpeg%2Fkite-800x500-gray.jpg/full/160,/0/default.jpg"
        let first = try await server.get(target)
        let second = try await server.get(target)
        #expect(second.header("X-Strata-Tier") == "encoded" && second.body == first.body)
        #expect(try await WarmPathTests.warmAnswers(server) == 0)
        try await server.stop()
    }
}
