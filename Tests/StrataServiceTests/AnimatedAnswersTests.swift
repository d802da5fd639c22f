import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// Animated GIF and WebP originals answered animated (WebP): frame count, durations and loop
/// count kept, every frame within 35 dB of Pillow's resize of it, a repeat answered warm; a
/// still (`frames=1`, another format) never confused with the animation; the limits refuse a
/// bomb from its scan.
@Suite("Animated answers", .timeLimit(.minutes(5)))
struct AnimatedAnswersTests {
    static let gif = "gif/leaves-160x100-anim.gif"

    /// Pillow's frame `index` of the GIF resized to 80×50 (Scripts/make-animation-fixtures.sh),
    /// premultiplied BGRA as Strata holds it.
    static func reference(_ index: Int) throws -> PixelImage {
        let rgba = Fixtures.bytes("reference/leaves-anim-80x50-f\(index).rgba")
        try #require(rgba.count == 80 * 50 * 4)
        var image = PixelImage(width: 80, height: 50)
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            for y in 0..<50 {
                for x in 0..<80 {
                    let i = (y * 80 + x) * 4, o = y * stride + x * 4
                    let a = Int(rgba[i + 3])
                    raw[o] = UInt8((Int(rgba[i + 2]) * a + 127) / 255)
                    raw[o + 1] = UInt8((Int(rgba[i + 1]) * a + 127) / 255)
                    raw[o + 2] = UInt8((Int(rgba[i]) * a + 127) / 255)
                    raw[o + 3] = UInt8(a)
                }
            }
        }
        return image
    }

    static func animation(_ body: [UInt8]) throws -> AnimatedImage { try body.withUnsafeBytes { try AnimatedImage.decode($0) } }

    @Test func anAnimatedGIFIsAnsweredAsAnAnimatedWebP() async throws {
        let server = try await TestServer.start()
        // quality=100: lossless WebP, so that the frames compared with Pillow's are the resize's
        // (a dithered GIF through lossy WebP at the default 80 loses a few dB more: checked below).
        let answer = try await server.get("/images/\(Self.gif)?w=80&format=webp&quality=100")
        #expect(answer.status == 200 && answer.header("Content-Type") == "image/webp", "\(answer.text)")
        let animation = try Self.animation(answer.body)
        #expect(animation.canvas == PixelSize(width: 80, height: 50) && animation.loopCount == 3)
        #expect(animation.frames.map(\.duration) == [70, 130, 1100, 30])
        for (index, frame) in animation.frames.enumerated() {
            let db = ColourFixtures.psnr(frame.image, try Self.reference(index))
            #expect(db >= 35, "frame \(index): \(db) dB against Pillow")
        }
        // The hole the second frame's disposal leaves is transparent: the answer has alpha.
        #expect(animation.frames[2].image.pixelBytes(x: 52, y: 32)[3] == 0)
        let lossy = try Self.animation(try await server.get("/images/\(Self.gif)?w=80&format=webp").body)
        #expect(lossy.frames.count == 4 && lossy.frames.map(\.duration) == [70, 130, 1100, 30])
        for (index, frame) in lossy.frames.enumerated() {
            #expect(ColourFixtures.psnr(frame.image, try Self.reference(index)) >= 28, "lossy frame \(index)")
        }
        let again = try await server.get("/images/\(Self.gif)?w=80&format=webp&quality=100")
        #expect(again.header("X-Strata-Tier") == "encoded" && again.header("ETag") == answer.header("ETag"))

        // A still: frames=1, or a format that is not WebP; never the animation's encoding.
        let still = try await server.get("/images/\(Self.gif)?w=80&format=webp&frames=1")
        #expect(still.status == 200 && still.header("ETag") != answer.header("ETag"))
        #expect(try still.body.withUnsafeBytes { try AnimatedImage.info($0) }.frameCount == 1)
        #expect(try await server.get("/images/\(Self.gif)?w=80&format=png").header("Content-Type") == "image/png")
        #expect(try await server.get("/images/\(Self.gif)?w=80&format=webp").header("X-Strata-Tier") == "encoded")
        // Negotiated: WebP whenever the client takes it, even with AVIF first in http.formats.
        let negotiated = try await server.get("/images/\(Self.gif)?w=80", headers: [("Accept", "image/avif,image/webp,*/*")])
        #expect(negotiated.header("Content-Type") == "image/webp" && negotiated.header("Vary") == "Accept")
        #expect(try Self.animation(negotiated.body).frames.count == 4)
        let old = try await server.get("/images/\(Self.gif)?w=80", headers: [("Accept", "image/png,*/*")])
        #expect(old.header("Content-Type") != "image/webp")
        try await server.stop()
    }

    @Test func anAnimatedWebPWithAlphaKeepsItsFramesTimingsAndLoops() async throws {
        let server = try await TestServer.start()
        let key = "webp/leaves-160x100-anim-alpha.webp"
        let original = try Self.animation(Fixtures.bytes(key))
        #expect(original.frames.count == 4 && original.loopCount == 3)
        let answer = try await server.get("/images/\(key)?w=80&format=webp&quality=100")
        #expect(answer.status == 200, "\(answer.text)")
        let animation = try Self.animation(answer.body)
        #expect(animation.canvas == PixelSize(width: 80, height: 50) && animation.loopCount == 3)
        #expect(animation.frames.map(\.duration) == [70, 130, 1100, 30])
        for (index, frame) in animation.frames.enumerated() {
            let db = ColourFixtures.psnr(frame.image, try Self.reference(index))
            #expect(db >= 35, "frame \(index): \(db) dB against Pillow")
        }
        #expect(animation.frames[2].image.pixelBytes(x: 52, y: 32)[3] == 0, "the WebP's transparent hole is kept")
        try await server.stop()
    }

    @Test func formatGIFAnswersAnAnimatedGIF() async throws {
        let server = try await TestServer.start()
        let answer = try await server.get("/images/\(Self.gif)?w=80&format=gif")
        #expect(answer.status == 200 && answer.header("Content-Type") == "image/gif", "\(answer.text)")
        let animation = try Self.animation(answer.body)
        #expect(animation.canvas == PixelSize(width: 80, height: 50) && animation.loopCount == 3)
        #expect(animation.frames.map(\.duration) == [70, 130, 1100, 30])
        // 255 colours a frame without dithering: a few dB under the lossless WebP's.
        for (index, frame) in animation.frames.enumerated() {
            #expect(ColourFixtures.psnr(frame.image, try Self.reference(index)) >= 28, "GIF frame \(index)")
        }
        #expect(try await server.get("/images/\(Self.gif)?w=80&format=gif").header("X-Strata-Tier") == "encoded")
        // A still original asked for as GIF: one frame.
        let still = try await server.get("/images/jpeg/kite-800x500-gray.jpg?w=80&format=gif")
        #expect(still.status == 200 && still.header("Content-Type") == "image/gif")
        #expect(try still.body.withUnsafeBytes { try AnimatedImage.info($0) }.frameCount == 1)
        try await server.stop()
    }

    @Test func operationsAndWatermarksApplyToEveryFrame() async throws {
        let directory = TempDirectory()
        var solid = PixelImage(width: 8, height: 8)
        let stride = solid.bytesPerRow
        solid.withUnsafeMutableBytes { raw in
            for y in 0..<8 {
                for x in 0..<8 {
                    raw[y * stride + 4 * x] = 255
                    raw[y * stride + 4 * x + 3] = 255
                }
            }
        }
        try Data(try ImageEncoder.encode(solid, as: .png)).write(to: URL(fileURLWithPath: directory.path + "/logo.png"))
        let server = try await TestServer.start(["http.watermarks": "logo: file:\(directory.path)/logo.png"])
        let answer = try await server.get(
            "/images/\(Self.gif)?w=60&h=60&mode=pad&bg=00ff00&rot=90&watermark=logo&wmpos=northwest&format=webp")
        #expect(answer.status == 200, "\(answer.text)")
        let animation = try Self.animation(answer.body)
        #expect(animation.frames.count == 4 && animation.canvas == PixelSize(width: 60, height: 60))
        for frame in animation.frames {
            #expect(frame.image.pixelBytes(x: 2, y: 2)[0] > 200, "the watermark (blue) is on every frame")
            // Turned, the 100×160 image fits 60 wide as 38×60: green bars left and right.
            #expect(frame.image.pixelBytes(x: 59, y: 30) == [0, 255, 0, 255], "\(frame.image.pixelBytes(x: 59, y: 30))")
        }
        try await server.stop()
    }

    @Test func theLimitsRefuseAnimationsFromTheirScanAndStillsStillServe() async throws {
        let server = try await TestServer.start(["source.maxFrames": "3"])
        let refused = try await server.get("/images/\(Self.gif)?w=80&format=webp")
        #expect(refused.status == 413 && refused.errorCode == "too_large" && refused.text.contains("source.maxFrames"), "\(refused.text)")
        #expect(try await server.get("/images/\(Self.gif)?w=80&format=webp&frames=1").status == 200)
        try await server.stop()
        let small = try await TestServer.start(["source.maxAnimationPixels": "40000"])
        let tooBig = try await small.get("/images/\(Self.gif)?w=80&format=webp")
        #expect(tooBig.status == 413 && tooBig.text.contains("source.maxAnimationPixels"), "\(tooBig.text)")
        #expect(try await small.get("/images/webp/animated-96x64-3frames.webp?w=48&format=webp").status == 200, "3 × 96 × 64 fits")
        try await small.stop()
    }

    @Test func theFramesParameterIsChecked() throws {
        #expect(try ImageParameters(path: "a.gif", query: "w=10&frames=1", maxDimension: 100).still)
        #expect(throws: ServiceError.self) { try ImageParameters(path: "a.gif", query: "w=10&frames=2", maxDimension: 100) }
    }
}
