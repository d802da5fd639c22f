import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// IIIF requests of an original above `iiif.tiledAbove`, served from its tile pyramid: viewer
/// tiles at every scale factor, regions across tiles, `full/max`, turns, the table's hits.
@Suite("IIIF pyramids", .timeLimit(.minutes(5)))
struct IIIFPyramidTests {
    static let photo = "jpeg%2Ffallenleaf-2048x1280-420.jpg"

    static let token = "pyramid-purge-token-0123456789"

    static func start() async throws -> TestServer {
        try await TestServer.start(
            [
                "iiif.pyramidPath": makeScratchDirectory("pyramids"), "iiif.tiledAbove": "1000000", "iiif.tileSize": "256",
                "http.adminToken": token,
            ], disk: false)
    }

    /// The fixture's full decode.
    static let reference: PixelImage = {
        let bytes = try! Data(contentsOf: URL(fileURLWithPath: fixturesDirectory + "/jpeg/fallenleaf-2048x1280-420.jpg"))
        return try! ImageDecoder().decode([UInt8](bytes))
    }()

    /// `region` (original pixels) of the reference resized to `size` by an area average.
    static func expected(_ region: (Int, Int, Int, Int), _ size: PixelSize) -> PixelImage {
        Resampler(filter: .box).resample(
            reference, region: SourceRect(x: Double(region.0), y: Double(region.1), width: Double(region.2), height: Double(region.3)),
            to: size)
    }

    static func decoded(_ answer: Answer) throws -> PixelImage { try ImageDecoder().decode(answer.body) }

    @Test func viewerTilesComeFromThePyramid() async throws {
        let server = try await Self.start()
        let info = try #require(
            JSONSerialization.jsonObject(with: Data(try await server.get("/iiif/3/\(Self.photo)/info.json").body)) as? [String: Any])
        let tiles = try #require(info["tiles"] as? [[String: Any]])
        #expect(tiles.first?["width"] as? Int == 256 && tiles.first?["scaleFactors"] as? [Int] == [1, 2, 4, 8])

