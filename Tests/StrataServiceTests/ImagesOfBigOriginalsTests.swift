import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// `/images` requests of originals over `source.maxPixels`: served from their tile pyramid when
/// `iiif.pyramidPath` is set (fit, fill with a gravity, smart, raw), refused with 413 otherwise.
@Suite("/images of big originals", .timeLimit(.minutes(5)))
struct ImagesOfBigOriginalsTests {
    static let photo = "jpeg/fallenleaf-2048x1280-420.jpg"

    static let reference: PixelImage = {
        let bytes = try! Data(contentsOf: URL(fileURLWithPath: fixturesDirectory + "/" + photo))
        return try! ImageDecoder().decode([UInt8](bytes))
    }()

    /// A server whose `source.maxPixels` (1 MP) the photo (2.6 MP) is over.
    static func start(pyramids: Bool = true) async throws -> TestServer {
        var settings = ["source.maxPixels": "1000000", "iiif.tileSize": "256"]
        if pyramids { settings["iiif.pyramidPath"] = makeScratchDirectory("pyramids") }
        return try await TestServer.start(settings, disk: false)
    }

    @Test func fitAndFillComeFromThePyramid() async throws {
        let server = try await Self.start()
        // fit: the whole image within 512 × 512, from level 1 (1024 × 640) resampled.
        let fit = try await server.get("/images/\(Self.photo)?w=512&h=512&format=png")
        #expect(fit.status == 200, "\(fit.status): \(String(decoding: fit.body, as: UTF8.self))")
        #expect(fit.header("X-Strata-Tier") == "source")
        let fitImage = try ImageDecoder().decode(fit.body)
        #expect(fitImage.size == PixelSize(width: 512, height: 320))
        let expected = Resampler().resize(Self.reference, box: PixelSize(width: 512, height: 512), mode: .fit)
        #expect(ColourFixtures.psnr(fitImage, expected) >= 35)
        // Again: the encoded cache's, without asking the engine (the original is known big).
        let again = try await server.get("/images/\(Self.photo)?w=512&h=512&format=png")
        #expect(again.status == 200 && again.header("X-Strata-Tier") == "encoded" && again.body == fit.body)
        // Another size of the same level: its own encoding, the tiles table hits.
        let other = try await server.get("/images/\(Self.photo)?w=600&format=png")
        #expect(other.header("X-Strata-Tier") == "table")
        #expect(try ImageDecoder().decode(other.body).size == PixelSize(width: 600, height: 375))
        #expect(other.header("ETag") != fit.header("ETag"))
        // fill with a gravity: the east edge's crop.
        let east = try await server.get("/images/\(Self.photo)?w=200&h=200&mode=fill&gravity=east&format=png")
        #expect(east.status == 200)
        let eastImage = try ImageDecoder().decode(east.body)
        let eastExpected = Resampler().resample(
            Self.reference, region: SourceRect(x: 2048 - 1280, y: 0, width: 1280, height: 1280), to: PixelSize(width: 200, height: 200))
        #expect(eastImage.size == PixelSize(width: 200, height: 200) && ColourFixtures.psnr(eastImage, eastExpected) >= 35)
        // smart: placed by the coarsest tile's saliency; raw rows.
        let smart = try await server.get("/images/\(Self.photo)?w=300&h=100&mode=fill&gravity=smart&format=jpeg")
        #expect(smart.status == 200)
        let smartSize = try ImageDecoder().decode(smart.body).size
        #expect(smartSize == PixelSize(width: 300, height: 100))
        let raw = try await server.get("/images/\(Self.photo)?w=64&h=64&format=raw")
        #expect(raw.status == 200 && raw.body.count == Int(raw.header("X-Strata-Bytes-Per-Row") ?? "0")! * 40)
        // Negotiated: an opaque original is a JPEG for a client that takes anything.
        let negotiated = try await server.get("/images/\(Self.photo)?w=128", headers: [("Accept", "*/*")])
        #expect(negotiated.status == 200 && negotiated.header("Vary") == "Accept")
        try await server.stop()
    }

    @Test func withoutPyramidsABigOriginalIs413() async throws {
        let server = try await Self.start(pyramids: false)
        let answer = try await server.get("/images/\(Self.photo)?w=512&h=512")
        #expect(answer.status == 413)
        // The refusal names the keys that would serve it.
        #expect(answer.text.contains("source.maxPixels") && answer.text.contains("iiif.pyramidPath"), "\(answer.text)")
        #expect(try await server.get("/iiif/3/\(Self.photo.replacingOccurrences(of: "/", with: "%2F"))/info.json").status == 413)
        try await server.stop()
    }

    /// As a new user starts it: a source and a disk tier, no `iiif.pyramidPath`. Pyramids go
    /// beside the disk tier, so a big original is served, over IIIF and `/images`.
    @Test func withADiskTierPyramidsAreThereByDefault() async throws {
        let server = try await TestServer.start(["source.maxPixels": "1000000", "iiif.tiledAbove": "500000", "iiif.tileSize": "256"])
        let pyramids = try #require(server.server.iiifSettings.pyramidPath)
        #expect(server.server.iiifSettings.pyramidPathIsDefault)
        #expect(pyramids == server.scratch + "/disk-pyramids")
        let identifier = Self.photo.replacingOccurrences(of: "/", with: "%2F")
        let info = try await server.get("/iiif/3/\(identifier)/info.json")
        #expect(info.status == 200, "\(info.text)")
        let tile = try await server.get("/iiif/3/\(identifier)/full/256,/0/default.png")
        #expect(tile.status == 200, "\(tile.text)")
        #expect(tile.header("X-Strata-Tier") == "source" || tile.header("X-Strata-Tier") == "table")
        let image = try ImageDecoder().decode(tile.body)
        #expect(image.size == PixelSize(width: 256, height: 160))
        let expected = Resampler().resize(Self.reference, box: PixelSize(width: 256, height: 256), mode: .fit)
        #expect(ColourFixtures.psnr(image, expected) >= 35)
        #expect(try await server.get("/images/\(Self.photo)?w=400&h=400").status == 200)
        #expect(FileManager.default.fileExists(atPath: pyramids))
        try await server.stop()
    }

