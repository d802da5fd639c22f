import Foundation
import StrataTestSupport
import Testing

@testable import Strata

/// Gravity through the engine: each gravity is its own variant (cached apart, tolerance matched
/// among its own), and a smart crop reads its saliency from a small variant memory holds.
@Suite("Gravity in the engine")
struct GravityEngineTests {
    /// An engine over a scratch directory holding `scene.jpg`: a 1280×800 scene with an orange
    /// disc near the right edge.
    static func engine() throws -> (ImageCache, ScratchDirectory) {
        let scratch = ScratchDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
        let scene = SaliencyTests.scene(PixelSize(width: 1280, height: 800), cx: 1170, cy: 300, radius: 90)
        try Data(ImageEncoder.encode(scene, as: .jpeg, quality: 95)).write(to: URL(fileURLWithPath: scratch.path + "/scene.jpg"))
        return (try ImageCache(source: try DirectorySource(root: scratch.path)), scratch)
    }

    static func request(_ gravity: Gravity, _ side: Int = 300) -> ImageRequest {
        ImageRequest(key: CacheKey("scene.jpg", colour: .srgb, gravity: gravity), box: PixelSize(width: side, height: side), mode: .fill)
    }

    @Test func eachGravityIsItsOwnVariant() async throws {
        let (cache, scratch) = try Self.engine()
        _ = scratch
        let centre = try await cache.image(for: Self.request(.center))
        let east = try await cache.image(for: Self.request(.east))
        let west = try await cache.image(for: Self.request(.west))
        #expect(centre.tier == .source && east.tier == .source && west.tier == .source)
        #expect(!centre.image.hasSamePixels(as: east.image) && !east.image.hasSamePixels(as: west.image))
        // Within tolerance of its own gravity's variant: a memory hit with those pixels.
        let again = try await cache.image(for: Self.request(.east, 280))
        #expect(again.tier == .memory && again.image.hasSamePixels(as: east.image))
        #expect(try await cache.image(for: Self.request(.focalPoint(x: 100, y: 50), 280)).tier == .source)
        // Removing the derived keys of the source key drops every gravity.
        await cache.remove(keys: CacheKey.allDerived(from: "scene.jpg"))
        #expect(try await cache.image(for: Self.request(.east)).tier == .source)
        #expect(try await cache.image(for: Self.request(.center)).tier == .source)
    }

    @Test func aSmartCropReadsASmallVariantMemoryHolds() async throws {
        let (cache, scratch) = try Self.engine()
        _ = scratch
        let renderRequest = RenderRequest(box: PixelSize(width: 300, height: 300), mode: .fill, gravity: .smart)
        let key = CacheKey("scene.jpg", colour: .srgb, gravity: .smart)
        #expect(cache.heldSmartFocus(key, request: renderRequest) == nil)
        let smartCold = try await cache.image(for: Self.request(.smart))
        // A thumbnail of the same image, as a gallery would have asked for first.
        _ = try await cache.image(for: ImageRequest(key: CacheKey("scene.jpg"), box: PixelSize(width: 200, height: 200)))
        let focus = try #require(cache.heldSmartFocus(key, request: renderRequest))
        #expect(focus.x > 0.68, "the disc is at the right edge, the crop against it: \(focus)")
        await cache.remove(keys: [key])
        let smartWarm = try await cache.image(for: Self.request(.smart))
        #expect(smartWarm.tier == .source)
        // Both crops keep the disc: the answer's right part is orange.
        for image in [smartCold.image, smartWarm.image] {
            let p = image.pixelBytes(x: 258, y: 112)  // the disc's centre, 1170 − 480 of 800 → 300
            #expect(p[2] > 200 && p[0] < 100, "\(p)")
        }
    }
}
