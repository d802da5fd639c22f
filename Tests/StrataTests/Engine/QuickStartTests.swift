import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// The quick start of docs/Library.md, run statement for statement as written (paths swapped for
/// temporary ones), with checks of what its comments promise, so the docs cannot drift from
/// the API or from what the calls really do.
@Suite struct QuickStartTests {
    @Test func readmeQuickStartWorks() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("strata-readme-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let photos = scratch + "/photos"
        try FileManager.default.createDirectory(atPath: photos + "/2024", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: photos + "/avatars", withIntermediateDirectories: true)
        #expect(
            FileManager.default.createFile(
                atPath: photos + "/2024/beach.jpg", contents: Data(Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg"))))
        #expect(
            FileManager.default.createFile(atPath: photos + "/avatars/42.jpg", contents: Data(Fixtures.bytes("jpeg/orientation-6.jpg"))))

        #expect(
            FileManager.default.createFile(
                atPath: photos + "/2024/dunes.jpg", contents: Data(Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg"))))

        // --- docs/Library.md: Quick start ---
        let cache = try ImageCache(
            disk: try DiskTier(directory: scratch + "/cache"),
            source: try DirectorySource(root: photos))
        let served = try await cache.image(for: ImageRequest(key: "2024/beach.jpg", box: PixelSize(width: 256, height: 256)))
        #expect(served.tier == .source)
        #expect(served.image.size == PixelSize(width: 256, height: 160) && served.image.bytesPerRow % 64 == 0)
        #expect(served.image.style == .bgra32Premultiplied)
        served.image.withUnsafeBytes { rows in #expect(rows.count >= served.image.bytesPerRow * (served.image.height - 1)) }
        let webp = try ImageEncoder.encode(served.image, as: .webp, quality: 85)
        #expect(ImageFormatDetector.detect(webp) == .webp)
        let again = try await cache.image(for: ImageRequest(key: "2024/beach.jpg", box: PixelSize(width: 256, height: 256)))
        #expect(again.tier == .memory, "memory afterwards")

        let exact = try await cache.image(
            for: ImageRequest(key: "2024/beach.jpg", box: PixelSize(width: 240, height: 240), exactSize: true))
        #expect(exact.image.size == PixelSize(width: 240, height: 150))
        #expect(cache.statistics.engine.resamples == 1 && cache.statistics.engine.sourceDecodes == 1, "resampled, not decoded again")

        let hit = cache.cachedImage(for: ImageRequest(key: "2024/beach.jpg", box: PixelSize(width: 256, height: 256)))
        #expect(hit?.image.size == PixelSize(width: 256, height: 160))

        let upcoming = cache.prefetch([ImageRequest(key: "2024/dunes.jpg", box: PixelSize(width: 256, height: 256))])
        cache.prioritize(upcoming[0])
        #expect(upcoming[0].priority == .urgent)
        #expect(try await upcoming[0].value.image.size == PixelSize(width: 256, height: 160))

        // "(.disk in a new process)": a new engine over the same directory, empty memory.
        cache.disk!.flush()
        let fresh = try ImageCache(disk: try DiskTier(directory: scratch + "/cache"), source: try DirectorySource(root: photos))
        #expect(try await fresh.image(for: ImageRequest(key: "2024/beach.jpg", box: PixelSize(width: 256, height: 256))).tier == .disk)

        // --- docs/Library.md: The tiers on their own ---
        let originals = try DirectorySource(root: photos)
        let image = try ImageRenderer().render(
            try await originals.fetch(key: "2024/beach.jpg").bytes, request: RenderRequest(box: PixelSize(width: 512, height: 512)))
        #expect(image.size == PixelSize(width: 512, height: 320))

        let memory = ImageMemoryTier(configuration: .init(costLimit: 512 << 20, countLimit: 20_000))
        memory.insert(image, forKey: "2024/beach.jpg", mode: .fit)
        let near = memory.image(
            forKey: "2024/beach.jpg",
            matching: SizeQuery(box: PixelSize(width: 480, height: 480)))
        #expect(near?.0.hasSamePixels(as: image) == true)

        let disk = try DiskTier(directory: scratch + "/disk", configuration: .init())
        disk.store(image, forKey: "2024/beach.jpg", mode: .fit)
        disk.flush()
        let mapped = try disk.image(
            forKey: "2024/beach.jpg",
            matching: SizeQuery(box: PixelSize(width: 512, height: 512)))
        #expect(mapped?.hasSamePixels(as: image) == true)
        // "an mmap, no decode": the file is over the map threshold, so the hit is a mapping.
        #expect(image.byteCount >= DiskTier.Configuration().mapThreshold)
        #expect(mapped?.storageKind == .fileMapping)

        let avatar = ImageTableFormat(
            name: "avatar-100", family: "avatar", size: PixelSize(width: 100, height: 100),
            maximumCount: 10_000)
        let tables = try ImageTableCache(directory: scratch + "/tables", formats: [avatar])
        let entity = ImageTableEntity(
            id: ImageEntityID(hashing: "user/42"), sourceVersion: 1,
            source: ImageTableSource(description: "user/42") { largest in
                try ImageRenderer().render(
                    try await originals.fetch(key: "avatars/42.jpg").bytes,
                    request: RenderRequest(box: largest, mode: .fill))
            },
            process: { source, canvas in canvas.image = source })
        let cell = tables.cachedImage(for: entity, formatName: "avatar-100")
        let drawn = try await tables.image(for: entity, formatName: "avatar-100")
        #expect(cell == nil, "nothing was drawn yet")
        #expect(drawn.size.width <= 100 && drawn.size.height <= 100)
        #expect(tables.cachedImage(for: entity, formatName: "avatar-100")?.hasSamePixels(as: drawn) == true)
    }
}