        // Scale factor 1: the decode's own pixels.
        let first = try await server.get("/iiif/3/\(Self.photo)/512,256,256,256/256,/0/default.png")
        // Built for this request, or already by the build `info.json` started.
        #expect(first.status == 200 && ["source", "table"].contains(first.header("X-Strata-Tier")))
        #expect(try Self.decoded(first).hasSamePixels(as: Self.expected((512, 256, 256, 256), PixelSize(width: 256, height: 256))))
        // Again: the encoded cache's; in another format, the tile is a table hit.
        let again = try await server.get("/iiif/3/\(Self.photo)/512,256,256,256/256,/0/default.png")
        #expect(again.status == 200 && again.header("X-Strata-Tier") == "encoded")
        let other = try await server.get("/iiif/3/\(Self.photo)/512,256,256,256/256,/0/default.jpg")
        #expect(other.status == 200 && other.header("X-Strata-Tier") == "table")
        // Scale factor 4, an edge tile (256 × 64 at its level).
        let deep = try await server.get("/iiif/3/\(Self.photo)/1024,1024,1024,256/256,/0/default.png")
        #expect(deep.status == 200 && deep.header("X-Strata-Tier") == "table")
        let deepImage = try Self.decoded(deep)
        #expect(deepImage.size == PixelSize(width: 256, height: 64))
        #expect(ColourFixtures.psnr(deepImage, Self.expected((1024, 1024, 1024, 256), deepImage.size)) >= 40)
        // The whole image at scale factor 8: one tile.
        let whole = try await server.get("/iiif/3/\(Self.photo)/full/256,/0/default.png")
        #expect(try Self.decoded(whole).size == PixelSize(width: 256, height: 160))
        try await server.stop()
    }

    /// A big image's `info.json` starts its pyramid's build (the viewer's tiles follow), and a
    /// purge of the image deletes its tiles.
    @Test func infoStartsTheBuild() async throws {
        let server = try await Self.start()
        #expect(try await server.get("/iiif/3/\(Self.photo)/info.json").status == 200)
        func pyramids() async throws -> [String: Any] {
            let stats = try JSONSerialization.jsonObject(with: Data(try await server.get("/stats").body)) as? [String: Any]
            return try #require(stats?["pyramids"] as? [String: Any])
        }
        var finished = false
        for _ in 0..<600 where !finished {
            finished = try await pyramids()["buildsFinished"] as? Int == 1
            if !finished { try await Task.sleep(for: .milliseconds(50)) }
        }
        let stats = try await pyramids()
        #expect(finished && stats["buildsStarted"] as? Int == 1 && stats["buildsFailed"] as? Int == 0)
        // 8 × 5 + 4 × 3 + 2 × 2 + 1 tiles of 256 px.
        #expect(stats["tiles"] as? Int == 57 && stats["tilesWritten"] as? Int == 57)
        let tile = try await server.get("/iiif/3/\(Self.photo)/1024,1024,1024,256/256,/0/default.jpg")
        #expect(tile.status == 200 && tile.header("X-Strata-Tier") == "table")
        // A purge takes the pyramid's tiles too.
        let purged = try await server.get("/iiif/3/\(Self.photo)", headers: [("Authorization", "Bearer \(Self.token)")], method: .DELETE)
        #expect(purged.status == 200 || purged.status == 204, "purge: \(purged.status)")
        #expect(try await pyramids()["tiles"] as? Int == 0)
        try await server.stop()
    }

    @Test func regionsAcrossTilesAndTurns() async throws {
        let server = try await Self.start()
        // A region over four level-1 tiles, at its level's scale.
        let across = try await server.get("/iiif/3/\(Self.photo)/300,200,700,500/350,/0/default.png")
        #expect(across.status == 200)
        let acrossImage = try Self.decoded(across)
        #expect(acrossImage.size == PixelSize(width: 350, height: 250))
        #expect(ColourFixtures.psnr(acrossImage, Self.expected((300, 200, 700, 500), acrossImage.size)) >= 40)
        // Between two levels: cut from the larger one and resampled (Lanczos-3).
        let between = try await server.get("/iiif/3/\(Self.photo)/0,0,2048,1280/700,/0/default.png")
        let betweenImage = try Self.decoded(between)
        #expect(betweenImage.size == PixelSize(width: 700, height: 438))
        #expect(ColourFixtures.psnr(betweenImage, Self.expected((0, 0, 2048, 1280), betweenImage.size)) >= 30)
        // full/max: every level-0 tile pasted.
        let max = try await server.get("/iiif/3/\(Self.photo)/full/max/0/default.png")
        #expect(try Self.decoded(max).hasSamePixels(as: Self.reference))
        // Mirrored and turned.
        let turned = try await server.get("/iiif/3/\(Self.photo)/0,0,512,256/max/!90/gray.png")
        #expect(turned.status == 200)
        #expect(try Self.decoded(turned).size == PixelSize(width: 256, height: 512))
        try await server.stop()
    }
    /// An original replaced by one of another size after its size was read: the tile request
    /// planned on the old size finds the new version, reads the header again and is served from
    /// the new image's pyramid. A broken original is one failed build, not retried.
    @Test func aChangedOriginalIsAskedAgainABrokenOneIsNot() async throws {
        let original = try ReplaceableOriginal(), root = original.root, second = original.replacement
        // A valid header over a body cut short.
        try second.prefix(second.count / 3).write(to: URL(fileURLWithPath: root + "/broken.jpg"))
        let server = try await TestServer.start(
            [
                "source.directory": root, "iiif.pyramidPath": makeScratchDirectory("pyramids"), "iiif.tiledAbove": "1000000",
                "iiif.tileSize": "256",
            ], disk: false)
        // A request refused after the original's size is read (an enlargement without `^`):
        // the size is memoized, and no build starts (`info.json` would start one, which could
        // build the old version before the file is replaced).
        let refused = try await server.get("/iiif/3/big.jpg/0,0,256,256/5000,/0/default.png")
        #expect(refused.status == 400)
        #expect(server.server.configured.pyramids?.statistics.buildsStarted == 0)
        // Replaced in place, with a later modification time: a new version of another size.
        try original.replace()
        let tile = try await server.get("/iiif/3/big.jpg/1792,1024,256,256/256,/0/default.png")
        #expect(tile.status == 200, "\(tile.status): \(String(decoding: tile.body, as: UTF8.self))")
        let reference = try ImageDecoder().decode([UInt8](second))
        let expected = Resampler(filter: .box).resample(
            reference, region: SourceRect(x: 1792, y: 1024, width: 256, height: 256), to: PixelSize(width: 256, height: 256))
        #expect(try Self.decoded(tile).hasSamePixels(as: expected))
        let before = server.server.configured.pyramids?.statistics
        let broken = try await server.get("/iiif/3/broken.jpg/0,0,256,256/256,/0/default.png")
        #expect(broken.status == 422, "\(broken.status): \(String(decoding: broken.body, as: UTF8.self))")
        let after = try #require(server.server.configured.pyramids?.statistics)
        #expect(after.buildsStarted == (before?.buildsStarted ?? 0) + 1 && after.buildsFailed == (before?.buildsFailed ?? 0) + 1)
        try await server.stop()
    }

    /// With `revalidateAfter`, a big original replaced in place is noticed by a check in the
    /// background: `info.json` gives the new size, and tiles come from the new version's pyramid.
    @Test func aReplacedOriginalIsNoticedAfterRevalidateAfter() async throws {
        let original = try ReplaceableOriginal(), root = original.root, second = original.replacement
        let server = try await TestServer.start(
            [
                "source.directory": root, "iiif.pyramidPath": makeScratchDirectory("pyramids"), "iiif.tiledAbove": "1000000",
                "iiif.tileSize": "256", "revalidateAfter": "100ms",
            ], disk: false)
        func width() async throws -> Int? {
            let info =
                try JSONSerialization.jsonObject(with: Data(try await server.get("/iiif/3/big.jpg/info.json").body)) as? [String: Any]
            return info?["width"] as? Int
        }
        #expect(try await width() == 2048)
        #expect(try await server.get("/iiif/3/big.jpg/0,0,256,256/256,/0/default.png").status == 200)
        try original.replace()
        try await Task.sleep(for: .milliseconds(150))
        var seen = try await width()
        for _ in 0..<250 where seen != 2560 {
            try await Task.sleep(for: .milliseconds(20))
            seen = try await width()
        }
        #expect(seen == 2560)
        let tile = try await server.get("/iiif/3/big.jpg/0,0,256,256/256,/0/default.png")
        let expected = Resampler(filter: .box).resample(
            try ImageDecoder().decode([UInt8](second)), region: SourceRect(x: 0, y: 0, width: 256, height: 256),
            to: PixelSize(width: 256, height: 256))
        #expect(tile.status == 200)
        #expect(try Self.decoded(tile).hasSamePixels(as: expected))
        try await server.stop()
    }
}
