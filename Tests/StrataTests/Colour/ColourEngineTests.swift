import Testing
import StrataTestSupport

@testable import Strata

/// `original` and sRGB variants of one key are two identities in every tier: a change of the
/// colour choice never serves the other's pixels, after a restart included, and the source is
/// asked for the key without its colour suffix.
@Suite("Colour: variants per colour choice in the engine's tiers", .timeLimit(.minutes(3)))
struct ColourEngineTests {
    static let profile = ColourFixtures.profile(.swappedMatrix)

    static func tagged() throws -> [UInt8] {
        try ImageEncoder.encode(
            ColourFixtures.photo(PixelSize(width: 640, height: 400)), as: .png, profile: try ColourProfile(bytes: profile))
    }

    @Test func originalAndSRGBVariantsAreApartInMemoryAndOnDiskAfterARestart() async throws {
        let scratch = ScratchDirectory()
        let source = BytesSource(["photo.png": try Self.tagged()])
        let box = PixelSize(width: 200, height: 200)
        let srgbKey = CacheKey("photo.png", colour: .srgb)
        let originalKey = CacheKey("photo.png", colour: .original)
        #expect(srgbKey == CacheKey("photo.png"))
        #expect(originalKey != srgbKey && originalKey.sourceKey == "photo.png" && originalKey.colourOutput == .original)
        let srgb: CachedImage, original: CachedImage
        do {
            let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
            defer { disk.close() }
            let cache = try ImageCache(memory: ImageMemoryTier(), disk: disk, source: source)
            srgb = try await cache.image(for: ImageRequest(key: srgbKey, box: box))
            original = try await cache.image(for: ImageRequest(key: originalKey, box: box))
            #expect(srgb.tier == .source && original.tier == .source, "the other choice's variant is not served")
            #expect(ColourFixtures.psnr(srgb.image, original.image) < 30)
            let again = try await cache.image(for: ImageRequest(key: originalKey, box: box))
            #expect(again.tier == .memory && again.image.hasSamePixels(as: original.image))
            disk.flush()
        }
        let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        defer { disk.close() }
        let cache = try ImageCache(memory: nil, disk: disk, source: source)
        let srgbAgain = try await cache.image(for: ImageRequest(key: srgbKey, box: box))
        let originalAgain = try await cache.image(for: ImageRequest(key: originalKey, box: box))
        #expect(srgbAgain.tier == .disk && originalAgain.tier == .disk)
        #expect(srgbAgain.image.hasSamePixels(as: srgb.image))
        #expect(originalAgain.image.hasSamePixels(as: original.image))
    }
}
