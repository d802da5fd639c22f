import Foundation
import Strata
import Testing

@testable import StrataService

/// The IIIF routes on a real server: info.json (3.0 and 2.1), tiles, CORS, errors, tiles of
/// one zoom level served from one decoded variant, validators and 304.
@Suite("IIIF server", .timeLimit(.minutes(5)))
struct IIIFServerTests {
    static let photo = "jpeg%2Ffallenleaf-2048x1280-420.jpg"

    static func json(_ answer: Answer) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
    }

    @Test func info3() async throws {
        let server = try await TestServer.start()
        let answer = try await server.get("/iiif/3/\(Self.photo)/info.json")
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "application/json")
        #expect(answer.header("Access-Control-Allow-Origin") == "*")
        #expect(answer.header("Link")?.contains("http://iiif.io/api/image/3/level2.json") == true)
        let info = try Self.json(answer)
        #expect(info["@context"] as? String == "http://iiif.io/api/image/3/context.json")
        #expect(info["id"] as? String == "http://127.0.0.1:\(server.port)/iiif/3/\(Self.photo)")
        #expect(info["type"] as? String == "ImageService3")
        #expect(info["protocol"] as? String == "http://iiif.io/api/image")
        #expect(info["profile"] as? String == "level2")
        #expect(info["width"] as? Int == 2048)
        #expect(info["height"] as? Int == 1280)
        #expect(info["maxWidth"] as? Int == 4096)
        #expect(info["maxArea"] as? Int == 16_777_216)
        let tiles = try #require(info["tiles"] as? [[String: Any]])
        #expect(tiles.first?["width"] as? Int == 512)
        #expect(tiles.first?["scaleFactors"] as? [Int] == [1, 2, 4])
        #expect((info["sizes"] as? [[String: Any]])?.isEmpty == false)
        #expect(info["extraFormats"] as? [String] == ["png", "webp", "avif"])
        #expect((info["extraQualities"] as? [String])?.contains("gray") == true)
        #expect((info["extraFeatures"] as? [String])?.contains("mirroring") == true)

        let ld = try await server.get("/iiif/3/\(Self.photo)/info.json", headers: [("Accept", "application/ld+json")])
        #expect(ld.header("Content-Type") == "application/ld+json;profile=\"http://iiif.io/api/image/3/context.json\"")
        // The base URI redirects (303, followed by the client) to info.json.
        let base = try await server.get("/iiif/3/\(Self.photo)")
        #expect(base.status == 200)
        #expect(try Self.json(base)["type"] as? String == "ImageService3")
        try await server.stop()
    }

    @Test func info2() async throws {
        let server = try await TestServer.start()
        let answer = try await server.get("/iiif/2/\(Self.photo)/info.json")
        #expect(answer.status == 200)
        #expect(answer.header("Access-Control-Allow-Origin") == "*")
        let info = try Self.json(answer)
        #expect(info["@context"] as? String == "http://iiif.io/api/image/2/context.json")
        #expect(info["@id"] as? String == "http://127.0.0.1:\(server.port)/iiif/2/\(Self.photo)")
        #expect(info["protocol"] as? String == "http://iiif.io/api/image")
        #expect(info["width"] as? Int == 2048)
        #expect(info["height"] as? Int == 1280)
        let profile = try #require(info["profile"] as? [Any])
        #expect(profile.first as? String == "http://iiif.io/api/image/2/level2.json")
        let details = try #require(profile.last as? [String: Any])
        #expect((details["formats"] as? [String])?.contains("png") == true)
        #expect((details["qualities"] as? [String])?.contains("gray") == true)
        #expect((details["supports"] as? [String])?.contains("mirroring") == true)
        #expect((info["tiles"] as? [[String: Any]])?.first?["scaleFactors"] as? [Int] == [1, 2, 4])
        let ld = try await server.get("/iiif/2/\(Self.photo)/info.json", headers: [("Accept", "application/ld+json")])
        #expect(ld.header("Content-Type") == "application/ld+json;profile=\"http://iiif.io/api/image/2/context.json\"")
        try await server.stop()
    }

    @Test func tilesOfOneLevelShareOneDecode() async throws {
        let server = try await TestServer.start(disk: false)
        let first = try await server.get("/iiif/3/\(Self.photo)/0,0,1024,1024/512,/0/default.jpg")
        #expect(first.status == 200)
        #expect(first.header("Content-Type") == "image/jpeg")
        #expect(first.header("Access-Control-Allow-Origin") == "*")
        #expect(first.header("X-Strata-Width") == "512")
        #expect(first.header("X-Strata-Height") == "512")
        #expect(first.header("X-Strata-Tier") == "source")
        #expect(
            first.header("Link")?.contains(
                "<http://127.0.0.1:\(server.port)/iiif/3/\(Self.photo)/0,0,1024,1024/512,512/0/default.jpg>;rel=\"canonical\"")
                == true)
        #expect(Array(first.body.prefix(3)) == [0xFF, 0xD8, 0xFF])
        let decodes = server.cache.statistics.engine.sourceDecodes
        #expect(decodes == 1)

        // The next tile of the level (crossing the bottom edge: 1024×256 → 512×128) comes from
        // the same decoded variant.
        let second = try await server.get("/iiif/3/\(Self.photo)/1024,1024,1024,1024/512,/0/default.png")
        #expect(second.status == 200)
        #expect(second.header("Content-Type") == "image/png")
        #expect(second.header("X-Strata-Tier") == "memory")
        #expect(second.header("X-Strata-Width") == "512")
        #expect(second.header("X-Strata-Height") == "128")
        #expect(server.cache.statistics.engine.sourceDecodes == decodes)

        // Asked again, the tile is the encoded cache's: the same bytes, no resample, no encode.
        let again = try await server.get("/iiif/3/\(Self.photo)/1024,1024,1024,1024/512,/0/default.png")
        #expect(again.header("X-Strata-Tier") == "encoded")
        #expect(again.body == second.body)
        #expect(again.header("X-Strata-Height") == "128")

        // Rotated, mirrored, gray, in 2.1 syntax.
        let turned = try await server.get("/iiif/2/\(Self.photo)/0,0,1024,512/!256,256/!90/gray.webp")
        #expect(turned.status == 200)
        #expect(turned.header("Content-Type") == "image/webp")
        #expect(turned.header("X-Strata-Width") == "128")
        #expect(turned.header("X-Strata-Height") == "256")
        try await server.stop()
    }

    /// Every tile has a strong `ETag`; a repeat with `If-None-Match` gets 304 with the same
    /// validator and CORS and no body; another tile, another format or another API version of
    /// the same region has another validator.
    @Test func tilesAnswerIfNoneMatchWith304() async throws {
        let server = try await TestServer.start(disk: false)
        let path = "/iiif/3/\(Self.photo)/0,0,1024,1024/256,/0/default.jpg"
        let first = try await server.get(path)
        let etag = try #require(first.header("ETag"))
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\"") && etag.count > 2)
        #expect(!etag.contains(",") && etag.allSatisfy { $0.isASCII && $0 != " " }, "\(etag)")
        let encodes = server.encodedEntries

        let revalidated = try await server.get(path, headers: [("If-None-Match", etag)])
        #expect(revalidated.status == 304)
        #expect(revalidated.body.isEmpty)
        #expect(revalidated.header("ETag") == etag)
        #expect(revalidated.header("Access-Control-Allow-Origin") == "*")
        #expect(server.encodedEntries == encodes, "a 304 encodes nothing")
        #expect(try await server.get(path, headers: [("If-None-Match", "W/\(etag), \"other\"")]).status == 304)
        #expect(try await server.get(path, headers: [("If-None-Match", "\"other\"")]).status == 200)

        let others = [
            "/iiif/3/\(Self.photo)/1024,0,1024,1024/256,/0/default.jpg",
            "/iiif/3/\(Self.photo)/0,0,1024,1024/256,/0/default.png",
            "/iiif/3/\(Self.photo)/0,0,1024,1024/256,/90/default.jpg",
            "/iiif/2/\(Self.photo)/0,0,1024,1024/256,/0/default.jpg",
        ]
        var seen: Set<String> = [etag]
        for other in others {
            let answer = try await server.get(other, headers: [("If-None-Match", etag)])
            #expect(answer.status == 200, "\(other)")
            let tag = try #require(answer.header("ETag"))
            #expect(!seen.contains(tag), "\(other): \(tag)")
            seen.insert(tag)
        }
        try await server.stop()
    }

    @Test func errors() async throws {
        let server = try await TestServer.start()
        let missing = try await server.get("/iiif/3/no-such-image.jpg/info.json")
        #expect(missing.status == 404)
        #expect(missing.header("Access-Control-Allow-Origin") == "*")
        let missingTile = try await server.get("/iiif/3/no-such-image.jpg/full/max/0/default.jpg")
        #expect(missingTile.status == 404)
        for (target, code) in [
            ("/iiif/3/\(Self.photo)/nope/max/0/default.jpg", "bad_region"),
            ("/iiif/3/\(Self.photo)/full/nope/0/default.jpg", "bad_size"),
            ("/iiif/3/\(Self.photo)/full/max/nope/default.jpg", "bad_rotation"),
            ("/iiif/3/\(Self.photo)/full/max/0/nope.jpg", "bad_quality"),
            ("/iiif/3/\(Self.photo)/full/max/0/default.nope", "bad_format"),
            ("/iiif/3/\(Self.photo)/4000,0,10,10/max/0/default.jpg", "bad_region"),
            ("/iiif/3/\(Self.photo)/full/4096,/0/default.jpg", "bad_size"),
            ("/iiif/3/..%2Fsecret/info.json", "bad_identifier"),
        ] {
            let answer = try await server.get(target)
            #expect(answer.status == 400, "\(target)")
            #expect(answer.errorCode == code, "\(target)")
            #expect(answer.header("Access-Control-Allow-Origin") == "*")
        }
        let angle = try await server.get("/iiif/3/\(Self.photo)/full/max/45/default.jpg")
        #expect(angle.status == 501)
        try await server.stop()
    }

    @Test func aTileFromTheCachedVariantMatchesOneFromAFullDecode() async throws {
        // A smooth synthetic original, as PNG.
        let directory = makeScratchDirectory("iiif-source")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let size = PixelSize(width: 1200, height: 900)
        var original = PixelImage(width: size.width, height: size.height, style: .bgrx32)
        let stride = original.bytesPerRow
        original.withUnsafeMutableBytes { raw in
            for y in 0..<size.height {
                for x in 0..<size.width {
                    let p = y * stride + x * 4
                    let fx = Double(x) / 40, fy = Double(y) / 55
                    raw[p] = UInt8(127.5 + 120 * sin(fx))
                    raw[p + 1] = UInt8(127.5 + 120 * cos(fy))
                    raw[p + 2] = UInt8(127.5 + 120 * sin(fx * 0.7 + fy))
                    raw[p + 3] = 255
                }
            }
        }
        let png = try ImageEncoder.encode(original, as: .png)
        #expect(FileManager.default.createFile(atPath: directory + "/smooth.png", contents: Data(png)))

        let server = try await TestServer.start(["source.directory": directory], disk: false)
        // The level (scale factor 2) is decoded by its first tile; the second comes from memory.
        let warm = try await server.get("/iiif/3/smooth.png/0,0,512,512/256,/0/default.png")
        #expect(warm.header("X-Strata-Tier") == "source")
        let tile = try await server.get("/iiif/3/smooth.png/512,512,512,388/256,/0/default.png")
        #expect(tile.status == 200)
        #expect(tile.header("X-Strata-Tier") == "memory")
        try await server.stop()

        let served = try ImageDecoder().decode(tile.body)
        #expect(served.size == PixelSize(width: 256, height: 194))
        let decoded = try ImageDecoder().decode(png)
        let reference = Resampler().resample(
            decoded, region: SourceRect(x: 512, y: 512, width: 512, height: 388), to: PixelSize(width: 256, height: 194))
        let psnr = Self.psnr(served, reference)
        #expect(psnr >= 40, "PSNR \(psnr) dB")
    }

    @Test("a tile is never enlarged from a cached variant smaller than its scale, unless iiif.upscaleTolerance allows it")
    func noTileFromASmallerVariant() async throws {
        let photo = "jpeg%2Fpath-2560x1600.jpg"
        // Scale 1/4: the level's variant is 640×400; a 512×320 one is within the engine's
        // tolerance (0.2) of it, below.
        let tile = "/iiif/3/\(photo)/0,0,1024,1024/256,/0/default.png"
        let file = URL(fileURLWithPath: fixturesDirectory + "/jpeg/path-2560x1600.jpg")
        let original = try ImageDecoder().decode(Array(Data(contentsOf: file)))
        let reference = Resampler().resample(
            original, region: SourceRect(x: 0, y: 0, width: 1024, height: 1024), to: PixelSize(width: 256, height: 256))
        var psnr: [String: Double] = [:]
        for upscaleTolerance in ["0", "0.2"] {
            let server = try await TestServer.start(["iiif.upscaleTolerance": upscaleTolerance], disk: false)
            let small = try await server.get("/images/jpeg/path-2560x1600.jpg?w=512&h=320&format=png")
            #expect(small.header("X-Strata-Width") == "512" && small.header("X-Strata-Height") == "320", "\(small.status)")
            let answer = try await server.get(tile)
            #expect(answer.status == 200)
            #expect(answer.header("X-Strata-Tier") == (upscaleTolerance == "0" ? "source" : "memory"), "\(upscaleTolerance)")
            try await server.stop()
            psnr[upscaleTolerance] = Self.psnr(try ImageDecoder().decode(answer.body), reference)
        }
        // Measured: about 48 dB from the level's own variant, 33 from the smaller one.
        #expect(psnr["0"]! >= 40, "\(psnr)")
        #expect(psnr["0.2"]! < psnr["0"]! - 5, "\(psnr)")
    }

    /// PSNR (dB) of the colour channels of two images of one size.
    static func psnr(_ a: PixelImage, _ b: PixelImage) -> Double {
        #expect(a.size == b.size)
        var squared = 0.0
        var count = 0
        for y in 0..<min(a.height, b.height) {
            for x in 0..<min(a.width, b.width) {
                let p = a.pixelBytes(x: x, y: y), q = b.pixelBytes(x: x, y: y)
                for c in 0..<3 {
                    let d = Double(p[c]) - Double(q[c])
                    squared += d * d
                    count += 1
                }
            }
        }
        let mse = squared / Double(max(count, 1))
        return mse == 0 ? Double.infinity : 10 * log10(255 * 255 / mse)
    }
}
