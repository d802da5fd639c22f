import Foundation
import Testing
@testable import Strata

/// The README's quick start, run statement for statement as written (paths swapped for
/// temporary ones), with checks of what its comments promise, so the README cannot drift from
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

        // --- README: Quick start ---
        let source = try SourceTier(source: try DirectorySource(root: photos))
        let rendered = try await source.image(
            forKey: "2024/beach.jpg",
            request: RenderRequest(box: PixelSize(width: 512, height: 512)))
        let image = rendered.image
        image.withUnsafeBytes { rows in #expect(rows.count >= image.bytesPerRow * (image.height - 1)) }
        let webp = try ImageEncoder.encode(image, as: .webp, quality: 85)
        #expect(image.size == PixelSize(width: 512, height: 320) && image.bytesPerRow % 64 == 0)
        #expect(image.style == .bgra32Premultiplied)
        #expect(ImageFormatDetector.detect(webp) == .webp)

        // --- README: Memory, disk and table tiers ---
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
                try await source.image(
                    forKey: "avatars/42.jpg",
                    request: RenderRequest(box: largest, mode: .fill)
                ).image
            },
            process: { source, canvas in canvas.image = source })
        let cell = tables.cachedImage(for: entity, formatName: "avatar-100")
        let drawn = try await tables.image(for: entity, formatName: "avatar-100")
        #expect(cell == nil, "nothing was drawn yet")
        #expect(drawn.size.width <= 100 && drawn.size.height <= 100)
        #expect(tables.cachedImage(for: entity, formatName: "avatar-100")?.hasSamePixels(as: drawn) == true)
    }
}
