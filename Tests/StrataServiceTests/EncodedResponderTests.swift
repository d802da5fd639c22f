import Foundation
import Strata
import Testing

@testable import StrataService

/// `/images` and IIIF share one encoded responder: one validator format, one encode-and-cache,
/// and load shedding on both.
@Suite("Encoded responder", .timeLimit(.minutes(5)))
struct EncodedResponderTests {
    static let key = "jpeg/fallenleaf-2048x1280-420.jpg"
    static let identifier = "jpeg%2Ffallenleaf-2048x1280-420.jpg"

    /// A cold IIIF tile waits for the engine's urgent lane like a cold `/images` render, so it
    /// is shed the same way: 503 `overloaded` with `Retry-After` (and CORS), counted in
    /// `strata_http_shed_total`; once memory holds the level, its tiles are served.
    @Test func coldIIIFTilesAreShedLikeImages() async throws {
        let server = try await TestServer.start(["http.maxQueue": "0", "http.retryAfter": "3s"], disk: false)
        // A tile of an original whose size is not known yet is shed before its header is read.
        let tile = "/iiif/3/\(Self.identifier)/0,0,1024,1024/512,/0/default.jpg"
        let unknown = try await server.get(tile)
        #expect(unknown.status == 503 && unknown.errorCode == "overloaded")
        // info.json (a header read, no render) is served; then the tile needs a render: shed.
        #expect(try await server.get("/iiif/3/\(Self.identifier)/info.json").status == 200)
        let shed = try await server.get(tile)
        #expect(shed.status == 503, "\(shed.text)")
        #expect(shed.errorCode == "overloaded")
        #expect(shed.header("Retry-After") == "3")
        #expect(shed.header("Access-Control-Allow-Origin") == "*")
        let image = try await server.get("/images/\(Self.key)?w=128&format=jpeg")
        #expect(image.status == 503 && image.errorCode == "overloaded")
        // The level's variant (the whole image at scale 1/2) in memory: the tile is served.
        _ = try await server.cache.image(for: ImageRequest(key: CacheKey(Self.key), box: PixelSize(width: 1024, height: 640)))
        let served = try await server.get(tile)
        #expect(served.status == 200)
        #expect(served.header("X-Strata-Tier") == "memory")
        let metrics = try await server.get("/metrics").text
        #expect(metrics.contains(#"strata_http_shed_total{node="\#(server.nodeName)"} 3"#), "\(metrics)")
        try await server.stop()
    }

    /// The same variant, encoded whole for `/images` and as a IIIF tile: one validator format,
    /// `"{source version}-{variant}-{format}[-q{quality}][-{derivation}]"`, the tile's naming
    /// what was cut from the variant after the whole image's fields.
    @Test func imagesAndIIIFValidatorsHaveOneFormat() async throws {
        let server = try await TestServer.start(disk: false)
        let whole = try await server.get("/images/\(Self.key)?w=1024&h=1024&format=jpeg")
        #expect(whole.status == 200 && whole.header("X-Strata-Width") == "1024")
        let tile = try await server.get("/iiif/3/\(Self.identifier)/full/1024,/0/default.jpg")
        #expect(tile.status == 200 && tile.header("X-Strata-Tier") == "memory")
        let wholeTag = try #require(whole.header("ETag"))
        let tileTag = try #require(tile.header("ETag"))
        #expect(wholeTag.hasSuffix("-jpeg-q80\""), "\(wholeTag)")
        #expect(tileTag.hasPrefix(wholeTag.dropLast() + "-3/"), "\(wholeTag) against \(tileTag)")
        #expect(!tileTag.contains(",") && !tileTag.contains(" "), "\(tileTag)")
        // A PNG has no quality in either.
        let png = try await server.get("/iiif/3/\(Self.identifier)/full/1024,/0/default.png")
        let pngTag = try #require(png.header("ETag"))
        #expect(pngTag.hasPrefix(wholeTag.dropLast("-jpeg-q80\"".count) + "-png-3/"), "\(pngTag)")
        // Both are the encoded cache's the second time, with the same validators.
        let wholeAgain = try await server.get("/images/\(Self.key)?w=1024&h=1024&format=jpeg")
        let tileAgain = try await server.get("/iiif/3/\(Self.identifier)/full/1024,/0/default.jpg")
        #expect(wholeAgain.header("ETag") == wholeTag && tileAgain.header("ETag") == tileTag)
        #expect(tileAgain.header("X-Strata-Tier") == "encoded" && tileAgain.body == tile.body)
        try await server.stop()
    }
}