    /// An original over `source.maxFileSize` (what is read whole into memory) whose pixels call
    /// for a tile pyramid: the build copies it to disk and serves it. Over `iiif.maxSourceSize`,
    /// or read whole without pyramids, it is a 413 naming the keys to raise, never a 500.
    @Test func anOriginalOverTheFileSizeLimitIsServedFromItsPyramid() async throws {
        let identifier = Self.photo.replacingOccurrences(of: "/", with: "%2F")
        let tilePath = "/iiif/3/\(identifier)/full/256,/0/default.png"
        // The photo (257 KB) and the same pixels as an uncompressed TIFF whose directory
        // follows them (`tiffcp`: 7.9 MB), both over a 100 KiB source.maxFileSize.
        let originals = makeScratchDirectory("originals")
        try FileManager.default.createDirectory(atPath: originals + "/jpeg", withIntermediateDirectories: true)
        try Data(Fixtures.bytes(Self.photo)).write(to: URL(fileURLWithPath: originals + "/" + Self.photo))
        try Data(TIFFWriter.tiff(Self.reference, .rgb)).write(to: URL(fileURLWithPath: originals + "/plain.tif"))
        _ = try ExternalTools.run("tiffcp", ["-c", "none", originals + "/plain.tif", originals + "/scan.tif"])
        try Data(Fixtures.bytes("jpeg/orientation-2.jpg")).write(to: URL(fileURLWithPath: originals + "/small.jpg"))
        func start(_ extra: [String: String]) async throws -> TestServer {
            var settings = [
                "source.directory": originals, "source.maxPixels": "1000000", "source.maxFileSize": "100KiB", "iiif.tileSize": "256",
            ]
            settings.merge(extra) { $1 }
            return try await TestServer.start(settings, disk: false)
        }
        let served = try await start(["iiif.tiledAbove": "500000", "iiif.pyramidPath": makeScratchDirectory("pyramids")])
        let expected = Resampler().resize(Self.reference, box: PixelSize(width: 256, height: 256), mode: .fit)
        for name in [identifier, "scan.tif"] {
            #expect(try await served.get("/iiif/3/\(name)/info.json").status == 200, "\(name)")
            let tile = try await served.get("/iiif/3/\(name)/full/256,/0/default.png")
            #expect(tile.status == 200, "\(name): \(tile.text)")
            #expect(ColourFixtures.psnr(try ImageDecoder().decode(tile.body), expected) >= 35, "\(name)")
        }
        #expect(try await served.get("/images/\(Self.photo)?w=400&h=400").status == 200)
        #expect(try await served.get("/images/scan.tif?w=400&h=400").status == 200)
        try await served.stop()

        let capped = try await start([
            "iiif.tiledAbove": "500000", "iiif.pyramidPath": makeScratchDirectory("pyramids"), "iiif.maxSourceSize": "200KiB",
        ])
        let refused = try await capped.get(tilePath)
        #expect(
            refused.status == 413 && refused.text.contains("iiif.maxSourceSize") && refused.text.contains("257115 bytes"), "\(refused.text)"
        )
        try await capped.stop()

        let whole = try await start(["iiif.pyramidPath": "off", "source.maxPixels": "100000000"])
        let answer = try await whole.get("/images/\(Self.photo)?w=400&h=400")
        #expect(answer.status == 413 && answer.text.contains("source.maxFileSize"), "\(answer.status) \(answer.text)")
        // The engine keeps serving.
        #expect(try await whole.get("/images/small.jpg?w=100").status == 200)
        try await whole.stop()
    }

    /// An original replaced by another after its size was memoized (by IIIF's `info.json`,
    /// which starts no build under `iiif.tiledAbove`): the `/images` build finds the new
    /// version, the size is read again and the answer is the new image's.
    @Test func aChangedOriginalIsReadAgain() async throws {
        let original = try ReplaceableOriginal(), root = original.root, second = original.replacement
        let server = try await TestServer.start(
            [
                "source.directory": root, "source.maxPixels": "1000000", "iiif.tileSize": "256",
                "iiif.pyramidPath": makeScratchDirectory("pyramids"),
            ], disk: false)
        #expect(try await server.get("/iiif/3/big.jpg/info.json").status == 200)
        try original.replace()
        let answer = try await server.get("/images/big.jpg?w=512&format=png")
        #expect(answer.status == 200, "\(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
        let image = try ImageDecoder().decode(answer.body)
        let expected = Resampler().resize(
            try ImageDecoder().decode([UInt8](second)), box: PixelSize(width: 512, height: 4096), mode: .fit)
        #expect(image.size == expected.size && ColourFixtures.psnr(image, expected) >= 35)
        try await server.stop()
    }
}
