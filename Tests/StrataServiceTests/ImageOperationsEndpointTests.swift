import Foundation
import Strata
import Testing

@testable import StrataService

/// The operations as `/images` parameters: checked like the others (a 400 naming the
/// parameter), part of the variant's identity (key, ETag, encoded cache), served warm on a
/// repeat, and purged with their original.
@Suite("Image operations endpoint", .timeLimit(.minutes(5)))
struct ImageOperationsEndpointTests {
    static let key = "jpeg/kite-800x500-gray.jpg"

    static func parse(_ query: String) throws(ServiceError) -> ImageParameters {
        try ImageParameters(path: Substring(key), query: Substring(query), maxDimension: 4096)
    }

    @Test func parametersAreCheckedAndNamed() throws {
        let parsed = try Self.parse(
            "w=300&h=200&mode=pad&extend=mirror&bg=ff000080&trim=12&crop=0.1,0.1,0.8,0.8&flip=v&rot=270&blur=1.234&sharpen=0.5")
        #expect(parsed.mode == .fill && parsed.box == PixelSize(width: 300, height: 200))
        #expect(parsed.operations.canonical == "trim:12;crop:0.1,0.1,0.8,0.8;flip:v;rot:270;pad:mirror;bg:ff000080;blur:1.23;sharpen:0.5")
        #expect(try Self.parse("w=300&h=200&mode=pad").operations.pad == .background)
        #expect(try Self.parse("w=300&trim").operations.trim == 10)
        #expect(try Self.parse("w=300&rot=0").operations.isEmpty)
        let refusals: [(String, String)] = [
            ("w=300&blur=0", "blur=0"), ("w=300&blur=60", "blur=60"), ("w=300&sharpen=x", "sharpen=x"), ("w=300&trim=256", "trim=256"),
            ("w=300&crop=1,2,3", "crop=1,2,3"), ("w=300&rot=45", "rot=45"), ("w=300&flip=x", "flip=x"), ("w=300&bg=red", "bg=red"),
            ("w=300&extend=copy", "needs mode=pad"), ("w=300&h=300&mode=pad&extend=wrap", "extend=wrap"),
            ("w=300&mode=pad", "mode=pad needs both"),
            ("w=300&h=300&mode=fill&gravity=smart&rot=90", "gravity=smart"), ("w=300&h=300&mode=pad&gravity=smart", "gravity=smart"),
            ("w=300&blur=2&blur=3", "given twice"),
        ]
        for (query, named) in refusals {
            #expect(throws: ServiceError.self, "\(query)") { try Self.parse(query) }
            do {
                _ = try Self.parse(query)
            } catch {
                #expect(error.status == .badRequest && error.message.contains(named), "\(query): \(error.message)")
            }
        }
        // Names that share a first letter with an operation's still parse as before.
        #expect(try Self.parse("w=300&tolerance=0.1&format=png&exact=1").exact)
    }

    @Test func operationsAreTheVariantsIdentityAndRepeatWarm() async throws {
        let server = try await TestServer.start()
        let plain = try await server.get("/images/\(Self.key)?w=200&h=200&mode=fill&format=png")
        let blurred = try await server.get("/images/\(Self.key)?w=200&h=200&mode=fill&format=png&blur=3")
        #expect(plain.status == 200 && blurred.status == 200)
        #expect(blurred.header("X-Strata-Tier") == "source", "a blur was served from the plain variant")
        #expect(plain.header("ETag") != blurred.header("ETag"))
        let again = try await server.get("/images/\(Self.key)?w=200&h=200&mode=fill&format=png&blur=3")
        #expect(again.header("X-Strata-Tier") == "encoded" && again.header("ETag") == blurred.header("ETag"))
        // A near size matches the blurred variant only (tolerance), never the plain one.
        let near = try await server.get("/images/\(Self.key)?w=190&h=190&mode=fill&format=raw&blur=3")
        #expect(near.header("X-Strata-Tier") == "memory" && near.header("ETag") != plain.header("ETag"))

        let padded = try await server.get("/images/\(Self.key)?w=300&h=300&mode=pad&bg=ff0000&format=raw")
        #expect(padded.status == 200 && padded.header("X-Strata-Style") != nil)
        let stride = Int(padded.header("X-Strata-Bytes-Per-Row") ?? "") ?? 0
        #expect(stride >= 1200 && padded.body.count == stride * 300, "a pad answers the whole box")
        #expect(Array(padded.body[0..<4]) == [0, 0, 255, 255], "the padding is bg")
        // 800×500 turned is 500×800: 250 wide, 400 high.
        let turned = try await server.get("/images/\(Self.key)?w=250&rot=90&format=raw")
        let turnedStride = Int(turned.header("X-Strata-Bytes-Per-Row") ?? "") ?? 0
        #expect(turnedStride >= 1000 && turnedStride < 1100 && turned.body.count == turnedStride * 400)
        try await server.stop()
    }

