import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// The engine's source render (fetch → shrink-on-load decode → Lanczos-3 → style) and the
/// renderer beneath it. An engine without memory or disk renders every request from the source.
@Suite struct SourceRenderTests {
    static func renderingEngine(_ render: RenderSettings = .init(), width: Int = 2) throws -> ImageCache {
        var options = ImageCache.Options()
        options.width = width
        return try ImageCache(
            memory: nil, source: try DirectorySource(root: Fixtures.directory.path), render: render, options: options)
    }

    static func request(_ key: String, _ box: PixelSize, _ mode: ContentMode = .fit) -> ImageRequest {
        ImageRequest(key: CacheKey(key), box: box, mode: mode)
    }

    @Test(arguments: [
        ("jpeg/path-2560x1600.jpg", ContentMode.fit, PixelSize(width: 256, height: 256), PixelSize(width: 256, height: 160)),
        ("jpeg/path-2560x1600.jpg", .fill, PixelSize(width: 256, height: 256), PixelSize(width: 256, height: 256)),
        ("webp/path-2560x1600.webp", .fit, PixelSize(width: 1024, height: 1024), PixelSize(width: 1024, height: 640)),
        ("webp/cups-640x400-alpha.webp", .fill, PixelSize(width: 100, height: 200), PixelSize(width: 100, height: 200)),
        ("jpeg/coldripple-1024x640-orientation6.jpg", .fit, PixelSize(width: 200, height: 200), PixelSize(width: 200, height: 125)),
        ("jpeg/kite-800x500-gray.jpg", .fit, PixelSize(width: 4000, height: 4000), PixelSize(width: 800, height: 500)),
    ])
    func rendersTheExactPlannedSize(file: String, mode: ContentMode, box: PixelSize, expected: PixelSize) async throws {
        let engine = try Self.renderingEngine(width: 1)
        let rendered = try await engine.image(for: Self.request(file, box, mode))
        #expect(rendered.tier == .source && rendered.image.size == expected)
        #expect(rendered.image.style == .bgra32Premultiplied)
        #expect(rendered.image.isRowAligned)
        #expect(rendered.sourceVersion != .unknown)
    }

    @Test(arguments: PixelStyle.allCases)
    func rendersEveryStyle(style: PixelStyle) throws {
        let renderer = ImageRenderer()
        let image = try renderer.render(
            Fixtures.bytes("jpeg/path-2560x1600.jpg"),
            request: RenderRequest(box: PixelSize(width: 64, height: 64), style: style))
        #expect(image.style == style && image.size == PixelSize(width: 64, height: 40))
        let reference = try renderer.render(
            Fixtures.bytes("jpeg/path-2560x1600.jpg"),
            request: RenderRequest(box: PixelSize(width: 64, height: 64)))
        #expect(PixelConversion.convert(reference, to: style).hasSamePixels(as: image))
    }

    @Test func shrinkOnLoadKeepsHeadroom() throws {
        let renderer = ImageRenderer()
        let header = try renderer.decoder.readHeader(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        let plan = renderer.plan(for: header, request: RenderRequest(box: PixelSize(width: 256, height: 256)))
        #expect(plan.minimumDecode == PixelSize(width: 512, height: 320))
        // 1/4 DCT scale: 640×400 ≥ 2 × the output, 1/8 would be only 320×200.
        #expect(renderer.decoder.decodedSize(for: header, minimumSize: plan.minimumDecode) == PixelSize(width: 640, height: 400))
        renderer.decodeHeadroom = 1
        let tight = renderer.plan(for: header, request: RenderRequest(box: PixelSize(width: 256, height: 256)))
        #expect(renderer.decoder.decodedSize(for: header, minimumSize: tight.minimumDecode) == PixelSize(width: 320, height: 200))
    }

    /// Issue 2's quality bar: thumbnails within 44 dB PSNR of Pillow's Lanczos-3 of the full
    /// decode (Scripts/quality/reference.py wrote the references).
    @Test func thumbnailsMatchPillowsFullDecodeLanczos() throws {
        let renderer = ImageRenderer()
        let bytes = Fixtures.bytes("jpeg/path-2560x1600.jpg")
        let small = try renderer.render(bytes, request: RenderRequest(box: PixelSize(width: 256, height: 256), style: .bgrx32))
        let reference256 = try ResamplerQualityTests.reference("path-lanczos-256x160.rgb", width: 256, height: 160)
        let psnr256 = small.peakSignalToNoiseRatio(against: reference256)
        #expect(psnr256 >= 44, "256 px: \(psnr256) dB")

        let large = try renderer.render(bytes, request: RenderRequest(box: PixelSize(width: 1024, height: 1024), style: .bgrx32))
        #expect(large.size == PixelSize(width: 1024, height: 640))
        let window = Resampler().resample(
            large, region: SourceRect(x: 320, y: 200, width: 384, height: 240),
            to: PixelSize(width: 384, height: 240))
        let reference1024 = try ResamplerQualityTests.reference("path-lanczos-1024x640-crop-320-200-384x240.rgb", width: 384, height: 240)
        let psnr1024 = window.peakSignalToNoiseRatio(against: reference1024)
        #expect(psnr1024 >= 44, "1024 px: \(psnr1024) dB")
    }

    @Test func pixelLimitIsEnforcedFromTheHeader() async throws {
        let engine = try Self.renderingEngine(RenderSettings(maxPixels: 1_000_000), width: 1)
        await #expect {
            _ = try await engine.image(for: Self.request("jpeg/path-2560x1600.jpg", PixelSize(width: 64, height: 64)))
        } throws: { error in
            guard let error = error as? ImageCacheError, case .decoding(let key, let inner) = error,
                case .tooLarge(let pixels, let limit) = inner.reason
            else { return false }
            return pixels == 2560 * 1600 && limit == 1_000_000 && key == "jpeg/path-2560x1600.jpg"
        }
    }

    @Test func brokenInputFailsAndTheEngineKeepsServing() async throws {
        let engine = try Self.renderingEngine()
        let broken = try FileManager.default.contentsOfDirectory(atPath: Fixtures.url("broken").path).sorted()
        #expect(broken.count >= 8)
        let box = PixelSize(width: 128, height: 128)
        for name in broken {
            await #expect(throws: ImageCacheError.self, "broken/\(name) must not render") {
                _ = try await engine.image(for: Self.request("broken/\(name)", box))
            }
            let good = try await engine.image(for: Self.request("jpeg/orientation-1.jpg", box))
            #expect(good.image.width > 0)
        }
    }

    @Test func concurrentRendersAgree() async throws {
        let engine = try Self.renderingEngine()
        let box = PixelSize(width: 96, height: 96)
        let keys = ["jpeg/fallenleaf-2048x1280-420.jpg", "webp/cups-640x400-alpha.webp", "jpeg/eveningglow-1024x640-progressive.jpg"]
        var expected: [String: PixelImage] = [:]
        for key in keys { expected[key] = try await engine.image(for: Self.request(key, box, .fill)).image }
        try await withThrowingTaskGroup(of: (String, PixelImage).self) { group in
            for i in 0..<24 {
                let key = keys[i % keys.count]
                group.addTask { (key, try await engine.image(for: Self.request(key, box, .fill)).image) }
            }
            for try await (key, image) in group {
                #expect(image.hasSamePixels(as: expected[key]!), "\(key) rendered differently under concurrency")
            }
        }
    }
}
