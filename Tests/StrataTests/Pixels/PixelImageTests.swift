import Testing
@testable import Strata

/// Copy-on-write of images whose rows do not start at the beginning of their storage (a disk
/// file keeps its header before the rows).
@Suite struct PixelImageTests {
    /// Every pixel's bytes, read through `withUnsafeBytes` with bounds checks, so that a
    /// shifted or short buffer shows as wrong pixels instead of a trap; `nil` for a pixel the
    /// buffer does not reach.
    static func allPixels(_ image: PixelImage) -> [[UInt8]?] {
        let bpp = image.style.bytesPerPixel
        return image.withUnsafeBytes { raw in
            var pixels: [[UInt8]?] = []
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let start = y * image.bytesPerRow + x * bpp
                    pixels.append(start + bpp <= raw.count ? Array(raw[start..<start + bpp]) : nil)
                }
            }
            return pixels
        }
    }

    /// Inverts the first byte of pixel (x, y) (a BGRA image).
    static func invert(_ image: inout PixelImage, x: Int, y: Int) {
        let index = y * image.bytesPerRow + x * 4
        image.withUnsafeMutableBytes { rows in rows[index] ^= 0xFF }
    }

    /// A read-only image of `width`×`height` whose rows start `offset` bytes into a borrowed
    /// block, filled with `patternImage(width:height:seed:)`'s pixels; also returns them.
    static func offsetImage(width: Int, height: Int, offset: Int, seed: UInt8) -> (PixelImage, [[UInt8]]) {
        let pattern = patternImage(width: width, height: height, seed: seed)
        let count = offset + pattern.byteCount
        let block = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: PixelLayout.rowAlignment)
        block.initializeMemory(as: UInt8.self, repeating: 0xEE, count: offset)
        pattern.withUnsafeBytes { rows in (block + offset).copyMemory(from: rows.baseAddress!, byteCount: pattern.byteCount) }
        let storage = PixelStorage(borrowing: block, count: count, kind: .fileMapping, writable: false) { base, _ in
            base.deallocate()
        }
        let image = PixelImage(
            width: width, height: height, bytesPerRow: pattern.bytesPerRow, style: pattern.style,
            storage: storage, offset: offset)
        return (image, allPixels(pattern).map { $0! })
    }

    @Test(arguments: [64, 128, 4096])
    func mutatingAnImageWithOffsetRowsKeepsEveryPixel(offset: Int) {
        let (shared, original) = Self.offsetImage(width: 37, height: 9, offset: offset, seed: 3)
        var edited = shared
        let red: [UInt8] = [0, 0, 255, 255]
        let start = 4 * edited.bytesPerRow + 5 * 4
        edited.withUnsafeMutableBytes { rows in
            for (i, byte) in red.enumerated() { rows[start + i] = byte }
        }
        #expect(edited.storageKind == .heap)
        let pixels = Self.allPixels(edited)
        var wrong: [String] = []
        for y in 0..<edited.height {
            for x in 0..<edited.width {
                let expected = (x, y) == (5, 4) ? red : original[y * edited.width + x]
                if pixels[y * edited.width + x] != expected { wrong.append("(\(x),\(y))") }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.count) wrong pixels, first \(wrong.prefix(4))")
        #expect(Self.allPixels(shared).map { $0! } == original, "the shared original changed")
        #expect(edited.withUnsafeBytes { $0.count } == edited.byteCount)
    }

    @Test func twoEditedCopiesCompareByTheirPixels() {
        let (a, _) = Self.offsetImage(width: 600, height: 300, offset: 4096, seed: 5)
        let (b, _) = Self.offsetImage(width: 600, height: 300, offset: 128, seed: 5)
        var editedA = a, editedB = b
        editedA.withUnsafeMutableBytes { $0[0] = 1 }
        editedB.withUnsafeMutableBytes { $0[0] = 1 }
        #expect(editedA.hasSamePixels(as: editedB))
        #expect(editedA.hasSamePixels(as: editedA))
        #expect(!editedA.hasSamePixels(as: a))
        Self.invert(&editedB, x: 599, y: 299)
        #expect(!editedA.hasSamePixels(as: editedB))
    }

    /// The real trigger: a disk hit of a file over the map threshold is a read-only mapping
    /// whose rows start after the file header.
    @Test func mutatingAMappedDiskHitKeepsEveryPixel() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        defer { tier.close() }
        let stored = patternImage(width: 600, height: 400, seed: 9)
        try tier.storeSynchronously(stored, forKey: "big")
        let hit = try #require(try tier.image(forKey: "big", matching: SizeQuery(box: PixelSize(width: 600, height: 600))))
        #expect(hit.storageKind == .fileMapping && hit.offset > 0)
        var edited = hit
        Self.invert(&edited, x: 7, y: 10)
        var expected = stored
        Self.invert(&expected, x: 7, y: 10)
        #expect(Self.allPixels(edited) == Self.allPixels(expected))
        #expect(edited.pixelBytes(x: 0, y: 0) == stored.pixelBytes(x: 0, y: 0))
        var again = hit
        Self.invert(&again, x: 7, y: 10)
        #expect(edited.hasSamePixels(as: again))
        #expect(edited.hasSamePixels(as: expected))
        #expect(hit.hasSamePixels(as: stored))
    }
}
