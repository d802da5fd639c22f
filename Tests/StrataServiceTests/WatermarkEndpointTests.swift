import Foundation
import Strata
import StrataConfiguration
import StrataTestSupport
import Testing

@testable import StrataService

/// `http.watermarks` and `watermark=`: named images from a file or the source, laid on the
/// answer where the parameters say, part of the answer's identity (their version too), checked
/// like every parameter, and replaced on reload.
@Suite("Watermark endpoint", .timeLimit(.minutes(5)))
struct WatermarkEndpointTests {
    static let key = "jpeg/kite-800x500-gray.jpg"

    /// A 64×32 watermark: opaque red on the left half, transparent on the right.
    static func logo(at path: String, colour: [UInt8] = [0, 0, 255, 255]) throws {
        var image = PixelImage(width: 64, height: 32)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            for y in 0..<32 { for x in 0..<32 { for c in 0..<4 { raw[y * stride + 4 * x + c] = colour[c] } } }
        }
        try Data(try ImageEncoder.encode(image, as: .png)).write(to: URL(fileURLWithPath: path))
    }

    @Test func aFileWatermarkIsLaidWhereTheParametersSay() async throws {
        let directory = TempDirectory()
        try Self.logo(at: directory.path + "/logo.png")
        let server = try await TestServer.start(["http.watermarks": "logo: file:\(directory.path)/logo.png"])
        let plain = try await server.get("/images/\(Self.key)?w=400&format=png")
        let marked = try await server.get("/images/\(Self.key)?w=400&format=png&watermark=logo&wmmargin=10")
        #expect(marked.status == 200 && marked.header("ETag") != plain.header("ETag"))
        let image = try ImageDecoder().decode(marked.body), base = try ImageDecoder().decode(plain.body)
        #expect(image.size == PixelSize(width: 400, height: 250))
        // South-east by default, 10 px in: its opaque half is red, its transparent half the photo.
        #expect(image.pixelBytes(x: 400 - 10 - 64 + 5, y: 250 - 10 - 16) == [0, 0, 255, 255])
        #expect(image.pixelBytes(x: 400 - 10 - 5, y: 250 - 10 - 16) == base.pixelBytes(x: 400 - 10 - 5, y: 250 - 10 - 16))
        #expect(image.pixelBytes(x: 5, y: 5) == base.pixelBytes(x: 5, y: 5))
        let again = try await server.get("/images/\(Self.key)?w=400&format=png&watermark=logo&wmmargin=10")
        #expect(again.header("X-Strata-Tier") == "encoded" && again.header("ETag") == marked.header("ETag"))

        // Half opacity, north-west, half the answer's width (200 × 100 px).
        let faint = try ImageDecoder().decode(
            try await server.get("/images/\(Self.key)?w=400&format=png&watermark=logo&wmpos=northwest&wmopacity=0.5&wmscale=0.5").body)
        let pixel = faint.pixelBytes(x: 50, y: 50), under = base.pixelBytes(x: 50, y: 50)
        #expect(pixel[2] > under[2] && pixel[2] < 255 && pixel[0] < under[0] + 1, "\(pixel) over \(under)")
        #expect(faint.pixelBytes(x: 150, y: 50) == base.pixelBytes(x: 150, y: 50), "the right half of the logo is transparent")
        // Tiled: every tile's red half.
        let tiled = try ImageDecoder().decode(
            try await server.get("/images/\(Self.key)?w=400&format=png&watermark=logo&wmpos=tile&wmmargin=4").body)
        #expect(
            tiled.pixelBytes(x: 4 + 5, y: 4 + 5) == [0, 0, 255, 255] && tiled.pixelBytes(x: 4 + 68 + 5, y: 4 + 36 + 5) == [0, 0, 255, 255])

        for (query, named) in [
            ("watermark=nope", "no such watermark"), ("watermark=logo&wmpos=smart", "wmpos=smart"),
            ("watermark=logo&wmopacity=0", "wmopacity=0"),
            ("watermark=logo&wmscale=2", "wmscale=2"), ("wmpos=north", "needs watermark=NAME"),
            ("watermark=logo&wmmargin=-1", "wmmargin=-1"),
        ] {
            let refused = try await server.get("/images/\(Self.key)?w=400&\(query)")
            #expect(refused.status == 400 && refused.text.contains(named), "\(query): \(refused.text)")
        }
        try await server.stop()
    }

    @Test func aSourceWatermarkIsReadThroughTheEngineAndAChangedFileIsANewIdentity() async throws {
        let directory = TempDirectory()
        try Self.logo(at: directory.path + "/logo.png")
        let server = try await TestServer.start([
            "http.watermarks": "logo: file:\(directory.path)/logo.png, cups: source:webp/cups-640x400-alpha.webp"
        ])
        let cups = try await server.get("/images/\(Self.key)?w=400&format=jpeg&watermark=cups&wmscale=0.25&wmpos=center")
        #expect(cups.status == 200, "\(cups.text)")
        #expect(
            try await server.get("/images/\(Self.key)?w=400&format=jpeg&watermark=cups&wmscale=0.25&wmpos=center").header("X-Strata-Tier")
                == "encoded")
        let before = try await server.get("/images/\(Self.key)?w=400&format=png&watermark=logo")

        // The file changes and the configuration is applied again: a new version, a new ETag.
        try Self.logo(at: directory.path + "/logo.png", colour: [255, 0, 0, 255])
        let layers = try await ConfigurationLayers(
            environment: [:],
            overrides: [
                "source.directory": .scalar(fixturesDirectory),
                "http.watermarks": .scalar("logo: file:\(directory.path)/logo.png, cups: source:webp/cups-640x400-alpha.webp"),
            ])
        server.server.apply(try StrataConfiguration(from: layers))
        let after = try await server.get("/images/\(Self.key)?w=400&format=png&watermark=logo")
        #expect(after.status == 200 && after.header("ETag") != before.header("ETag"))
        let image = try ImageDecoder().decode(after.body)
        #expect(image.pixelBytes(x: 400 - 64 + 5, y: 250 - 16) == [255, 0, 0, 255], "the new logo is blue")
        try await server.stop()
    }

    @Test func aWatermarkThatCannotBeReadRefusesTheConfigurationNamingIt() async throws {
        let layers = try await ConfigurationLayers(
            environment: [:], overrides: ["http.watermarks": .scalar("logo: file:/nonexistent/logo.png")])
        #expect {
            try Watermarks(try StrataConfiguration(from: layers))
        } throws: { error in
            "\(error)".contains("http.watermarks") && "\(error)".contains("/nonexistent/logo.png")
        }
    }
}
