import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// ``DiskDirectoryInventory`` and ``ImageTableInventory`` count what a tier would, and leave
/// the directory exactly as they found it (unlike opening a tier, which cleans up).
@Suite struct DirectoryInventoryTests {
    @Test func theDiskInventoryCountsFilesKeysAndBytesAndChangesNothing() throws {
        let scratch = ScratchDirectory()
        do {
            let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.useInotify = false })
            try tier.storeSynchronously(patternImage(width: 40, height: 30, seed: 1), forKey: "a")
            try tier.storeSynchronously(patternImage(width: 80, height: 60, seed: 2), forKey: "a")
            try tier.storeSynchronously(patternImage(width: 40, height: 30, seed: 3), forKey: "b", mode: .fill)
            let charged = tier.statistics.bytes
            tier.close()

            let foreign = try makeForeignTemporaryFile(in: scratch.path)
            try Data("not a cache file".utf8).write(to: URL(fileURLWithPath: scratch.path + "/notes.txt"))
            let before = try DirectorySnapshot(of: scratch.path)

            let inventory = try DiskDirectoryInventory(scanning: scratch.path)
            #expect(inventory.files == 3 && inventory.keys == 2)
            #expect(inventory.chargedBytes == charged)
            #expect(inventory.fileBytes > 40 * 30 * 4 * 2 + 80 * 60 * 4 && inventory.fileBytes < charged)
            #expect(inventory.temporaryFiles == 1 && inventory.temporaryBytes == 5000)
            #expect(inventory.otherEntries == 1 && inventory.vanished == 0)
            #expect(inventory.variants[VariantDescriptor(size: PixelSize(width: 40, height: 30))] == 1)
            #expect(inventory.variants[VariantDescriptor(size: PixelSize(width: 40, height: 30), mode: .fill)] == 1)
            #expect(inventory.variants.values.reduce(0, +) == 3)
            let unmeasured = try DiskDirectoryInventory(scanning: scratch.path, measuringFiles: false)
            #expect(unmeasured.files == 3 && unmeasured.fileBytes == 0 && !unmeasured.measured)

            #expect(try DirectorySnapshot(of: scratch.path) == before, "taking the inventory changed the directory")

            // The foreign temporary file is one a tier would delete: the restraint above matters.
            let reopened = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.useInotify = false })
            reopened.close()
            #expect(!FileManager.default.fileExists(atPath: scratch.path + "/" + foreign))
        }
    }

    @Test func aMissingDiskDirectoryIsAnErrorAndIsNotCreated() throws {
        let scratch = ScratchDirectory()
        #expect(throws: DiskTierError.self) { try DiskDirectoryInventory(scanning: scratch.path) }
        do {
            _ = try DiskDirectoryInventory(scanning: scratch.path)
        } catch {
            guard case .cannotUseDirectory(let path, let underlying) = error else {
                Issue.record("unexpected \(error)")
                return
            }
            #expect(path == scratch.path && underlying.errno == ENOENT)
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.path))
    }

    @Test func theTableInventoryCountsEntriesAndChangesNothing() throws {
        let dir = TempDirectory()
        let format = testFormat("thumbs", max: 8)
        do {
            let table = try ImageTable(directory: dir.path, format: format)
            for n in 1...5 { try storePattern(table, n) }
            try table.delete(TableTestPattern.entityID(2))
            try table.flush()
        }
        let before = try DirectorySnapshot(of: dir.path)
        let inventory = try ImageTableInventory(directory: dir.path, format: format)
        #expect(inventory.state == .valid && inventory.problem == nil)
        #expect(inventory.entries == 4 && inventory.damagedRecords == 0)
        #expect(inventory.tableFileBytes > 0 && inventory.metadataFileBytes == 64 + 8 * 64 && inventory.allocatedBytes > 0)

        let absent = try ImageTableInventory(directory: dir.path, format: testFormat("other"))
        #expect(absent.state == .absent && absent.entries == 0 && absent.tableFileBytes == 0)
        // Another size: the files do not belong to this format.
        let changed = try ImageTableInventory(
            directory: dir.path, format: testFormat("thumbs", size: PixelSize(width: 30, height: 30), max: 8))
        #expect(changed.state == .needsRepair && changed.problem != nil && changed.entries == 0)
        #expect(try DirectorySnapshot(of: dir.path) == before, "taking the inventory changed the directory")

        #expect(throws: ImageTableError.self) { try ImageTableInventory(directory: dir.path + "/missing", format: format) }
        #expect(!FileManager.default.fileExists(atPath: dir.path + "/missing"))
    }
}
