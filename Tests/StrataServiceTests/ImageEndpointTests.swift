import Foundation
import Strata
import StrataService
import Testing

/// `GET /images/{key}`: tiers, tolerance, validators, negotiation and every error status, on a
/// real server on an ephemeral port.
@Suite("Image endpoint", .timeLimit(.minutes(5)))
struct ImageEndpointTests {
    static let photo = "/images/jpeg/fallenleaf-2048x1280-420.jpg"

    @Test func secondRequestIsServedFromTheEncodedCacheOrMemory() async throws {
        let server = try await TestServer.start()
        let first = try await server.get("\(Self.photo)?w=512&h=512&format=jpeg")
        #expect(first.status == 200)
        #expect(first.header("X-Strata-Tier") == "source")
        #expect(first.header("Content-Type") == "image/jpeg")
        #expect(first.header("X-Strata-Width") == "512")
        #expect(first.header("X-Strata-Height") == "320")
        #expect(Array(first.body.prefix(3)) == [0xFF, 0xD8, 0xFF])
        #expect(first.header("Server-Timing")?.contains("encode;dur=") == true)

        let second = try await server.get("\(Self.photo)?w=512&h=512&format=jpeg")
        #expect(second.status == 200)
        #expect(second.header("X-Strata-Tier") == "encoded")
        #expect(second.body == first.body)
        #expect(second.header("ETag") == first.header("ETag"))

        // The same variant, another encoding: the pixels come from memory.
        let raw = try await server.get("\(Self.photo)?w=512&h=512&format=raw")
        #expect(raw.header("X-Strata-Tier") == "memory")
        #expect(raw.header("Content-Type") == "application/octet-stream")
        #expect(raw.header("X-Strata-Style") == "bgra32-premultiplied")
        let bytesPerRow = try #require(raw.header("X-Strata-Bytes-Per-Row").flatMap(Int.init))
        #expect(bytesPerRow >= 512 * 4)
        #expect(raw.body.count == bytesPerRow * 320)
        try await server.stop()
    }

    @Test func aRequestWithinToleranceIsServedWithoutARender() async throws {
        let server = try await TestServer.start()
        _ = try await server.get("\(Self.photo)?w=600&h=600&format=webp")
        let decodes = server.cache.statistics.engine.sourceDecodes
        // 560×560 is within 20 % of the 600×375 variant: served as it is.
        let near = try await server.get("\(Self.photo)?w=560&h=560&format=webp")
        #expect(near.status == 200)
        #expect(near.header("X-Strata-Tier") == "encoded")
        #expect(near.header("X-Strata-Width") == "600")
        // With tolerance 0 the same box is a render of its own.
        let exact = try await server.get("\(Self.photo)?w=560&h=560&format=webp&tolerance=0")
        #expect(exact.header("X-Strata-Tier") == "source")
        #expect(exact.header("X-Strata-Width") == "560")
        #expect(server.cache.statistics.engine.sourceDecodes == decodes + 1)
        try await server.stop()
    }

