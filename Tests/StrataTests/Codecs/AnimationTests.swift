import Foundation
import Strata
import StrataTestSupport
import Testing

/// `AnimatedImage`: every frame of a GIF (offsets, transparency, each disposal) and of a WebP,
/// their durations and loop count, kept through an animated WebP; the limits refuse a bomb
/// before any frame is decoded.
@Suite("Animation")
struct AnimationTests {
    static let palette: [(UInt8, UInt8, UInt8)] =
        [(255, 0, 0), (0, 0, 255), (0, 255, 0), (0, 0, 0)] + Array(repeating: (0, 0, 0), count: 252)

    /// A 40×30 GIF: red everywhere (70 ms, kept); a blue 10×10 square at (10, 10) whose
    /// corner pixel is transparent (130 ms, cleared after); a green 5×5 at (20, 5) (1.1 s,
    /// restored after); a last frame of nothing but a black pixel at (0, 0) (0 ms). Loops 3 times.
    static func gif() -> [UInt8] {
        var blue = [UInt8](repeating: 1, count: 100)
        blue[0] = 9
        return GIFWriter.encode(
            screenWidth: 40, screenHeight: 30, globalTable: palette,
            frames: [
                .init(width: 40, height: 30, indices: [UInt8](repeating: 0, count: 1200), delay: 7, disposal: 1),
                .init(left: 10, top: 10, width: 10, height: 10, indices: blue, transparentIndex: 9, delay: 13, disposal: 2),
                .init(left: 20, top: 5, width: 5, height: 5, indices: [UInt8](repeating: 2, count: 25), delay: 110, disposal: 3),
                .init(width: 1, height: 1, indices: [3], delay: 0),
            ], loopCount: 3)
    }

    static let red: [UInt8] = [0, 0, 255, 255], blue: [UInt8] = [255, 0, 0, 255], green: [UInt8] = [0, 255, 0, 255]
    static let clear: [UInt8] = [0, 0, 0, 0], black: [UInt8] = [0, 0, 0, 255]

    /// What each frame of ``gif()`` shows at a few points.
    static func checkFrames(_ animation: AnimatedImage, _ where_: String) {
        let frames = animation.frames.map(\.image)
        #expect(frames.count == 4, "\(where_)")
        guard frames.count == 4 else { return }
        #expect(frames[0].pixelBytes(x: 15, y: 15) == red && frames[0].pixelBytes(x: 39, y: 29) == red, "\(where_)")
        #expect(frames[1].pixelBytes(x: 15, y: 15) == blue && frames[1].pixelBytes(x: 10, y: 10) == red, "\(where_): transparency")
        // The blue square cleared to transparent (disposal 2); the green drawn over red.
        #expect(frames[2].pixelBytes(x: 15, y: 15) == clear && frames[2].pixelBytes(x: 22, y: 7) == green, "\(where_): disposal 2")
        // The green restored away (disposal 3): the canvas as before it, the square still clear.
        #expect(frames[3].pixelBytes(x: 22, y: 7) == red && frames[3].pixelBytes(x: 15, y: 15) == clear, "\(where_): disposal 3")
        #expect(frames[3].pixelBytes(x: 0, y: 0) == black, "\(where_)")
    }

    @Test func aGIFsFramesAreComposedWithTheirDisposals() throws {
        let bytes = Self.gif()
        let info = try bytes.withUnsafeBytes { try AnimatedImage.info($0) }
        #expect(info == AnimationInfo(format: .gif, canvas: PixelSize(width: 40, height: 30), frameCount: 4, loopCount: 3))
        let animation = try bytes.withUnsafeBytes { try AnimatedImage.decode($0) }
        #expect(animation.frames.map(\.duration) == [70, 130, 1100, 0] && animation.loopCount == 3)
        Self.checkFrames(animation, "GIF")
        // The first frame is what the still decoder gives.
        let still = try ImageDecoder().decode(bytes)
        #expect(still.hasSamePixels(as: animation.frames[0].image))
    }

