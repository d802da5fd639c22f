import Foundation
import Testing
@testable import Strata

/// Files written before the checksums became XXH3 (format version 1, XXH64 checksums) are
/// misses: refused by version, removed, never served.
@Suite("Disk file format versions")
struct DiskFormatVersionTests {
    /// A complete version-1 file of `image` under `key`: the same layout, with version 1 and
    /// the XXH64 header and pixel checksums that version used (so only the version refuses it).
    static func versionOneFile(_ image: PixelImage, key: String) -> [UInt8] {
        var file = DiskFileEncoder.encode(image, key: key, mode: .fit, sourceVersion: 1)
        let offset = DiskFileHeader.pixelOffset(keyLength: key.utf8.count)
        file.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(1).littleEndian, toByteOffset: 8, as: UInt32.self)
            let pixels = XXHash.xxh64(UnsafeRawBufferPointer(rebasing: raw[offset...]))
            raw.storeBytes(of: pixels.littleEndian, toByteOffset: 48, as: UInt64.self)
            let keyArea = XXHash.xxh64(UnsafeRawBufferPointer(rebasing: raw[64..<offset]))
            let header = XXHash.xxh64(UnsafeRawBufferPointer(rebasing: raw[0..<56]), seed: keyArea)
            raw.storeBytes(of: header.littleEndian, toByteOffset: 56, as: UInt64.self)
        }
        return file
    }

    @Test("A version-1 header is refused by its version, and the current one is 2")
    func versionOneHeaderIsRefused() throws {
        let image = patternImage(width: 40, height: 30, seed: 3)
        let old = Self.versionOneFile(image, key: "old")
        #expect(DiskFileHeader.version == 2)
        #expect(throws: DiskFileHeader.Problem.unsupportedVersion(1)) {
            try old.withUnsafeBytes { try DiskFileHeader(validating: $0) }
        }
        // The same file at the current version is accepted: the version alone refused it.
        let current = DiskFileEncoder.encode(image, key: "old", mode: .fit, sourceVersion: 1)
        #expect(throws: Never.self) { try current.withUnsafeBytes { try DiskFileHeader(validating: $0) } }
    }

    @Test("Version-1 files found at start-up or published later are misses and are removed")
    func versionOneFilesAreMissesAndRemoved() throws {
        let scratch = ScratchDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
        let image = patternImage(width: 300, height: 200, seed: 9)
        let box = SizeQuery(box: image.size)
        func name(_ key: String) -> String {
            DiskFileName(digest: ImageEntityID(hashing: key), variant: VariantDescriptor(size: image.size)).string
        }
        // Left by an earlier release in the directory before the tier opens.
        try Data(Self.versionOneFile(image, key: "before")).write(to: URL(fileURLWithPath: scratch.path + "/" + name("before")))
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        #expect(tier.contains(key: "before", matching: box), "indexed by name")
        #expect(try tier.image(forKey: "before", matching: box) == nil, "a version-1 file was served")
        #expect(!scratch.names().contains(name("before")), "the version-1 file was not deleted")
        #expect(!tier.contains(key: "before", matching: box))
        // Published by an older process while this one runs.
        let staged = scratch.parent + "/staged"
        try Data(Self.versionOneFile(image, key: "after")).write(to: URL(fileURLWithPath: staged))
        #expect(rename(staged, scratch.path + "/" + name("after")) == 0)
        #expect(waitUntil { tier.contains(key: "after", matching: box) } != nil)
        #expect(try tier.image(forKey: "after", matching: box) == nil, "a version-1 file was served")
        #expect(!scratch.names().contains(name("after")), "the version-1 file was not deleted")
        #expect(tier.statistics.invalidFiles == 2)
        // The key still works: a store writes a current file that hits.
        try tier.storeSynchronously(image, forKey: "after")
        #expect(try tier.image(forKey: "after", matching: box)?.hasSamePixels(as: image) == true)
        tier.close()
    }
}