    @Test func ifNoneMatchAnswers304() async throws {
        let server = try await TestServer.start()
        let first = try await server.get("\(Self.photo)?w=256&h=256&format=jpeg&quality=70")
        let etag = try #require(first.header("ETag"))
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\""))
        let again = try await server.get("\(Self.photo)?w=256&h=256&format=jpeg&quality=70", headers: [("If-None-Match", etag)])
        #expect(again.status == 304)
        #expect(again.body.isEmpty)
        #expect(again.header("ETag") == etag)
        let weak = try await server.get(
            "\(Self.photo)?w=256&h=256&format=jpeg&quality=70", headers: [("If-None-Match", "\"other\", W/\(etag)")])
        #expect(weak.status == 304)
        // Another quality is other bytes: another validator.
        let other = try await server.get("\(Self.photo)?w=256&h=256&format=jpeg&quality=71", headers: [("If-None-Match", etag)])
        #expect(other.status == 200)
        #expect(other.header("ETag") != etag)
        try await server.stop()
    }

    @Test func acceptNegotiatesTheFormat() async throws {
        let server = try await TestServer.start()
        let avif = try await server.get(
            "\(Self.photo)?w=300&h=300", headers: [("Accept", "image/avif,image/webp,image/apng,image/*,*/*;q=0.8")])
        #expect(avif.header("Content-Type") == "image/avif")
        #expect(avif.header("Vary") == "Accept")
        #expect(ImageFormatDetector.detect(avif.body) == .avif)
        let webp = try await server.get("\(Self.photo)?w=300&h=300", headers: [("Accept", "image/webp,image/apng,image/*,*/*;q=0.8")])
        #expect(webp.header("Content-Type") == "image/webp")
        #expect(webp.header("Vary") == "Accept")
        #expect(Array(webp.body[8..<12]) == Array("WEBP".utf8))
        let jpeg = try await server.get("\(Self.photo)?w=300&h=300", headers: [("Accept", "image/*,*/*;q=0.8")])
        #expect(jpeg.header("Content-Type") == "image/jpeg")
        #expect(jpeg.header("Vary") == "Accept")
        #expect(jpeg.header("ETag") != webp.header("ETag"))
        let refused = try await server.get("\(Self.photo)?w=300&h=300", headers: [("Accept", "image/webp;q=0, image/*")])
        #expect(refused.header("Content-Type") == "image/jpeg")
        // An image with transparency, to a client without WebP: PNG keeps the alpha.
        let alpha = try await server.get("/images/webp/cups-640x400-alpha.webp?w=320&h=320", headers: [("Accept", "image/*")])
        #expect(alpha.header("Content-Type") == "image/png")
        #expect(Array(alpha.body.prefix(4)) == [0x89, 0x50, 0x4E, 0x47])
        let alphaAgain = try await server.get("/images/webp/cups-640x400-alpha.webp?w=320&h=320", headers: [("Accept", "image/*")])
        #expect(alphaAgain.header("X-Strata-Tier") == "encoded")
        #expect(alphaAgain.header("Content-Type") == "image/png")
        // A named format is not negotiated.
        let named = try await server.get("\(Self.photo)?w=300&h=300&format=png", headers: [("Accept", "image/webp")])
        #expect(named.header("Content-Type") == "image/png")
        #expect(named.header("Vary") == nil)
        try await server.stop()
    }

    @Test func badParametersAre400WithTheParameterNamed() async throws {
        let server = try await TestServer.start(["http.maxDimension": "2000"])
        let cases: [(String, String)] = [
            ("?w=2001&h=10", "http.maxDimension"),
            ("?w=0&h=10", "w=0"),
            ("?w=ten", "w=ten"),
            ("?w=10&mode=stretch", "mode=stretch"),
            ("?w=10&format=heic", "format=heic"),
            ("?w=10&quality=101", "quality=101"),
            ("?w=10&tolerance=1.5", "tolerance=1.5"),
            ("?w=10&width=10", "width"),
            ("?w=10&w=20", "twice"),
            ("", "give w, h or both"),
            ("?w=10&mode=fill", "needs both"),
        ]
        for (query, named) in cases {
            let answer = try await server.get("\(Self.photo)\(query)")
            #expect(answer.status == 400, "\(query)")
            #expect(answer.errorCode == "bad_parameter", "\(query)")
            #expect(answer.text.contains(named), "\(query): \(answer.text)")
            #expect(answer.header("Content-Type") == "application/json")
        }
        #expect(server.cache.statistics.engine.requests == 0)
        try await server.stop()
    }

    @Test func aKeyNeverReachesOutsideTheSource() async throws {
        let server = try await TestServer.start()
        for target in [
            "/images/%2e%2e/%2e%2e/%2e%2e/etc/passwd?w=10", "/images/jpeg/..%2f..%2f..%2fetc%2fpasswd?w=10",
            "/images/jpeg/%2e%2e/%2e%2e/Package.swift?w=10", "/images/jpeg//orientation-1.jpg?w=10",
            "/images/jpeg/../../etc/passwd?w=10", "/images/%00?w=10",
        ] {
            let answer = try await server.get(target)
            #expect(answer.status == 400 || answer.status == 404, "\(target): \(answer.status)")
            #expect(!answer.text.contains("root:"), "\(target)")
        }
        try await server.stop()
    }

    @Test func errorsHaveTheirStatus() async throws {
        let server = try await TestServer.start()
        let missing = try await server.get("/images/jpeg/no-such-photo.jpg?w=100")
        #expect(missing.status == 404)
        #expect(missing.errorCode == "not_found")
        let garbage = try await server.get("/images/broken/garbage.bin?w=100")
        #expect(garbage.status == 422)
        #expect(garbage.errorCode == "undecodable")
        let bomb = try await server.get("/images/broken/bomb-65000x65000.jpg?w=100")
        #expect(bomb.status == 413)
        #expect(bomb.errorCode == "too_large")
        // Over the pyramids' limit too (the disk tier gives pyramids a default place).
        #expect(bomb.text.contains("iiif.maxSourcePixels"))
        // The engine keeps serving.
        let fine = try await server.get("\(Self.photo)?w=100&format=jpeg")
        #expect(fine.status == 200)
        #expect(fine.header("X-Strata-Width") == "100")
        try await server.stop()
    }
}