    @Test func anAnimationKeepsItsFramesTimingsAndLoopsThroughWebP() throws {
        let animation = try Self.gif().withUnsafeBytes { try AnimatedImage.decode($0) }
        let webp = try animation.encodedAsWebP(quality: 100)
        let back = try webp.withUnsafeBytes { try AnimatedImage.decode($0) }
        let info = try webp.withUnsafeBytes { try AnimatedImage.info($0) }
        #expect(info.format == .webp && info.frameCount == 4 && info.loopCount == 3 && info.canvas == animation.canvas)
        #expect(back.frames.map(\.duration) == [70, 130, 1100, 0], "\(back.frames.map(\.duration))")
        Self.checkFrames(back, "WebP lossless")
        // Lossy: the same frames, blurred only at the pure red, blue and green edges (WebP's
        // chroma is half the resolution).
        let lossy = try animation.encodedAsWebP(quality: 90).withUnsafeBytes { try AnimatedImage.decode($0) }
        #expect(lossy.frames.count == 4 && lossy.frames.map(\.duration) == [70, 130, 1100, 0])
        for (a, b) in zip(lossy.frames, animation.frames) { #expect(psnr(a.image, b.image) > 25) }
    }

    @Test func anAnimationKeepsItsFramesTimingsAndLoopsThroughGIF() throws {
        let animation = try Self.gif().withUnsafeBytes { try AnimatedImage.decode($0) }
        let gif = try animation.encodedAsGIF()
        let back = try gif.withUnsafeBytes { try AnimatedImage.decode($0) }
        #expect(try gif.withUnsafeBytes { try AnimatedImage.info($0) }.loopCount == 3)
        #expect(back.frames.map(\.duration) == [70, 130, 1100, 0])
        Self.checkFrames(back, "GIF out")
        // A still GIF through the encoder: one frame, the same pixels (four colours fit the table).
        let still = try ImageEncoder.encode(animation.frames[1].image, as: .gif)
        let one = try still.withUnsafeBytes { try AnimatedImage.decode($0) }
        #expect(one.frames.count == 1 && one.frames[0].image.hasSamePixels(as: animation.frames[1].image))
    }

    @Test func theAnimatedWebPFixtureDecodesFrameByFrame() throws {
        let bytes = Fixtures.bytes("webp/animated-96x64-3frames.webp")
        let animation = try bytes.withUnsafeBytes { try AnimatedImage.decode($0) }
        #expect(animation.canvas == PixelSize(width: 96, height: 64) && animation.frames.count == 3)
        #expect(animation.frames.allSatisfy { $0.duration > 0 && $0.image.size == animation.canvas })
        #expect(try ImageDecoder().decode(bytes).hasSamePixels(as: animation.frames[0].image))
        #expect(!animation.frames[1].image.hasSamePixels(as: animation.frames[0].image), "the frames differ")
        // Resized frame by frame and kept animated.
        let small = try animation.map { frame in
            Resampler().resample(frame, region: SourceRect(x: 0, y: 0, width: 96, height: 64), to: PixelSize(width: 48, height: 32))
        }
        let again = try small.encodedAsWebP(quality: 100).withUnsafeBytes { try AnimatedImage.decode($0) }
        #expect(again.canvas == PixelSize(width: 48, height: 32) && again.frames.map(\.duration) == animation.frames.map(\.duration))
        #expect(again.loopCount == animation.loopCount)
    }

    @Test func bombsAreRefusedBeforeAnyFrameIsDecoded() throws {
        // 4 frames of one pixel on a 16 000 × 16 000 screen: 1 G canvas pixels, a 60-byte file.
        let huge = GIFWriter.encode(
            screenWidth: 16_000, screenHeight: 16_000, globalTable: Self.palette,
            frames: (0..<4).map { _ in .init(width: 1, height: 1, indices: [0], delay: 1) })
        #expect(huge.count < 2000)
        #expect {
            try huge.withUnsafeBytes { try AnimatedImage.decode($0) }
        } throws: { error in
            guard let decoding = error as? ImageDecodingError, case .tooLarge(let pixels, let limit) = decoding.reason else { return false }
            return pixels == 4 * 16_000 * 16_000 && limit == AnimationLimits().maxTotalPixels
        }
        let many = GIFWriter.encode(
            screenWidth: 2, screenHeight: 2, globalTable: Self.palette,
            frames: (0..<50).map { _ in .init(width: 1, height: 1, indices: [0]) })
        #expect {
            try many.withUnsafeBytes { try AnimatedImage.decode($0, limits: AnimationLimits(maxFrames: 49)) }
        } throws: { error in
            guard let decoding = error as? ImageDecodingError, case .tooManyFrames(50, 49) = decoding.reason else { return false }
            return "\(decoding)".contains("source.maxFrames")
        }
        #expect(try many.withUnsafeBytes { try AnimatedImage.decode($0, limits: AnimationLimits(maxFrames: 50)) }.frames.count == 50)
        // The scan stops one past the limit: a file of countless frames is not read to its end.
        #expect(try many.withUnsafeBytes { try AnimatedImage.info($0, maxFrames: 10) }.frameCount == 11)
    }

    @Test func damagedAnimationsAreErrorsNotCrashes() {
        let bytes = Self.gif()
        for cut in [13, 40, bytes.count / 2, bytes.count - 2] {
            let part = Array(bytes.prefix(cut))
            #expect(throws: ImageDecodingError.self, "cut at \(cut)") { try part.withUnsafeBytes { try AnimatedImage.decode($0) } }
        }
        let webp = Fixtures.bytes("webp/animated-96x64-3frames.webp")
        let part = Array(webp.prefix(webp.count * 2 / 3))
        #expect(throws: ImageDecodingError.self) { try part.withUnsafeBytes { try AnimatedImage.decode($0) } }
        #expect(throws: ImageDecodingError.self) {
            try Fixtures.bytes("jpeg/orientation-1.jpg").withUnsafeBytes { try AnimatedImage.info($0) }
        }
    }
}
