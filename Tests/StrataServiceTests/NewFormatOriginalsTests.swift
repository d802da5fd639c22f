import Foundation
import Strata
import StrataTestSupport
import Testing

/// HEIC, AVIF and GIF originals served by `strata serve`: `/images/...` answers and IIIF
/// `info.json` and tiles render them as they do JPEGs. The files are made at test time by the
/// Debian tools (`heif-enc`, `avifenc`) and by ``GIFWriter``.
@Suite("New format originals", .timeLimit(.minutes(5)))
struct NewFormatOriginalsTests {
    /// A source directory with `photo.heic`, `photo.avif` (both 1024×640) and `dots.gif`
    /// (48×32, a transparent border).
    static func originals() throws -> String {
        let root = makeScratchDirectory("originals")
        let photo = fixturesDirectory + "/jpeg/eveningglow-1024x640-progressive.jpg"
        try ExternalTools.run("heif-enc", ["-q", "85", "-o", root + "/photo.heic", photo])
        try ExternalTools.run("avifenc", ["-s", "8", photo, root + "/photo.avif"])
        let gif = GIFWriter.encode(
            screenWidth: 48, screenHeight: 32, globalTable: [(0, 128, 0), (255, 255, 0)],
            frames: [.init(left: 8, top: 8, width: 32, height: 16, indices: (0..<512).map { UInt8($0 % 2) })])
        _ = FileManager.default.createFile(atPath: root + "/dots.gif", contents: Data(gif))
        return root
    }

    @Test func imagesRender() async throws {
        let root = try Self.originals()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await TestServer.start(["source.directory": root])
        for key in ["photo.heic", "photo.avif"] {
            let answer = try await server.get("/images/\(key)?w=256&h=256&format=jpeg")
            #expect(answer.status == 200, "\(key): \(String(decoding: answer.body, as: UTF8.self))")
            #expect(answer.header("Content-Type") == "image/jpeg")
            #expect(answer.header("X-Strata-Width") == "256" && answer.header("X-Strata-Height") == "160")
        }
        // A GIF with transparency: negotiated without a format, PNG keeps the alpha.
        let gif = try await server.get("/images/dots.gif?w=48&h=48")
        #expect(gif.status == 200)
        #expect(gif.header("Content-Type") == "image/png")
        let decoded = try ImageDecoder().decode(gif.body)
        #expect(decoded.size == PixelSize(width: 48, height: 32))
        #expect(decoded.pixelBytes(x: 0, y: 0)[3] == 0 && decoded.pixelBytes(x: 20, y: 15)[3] == 255)
        try await server.stop()
    }

    @Test func iiifInfoAndTiles() async throws {
        let root = try Self.originals()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let server = try await TestServer.start(["source.directory": root])
        for key in ["photo.heic", "photo.avif", "dots.gif"] {
            let info = try await server.get("/iiif/3/\(key)/info.json")
            #expect(info.status == 200, "\(key)")
            let json = try #require(JSONSerialization.jsonObject(with: Data(info.body)) as? [String: Any])
            #expect(json["width"] as? Int == (key == "dots.gif" ? 48 : 1024))
            let tile = try await server.get("/iiif/3/\(key)/full/32,/0/default.jpg")
            #expect(tile.status == 200, "\(key)")
            #expect(Array(tile.body.prefix(3)) == [0xFF, 0xD8, 0xFF])
        }
        try await server.stop()
    }
}
