import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// The thumbor route over a real server: signatures and `unsafe/` as thumbor checks them (400s),
/// thumbor's sizes (crop mode enlarges, `fit-in` does not, `full-fit-in` covers, `adaptive-`
/// turns the box), the filters and their refusals, `meta/`, and the answers' identity in the
/// encoded cache (gravity and filters in the ETag, warm repeats, purge through `/images`).
@Suite("thumbor route", .timeLimit(.minutes(5)))
struct ThumborRouteTests {
    static let key = "secret-key"
    static let photo = "jpeg/fallenleaf-2048x1280-420.jpg"

    static func start(_ settings: [String: String] = [:]) async throws -> TestServer {
        var all = ["thumbor.enabled": "true", "thumbor.securityKey": key]
        all.merge(settings) { $1 }
        return try await TestServer.start(all)
    }

    /// `/SIGNATURE/path`, signed with ``key``.
    static func signed(_ path: String, prefix: String = "") -> String {
        "\(prefix)/\(ThumborSigner(key: key).signature(Substring(path)))/\(path)"
    }

    static func size(_ answer: Answer) throws -> PixelSize { try ImageDecoder().decode(answer.body).size }

    @Test func signaturesAndUnsafeAreCheckedAsThumborChecksThem() async throws {
        let server = try await Self.start()
        let path = "300x200/\(Self.photo)"
        let good = try await server.get(Self.signed(path))
        #expect(good.status == 200, "\(String(decoding: good.body, as: UTF8.self))")
        let goodSize = try Self.size(good)
        #expect(good.header("Content-Type") == "image/jpeg" && goodSize == PixelSize(width: 300, height: 200))
        let other = ThumborSigner(key: "another").signature(Substring(path))
        for target in ["/\(other)/\(path)", "/unsafe/\(path)", "/\(Self.photo)", Self.signed(path) + "x"] {
            let refused = try await server.get(target)
            #expect(refused.status == 400, "\(target): \(refused.status)")
        }
        // A signature whose `=` is percent-encoded is the same signature (thumbor unquotes it).
        let signature = ThumborSigner(key: Self.key).signature(Substring(path))
        let encoded = try await server.get("/\(signature.replacingOccurrences(of: "=", with: "%3D"))/\(path)")
        #expect(encoded.status == 200)
        let missing = try await server.get(Self.signed("300x200/jpeg/no-such.jpg"))
        #expect(missing.status == 404)
        let unknownFilter = try await server.get(Self.signed("300x200/filters:nosuch(1)/\(Self.photo)"))
        #expect(unknownFilter.status == 400 && String(decoding: unknownFilter.body, as: UTF8.self).contains("nosuch"))
        let unsupported = try await server.get(Self.signed("300x200/filters:frame(a.png)/\(Self.photo)"))
        #expect(unsupported.status == 400 && String(decoding: unsupported.body, as: UTF8.self).contains("frame"))
        let badArguments = try await server.get(Self.signed("300x200/filters:quality(abc)/\(Self.photo)"))
        #expect(badArguments.status == 400 && String(decoding: badArguments.body, as: UTF8.self).contains("quality"))
        let fullURL = try await server.get(Self.signed("300x200/http://example.com/a.jpg"))
        #expect(fullURL.status == 400)
        try await server.stop()

        let open = try await Self.start(["thumbor.allowUnsafe": "true", "thumbor.urlPrefixes": "https://img.example.com/"])
        #expect(try await open.get("/unsafe/\(path)").status == 200)
        let prefixed = try await open.get("/unsafe/100x0/https://img.example.com/\(Self.photo)")
        #expect(prefixed.status == 200)
        #expect(try Self.size(prefixed) == PixelSize(width: 100, height: 63))
        try await open.stop()
    }

