import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// HEIC, AVIF and GIF originals in a `DirectorySource` served through `ImageCache`, as the
/// JPEGs are: rendered by the source tier, then from memory; a broken one fails typed and the
/// engine goes on serving.
@Suite struct NewFormatsEngineTests {
    @Test func heicAvifAndGifOriginalsRender() async throws {
        let tools = FormatTools()
        let root = tools.directory.path + "/originals"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let photo = Fixtures.url("jpeg/eveningglow-1024x640-progressive.jpg").path
        let heic = try tools.heifenc(photo, ["-q", "85", "-t", "320"])
        let avif = try tools.avifenc(photo)
        let gif = GIFWriter.encode(
            screenWidth: 64, screenHeight: 40, globalTable: [(255, 0, 0), (0, 0, 255)],
            frames: [.init(width: 64, height: 40, indices: (0..<(64 * 40)).map { UInt8($0 % 2) })])
        // Names without the usual extension too: the format comes from the bytes.
        for (name, bytes) in [("a.heic", heic), ("b.HEIF", heic), ("c.avif", avif), ("d.gif", gif), ("e.bin", avif)] {
            _ = FileManager.default.createFile(atPath: "\(root)/\(name)", contents: Data(bytes))
        }
        _ = FileManager.default.createFile(atPath: "\(root)/broken.heic", contents: Data(heic.prefix(heic.count / 2)))
        let cache = try ImageCache(source: try DirectorySource(root: root))
        let box = PixelSize(width: 128, height: 128)
        for key in ["a.heic", "b.HEIF", "c.avif", "e.bin"] {
            let served = try await cache.image(for: ImageRequest(key: CacheKey(key), box: box))
            #expect(served.tier == .source, "\(key)")
            #expect(served.image.size == PixelSize(width: 128, height: 80), "\(key)")
            let reference = try ImageRenderer().render(
                Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg"), request: RenderRequest(box: box))
            #expect(psnr(served.image, reference) >= 28, "\(key): the same picture")
            #expect(try await cache.image(for: ImageRequest(key: CacheKey(key), box: box)).tier == .memory)
        }
        let served = try await cache.image(for: ImageRequest(key: "d.gif", box: PixelSize(width: 32, height: 32)))
        #expect(served.image.size == PixelSize(width: 32, height: 20))
        // Alternating red and blue columns reduce to purple.
        let pixel = served.image.pixelBytes(x: 16, y: 10)
        #expect(abs(Int(pixel[0]) - 128) < 20 && abs(Int(pixel[2]) - 128) < 20 && pixel[3] == 255)
        await #expect(throws: ImageCacheError.self) { _ = try await cache.image(for: ImageRequest(key: "broken.heic", box: box)) }
        #expect(try await cache.image(for: ImageRequest(key: "a.heic", box: PixelSize(width: 256, height: 256))).image.size.width == 256)
    }
}