    @Test func bgFlattensTransparencyInJPEGAnswersOnly() async throws {
        let server = try await TestServer.start()
        let key = "webp/cups-640x400-alpha.webp"
        let jpeg = try await server.get("/images/\(key)?w=320&format=jpeg&bg=ffffff")
        let black = try await server.get("/images/\(key)?w=320&format=jpeg")
        let png = try await server.get("/images/\(key)?w=320&format=png&bg=ffffff")
        #expect(jpeg.status == 200 && black.status == 200 && png.status == 200)
        let onWhite = try ImageDecoder().decode(jpeg.body), onBlack = try ImageDecoder().decode(black.body)
        let kept = try ImageDecoder().decode(png.body)
        // Where the original is transparent: white with bg, black without, transparent in a PNG.
        var transparent: (Int, Int)?
        for y in stride(from: 0, to: kept.height, by: 7) {
            for x in stride(from: 0, to: kept.width, by: 7) where kept.pixelBytes(x: x, y: y)[3] == 0 {
                transparent = (x, y)
                break
            }
            if transparent != nil { break }
        }
        let (x, y) = try #require(transparent, "the fixture has transparent pixels")
        #expect(onWhite.pixelBytes(x: x, y: y).prefix(3).allSatisfy { $0 > 240 }, "\(onWhite.pixelBytes(x: x, y: y))")
        #expect(onBlack.pixelBytes(x: x, y: y).prefix(3).allSatisfy { $0 < 15 }, "\(onBlack.pixelBytes(x: x, y: y))")
        try await server.stop()
    }

    @Test func aPurgeTakesTheOperationsVariantsFromEveryTier() async throws {
        let token = "purge-token-0123456789abcdef"
        let server = try await TestServer.start(["http.adminToken": token])
        let targets = ["blur=2", "crop=10,10,400,300", "w=300&h=300&mode=pad&extend=copy"].map {
            "/images/\(Self.key)?\($0.hasPrefix("w=") ? $0 : "w=200&\($0)")&format=jpeg"
        }
        for target in targets {
            #expect(try await server.get(target).header("X-Strata-Tier") == "source", "\(target)")
        }
        let disk = try #require(server.cache.disk)
        disk.flush()
        let blurred = CacheKey(Self.key, colour: .srgb, gravity: .center, operations: ImageOperations(blur: 2))
        let query = SizeQuery(box: PixelSize(width: 200, height: 200))
        #expect(disk.contains(key: blurred.string, matching: query))
        #expect(server.cache.memory?.records(forKey: blurred).isEmpty == false)
        let purged = try await server.get("/images/\(Self.key)", headers: [("Authorization", "Bearer \(token)")], method: .DELETE)
        #expect(purged.status == 200)
        #expect(!disk.contains(key: blurred.string, matching: query))
        #expect(server.cache.memory?.records(forKey: blurred).isEmpty == true)
        #expect(server.encodedEntries == 0)
        for target in targets {
            #expect(try await server.get(target).header("X-Strata-Tier") == "source", "\(target) after the purge")
        }
        try await server.stop()
    }

    @Test func aCropOutsideTheOriginalIsABadRequest() async throws {
        let server = try await TestServer.start()
        let answer = try await server.get("/images/\(Self.key)?w=200&crop=900,0,10,10")
        #expect(answer.status == 400 && answer.errorCode == "bad_parameter" && answer.text.contains("crop=900,0,10,10"), "\(answer.text)")
        #expect(try await server.get("/images/\(Self.key)?w=200&crop=0,0,10,10&format=png").status == 200, "the engine serves on")
        try await server.stop()
    }
}
