import Foundation
import Testing
@testable import Strata

/// The README's quick start, run as written (paths swapped for temporary ones), so the README
/// cannot drift from the API.
@Suite struct QuickStartTests {
    @Test func readmeQuickStartWorks() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("strata-readme-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let photos = scratch + "/photos"
        try FileManager.default.createDirectory(atPath: photos + "/2024", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: photos + "/avatars", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: photos + "/2024/beach.jpg", contents: Data(Fixtures.bytes("jpeg/fallenleaf-2048x1280-420.jpg"))))
        #expect(FileManager.default.createFile(atPath: photos + "/avatars/42.jpg", contents: Data(Fixtures.bytes("jpeg/orientation-6.jpg"))))

        // --- README: Quick start ---
        let source = try SourceTier(source: try DirectorySource(root: photos))
        let rendered = try await source.image(forKey: "2024/beach.jpg",
                                              request: RenderRequest(box: PixelSize(width: 256, height: 256)))
        let image = rendered.image
        image.withUnsafeBytes { rows in #expect(rows.count >= image.bytesPerRow * (image.height - 1)) }
        let webp = try ImageEncoder.encode(image, as: .webp, quality: 85)
        #expect(image.size == PixelSize(width: 256, height: 160) && image.bytesPerRow % 64 == 0)
        #expect(ImageFormatDetector.detect(webp) == .webp)

        // --- README: Memory, disk and table tiers ---
        let memory = ImageMemoryTier(configuration: .init(costLimit: 512 << 20, countLimit: 20_000))
        memory.insert(image, forKey: "2024/beach.jpg", mode: .fit)
        let near = memory.image(forKey: "2024/beach.jpg",
                                matching: SizeQuery(box: PixelSize(width: 240, height: 240)))
        #expect(near?.1.size == image.size)

        let disk = try DiskTier(directory: scratch + "/disk", configuration: .init())
        disk.store(image, forKey: "2024/beach.jpg", mode: .fit)
        disk.flush()
        let mapped = try disk.image(forKey: "2024/beach.jpg",
                                    matching: SizeQuery(box: PixelSize(width: 256, height: 256)))
        #expect(mapped?.hasSamePixels(as: image) == true)

        let avatar = ImageTableFormat(name: "avatar-100", family: "avatar", size: PixelSize(width: 100, height: 100),
                                      maximumCount: 10_000)
        let tables = try ImageTableCache(directory: scratch + "/tables", formats: [avatar])
        let entity = ImageTableEntity(
            id: ImageEntityID(hashing: "user/42"), sourceVersion: 1,
            source: ImageTableSource(description: "user/42") { largest in
                try await source.image(forKey: "avatars/42.jpg",
                                       request: RenderRequest(box: largest, mode: .fill)).image
            },
            process: { source, canvas in canvas.image = source })
        #expect(tables.cachedImage(for: entity, formatName: "avatar-100") == nil)
        let drawn = try await tables.image(for: entity, formatName: "avatar-100")
        let cell = tables.cachedImage(for: entity, formatName: "avatar-100")
        #expect(cell?.hasSamePixels(as: drawn) == true)
        #expect(drawn.size.width <= 100 && drawn.size.height <= 100)
    }
}