    @Test func sizesFollowThumborsTransformer() async throws {
        let server = try await Self.start()
        // The photo is 2048×1280.
        let cases: [(String, PixelSize)] = [
            ("300x200", PixelSize(width: 300, height: 200)),
            ("300x0", PixelSize(width: 300, height: 188)),
            ("0x100", PixelSize(width: 160, height: 100)),
            ("3000x100", PixelSize(width: 3000, height: 100)),  // crop mode enlarges
            ("fit-in/300x300", PixelSize(width: 300, height: 188)),
            ("fit-in/3000x3000", PixelSize(width: 2048, height: 1280)),  // fit-in does not
            ("fit-in/3000x3000/filters:upscale()", PixelSize(width: 3000, height: 1875)),
            ("full-fit-in/300x300", PixelSize(width: 480, height: 300)),
            ("adaptive-fit-in/200x400", PixelSize(width: 320, height: 200)),  // the box turned to the image
            ("origx100", PixelSize(width: 2048, height: 100)),
            ("300x200/filters:rotate(90)", PixelSize(width: 200, height: 300)),
            ("300x200/filters:proportion(0.5)", PixelSize(width: 150, height: 100)),
            ("3000x3000/filters:no_upscale()", PixelSize(width: 2048, height: 1280)),
            ("fit-in/300x300/filters:fill(red)", PixelSize(width: 300, height: 300)),
            ("100x100:1100x600/200x0", PixelSize(width: 200, height: 100)),
            ("300x200/filters:stretch()", PixelSize(width: 300, height: 200)),
            ("fit-in/9000x9000", PixelSize(width: 2048, height: 1280)),  // a box past http.maxDimension that fits
        ]
        for (options, size) in cases {
            let path = "\(options)/\(Self.photo)"
            let answer = try await server.get(Self.signed(path))
            #expect(answer.status == 200, "\(path): \(String(decoding: answer.body, as: UTF8.self))")
            if answer.status == 200 { #expect(try Self.size(answer) == size, "\(path)") }
            #expect(answer.header("X-Strata-Width") == String(size.width), "\(path)")
        }
        // Past http.maxDimension (4096): a 400 naming it.
        for path in [
            "5000x100", "0x3000", "full-fit-in/4000x4000", "fit-in/9000x9000/filters:upscale()", "fit-in/100x9000/filters:fill(red)",
        ] {
            let refused = try await server.get(Self.signed("\(path)/\(Self.photo)"))
            #expect(refused.status == 400 && refused.text.contains("http.maxDimension"), "\(path): \(refused.status) \(refused.text)")
        }
        // Numbers of any length are bounded, never trapped on: a mark laid far outside, a huge focal box.
        for path in [
            "300x200/filters:watermark(jpeg/kite-800x500-gray.jpg,-99999999999999999999,99999999999999999999p,0)",
            "300x200/filters:focal(99999999999999999999x0:99999999999999999999x99999999999999999999)",
            "300x200/filters:brightness(-99999999999999999999):rotate(99999999999999999990)",
        ] {
            let answer = try await server.get(Self.signed("\(path)/\(Self.photo)"))
            #expect(answer.status == 200 || answer.status == 400, "\(path): \(answer.status) \(answer.text)")
        }
        let sharpened = try await server.get(Self.signed("3000x2000/filters:sharpen(1,1,true)/\(Self.photo)"))
        #expect(sharpened.status == 400 && sharpened.text.contains("sharpen"), "a sharpen past 2048 × 2048 pixels")
        try await server.stop()
    }

    @Test func answersAreIdentifiedByTheirGeometryAndFilters() async throws {
        let token = "purge-token-0123456789abcdef"
        let server = try await Self.start(["http.adminToken": token])
        let centre = try await server.get(Self.signed("300x300/\(Self.photo)"))
        let right = try await server.get(Self.signed("300x300/right/\(Self.photo)"))
        let bright = try await server.get(Self.signed("300x300/filters:brightness(20)/\(Self.photo)"))
        let etags = Set([centre, right, bright].compactMap { $0.header("ETag") })
        #expect(etags.count == 3, "gravity and filters are part of the answer's identity")
        #expect(centre.body != right.body && centre.body != bright.body)
        // The brightened answer is the plain variant brightened at the encode: its pixels are
        // lighter by 255·20/100 = 51 levels where nothing saturates.
        let plain = try ImageDecoder().decode(centre.body), lighter = try ImageDecoder().decode(bright.body)
        #expect(bright.header("X-Strata-Tier") == "memory", "the filter ran on the variant already held")
        let meanDifference = Self.meanDifference(lighter, plain)
        #expect(meanDifference > 35 && meanDifference < 55, "\(meanDifference)")
        let again = try await server.get(Self.signed("300x300/filters:brightness(20)/\(Self.photo)"))
        #expect(again.header("X-Strata-Tier") == "encoded" && again.header("ETag") == bright.header("ETag"))
        // A purge of the key through /images removes thumbor's answers too.
        let purge = try await server.get("/images/\(Self.photo)", headers: [("Authorization", "Bearer \(token)")], method: .DELETE)
        #expect(purge.status / 100 == 2, "\(purge.status)")
        let afterPurge = try await server.get(Self.signed("300x300/filters:brightness(20)/\(Self.photo)"))
        #expect(afterPurge.status == 200 && afterPurge.header("X-Strata-Tier") == "source")
        try await server.stop()
    }

    /// The mean of |a − b| over the colour channels of two images of one size.
    static func meanDifference(_ a: PixelImage, _ b: PixelImage) -> Double {
        let a = PixelConversion.convert(a, to: .bgra32Premultiplied), b = PixelConversion.convert(b, to: .bgra32Premultiplied)
        var total = 0.0
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                for y in 0..<a.height {
                    for x in 0..<a.width {
                        for c in 0..<3 {
                            total += abs(Double(pa[y * a.bytesPerRow + 4 * x + c]) - Double(pb[y * b.bytesPerRow + 4 * x + c]))
                        }
                    }
                }
            }
        }
        return total / Double(a.width * a.height * 3)
    }

    @Test func maxBytesMetaAndAutoWebP() async throws {
        let server = try await Self.start(["thumbor.autoWebp": "true"])
        let large = try await server.get(Self.signed("600x400/filters:quality(95)/\(Self.photo)"))
        let capped = try await server.get(Self.signed("600x400/filters:quality(95):max_bytes(30000)/\(Self.photo)"))
        #expect(large.body.count > 30000 && capped.body.count <= 30000, "\(large.body.count) → \(capped.body.count)")
        let meta = try await server.get(Self.signed("meta/300x200/\(Self.photo)"))
        #expect(meta.status == 200 && meta.header("Content-Type") == "application/json")
        let document = try JSONSerialization.jsonObject(with: Data(meta.body)) as? [String: Any]
        let thumbor = try #require(document?["thumbor"] as? [String: Any])
        #expect((thumbor["target"] as? [String: Int]) == ["width": 300, "height": 200])
        let operations = try #require(thumbor["operations"] as? [[String: Any]])
        #expect(operations.map { $0["type"] as? String } == ["crop", "resize"])
        let webp = try await server.get(Self.signed("300x200/\(Self.photo)"), headers: [("Accept", "image/webp,*/*")])
        #expect(webp.header("Content-Type") == "image/webp" && webp.header("Vary") == "Accept")
        let jpeg = try await server.get(Self.signed("300x200/\(Self.photo)"), headers: [("Accept", "image/jpeg")])
        #expect(jpeg.header("Content-Type") == "image/jpeg" && jpeg.header("ETag") != webp.header("ETag"))
        try await server.stop()
    }

    /// A repeat is answered on the event loop (the warm path) with the ordinary answer's fields
    /// and bytes; one with a watermark, `meta/` or a bad signature goes the ordinary way.
    @Test func warmRepeatsAreAnsweredOnTheEventLoop() async throws {
        let server = try await Self.start(["thumbor.autoWebp": "true"])
        let port = server.port
        for path in [
            "300x200/\(Self.photo)", "fit-in/200x200/filters:grayscale():round_corner(20,255,255,255)/\(Self.photo)",
            "-150x100/right/filters:format(png)/\(Self.photo)",
        ] {
            let target = Self.signed(path)
            let first = try await server.get(target, headers: [("Accept", "image/webp")])
            #expect(first.status == 200, "\(target): \(first.status) \(first.text)")
            let before = try await WarmPathTests.warmAnswers(server)
            let answers = try await offThePool {
                try WarmPathTests.exchange(
                    port: port,
                    "GET \(target) HTTP/1.1\r\nHost: a\r\nAccept: image/webp\r\n\r\nGET \(target) HTTP/1.1\r\nHost: a\r\nAccept: image/webp\r\nConnection: close\r\n\r\n",
                    responses: 2)
            }
            #expect(try await WarmPathTests.warmAnswers(server) == before + 1, "\(path)")
            let warm = WarmPathTests.fields(answers[0].head), ordinary = WarmPathTests.fields(answers[1].head)
            let perResponse: Set = ["date", "server-timing", "connection"]
            #expect(warm.filter { !perResponse.contains($0.key) } == ordinary.filter { !perResponse.contains($0.key) }, "\(path)")
            #expect(warm["x-strata-tier"] == "encoded" && answers[0].body == first.body && answers[1].body == first.body)
        }
        let before = try await WarmPathTests.warmAnswers(server)
        let meta = Self.signed("meta/300x200/\(Self.photo)")
        _ = try await server.get(meta)
        _ = try await server.get(meta)
        let bad = try await server.get("/AAAA/300x200/\(Self.photo)")
        let after = try await WarmPathTests.warmAnswers(server)
        #expect(bad.status == 400 && after == before)
        try await server.stop()
    }

    @Test func underAPrefixTheRestOfTheServiceIsUntouched() async throws {
        let server = try await Self.start(["thumbor.prefix": "/thumbor"])
        let path = "200x100/\(Self.photo)"
        #expect(try await server.get(Self.signed(path, prefix: "/thumbor")).status == 200)
        #expect(try await server.get(Self.signed(path)).status == 404, "outside the prefix: not thumbor's")
        #expect(try await server.get("/healthz").status == 200)
        #expect(try await server.get("/images/\(Self.photo)?w=100").status == 200)
        try await server.stop()
    }
}
