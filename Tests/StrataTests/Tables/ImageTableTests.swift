import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

func testFormat(
    _ name: String = "t", size: PixelSize = PixelSize(width: 20, height: 12), max: Int = 8,
    style: PixelStyle = .default, family: String = "test", mode: ContentMode = .fill
) -> ImageTableFormat {
    ImageTableFormat(name: name, family: family, size: size, style: style, mode: mode, maximumCount: max)
}

@discardableResult
func storePattern(_ table: ImageTable, _ n: Int, version: UInt64 = 1) throws -> PixelImage {
    try table.store(TableTestPattern.entityID(n), sourceVersion: version) { canvas in
        TableTestPattern.draw(&canvas.image, n: n, version: version)
    }
}

func hit(_ table: ImageTable, _ n: Int, version: UInt64 = 1) -> PixelImage? {
    table.image(for: TableTestPattern.entityID(n), sourceVersion: version)
}

/// Applies `body` to the bytes of the file at `path` (read, modify, write back).
func patchFile(_ path: String, _ body: (inout [UInt8]) -> Void) throws {
    let fd = try FileDescriptor(open: path, flags: O_RDWR)
    var bytes = try fd.readAll()
    body(&bytes)
    _ = ftruncate(fd.rawValue, off_t(bytes.count))
    try bytes.withUnsafeBytes { try fd.write($0, at: 0) }
}

@Suite struct ImageTableTests {
    @Test func storedImageComesBackFromTheMappedSlot() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat())
        let written = try storePattern(table, 1)
        #expect(TableTestPattern.matches(written, n: 1, version: 1))
        let image = try #require(hit(table, 1))
        #expect(image.size == PixelSize(width: 20, height: 12))
        #expect(image.storageKind == .tableSlot)
        #expect(image.isRowAligned)
        #expect(TableTestPattern.matches(image, n: 1, version: 1))
        #expect(hit(table, 2) == nil)
        #expect(hit(table, 1, version: 2) == nil, "another source version is stale")
    }

    @Test func entriesSurviveReopening() throws {
        let dir = TempDirectory()
        do {
            let table = try ImageTable(directory: dir.path, format: testFormat())
            for n in 0..<5 { try storePattern(table, n, version: UInt64(n + 1)) }
        }
        let table = try ImageTable(directory: dir.path, format: testFormat())
        #expect(table.count == 5)
        for n in 0..<5 {
            let image = try #require(hit(table, n, version: UInt64(n + 1)))
            #expect(TableTestPattern.matches(image, n: n, version: UInt64(n + 1)))
        }
    }

    @Test(arguments: PixelStyle.allCases)
    func everyStyleRoundTrips(style: PixelStyle) throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(style: style))
        try storePattern(table, 3)
        let image = try #require(hit(table, 3))
        #expect(image.style == style)
        #expect(image.bytesPerRow % 64 == 0)
        #expect(TableTestPattern.matches(image, n: 3, version: 1))
    }

    @Test func flippedBitsInPixelsOrTrailerAreMisses() throws {
        let dir = TempDirectory()
        let format = testFormat()
        let layout = TableLayout(format: format)
        do {
            let table = try ImageTable(directory: dir.path, format: format)
            for n in 0..<4 { try storePattern(table, n) }
        }
        // Slots are handed out in order: entity n lives in slot n.
        try patchFile(dir.path + "/t.table") { bytes in
            bytes[layout.entryOffset(1) + 123] ^= 0x10  // a pixel bit
            bytes[layout.entryOffset(2) + layout.trailerOffset + 20] ^= 0x01  // a trailer bit (entity id)
        }
        let table = try ImageTable(directory: dir.path, format: format)
        #expect(hit(table, 1) == nil)
        #expect(hit(table, 2) == nil)
        for n in [0, 3] {
            let image = try #require(hit(table, n))
            #expect(TableTestPattern.matches(image, n: n, version: 1))
        }
    }

    @Test func aZeroedPageIsAMiss() throws {
        let dir = TempDirectory()
        let format = testFormat(size: PixelSize(width: 64, height: 40))  // 256 B rows: 3 pages per entry
        let layout = TableLayout(format: format)
        #expect(layout.entryLength >= 2 * layout.pageSize)
        do {
            let table = try ImageTable(directory: dir.path, format: format)
            for n in 0..<3 { try storePattern(table, n) }
        }
        try patchFile(dir.path + "/t.table") { bytes in
            let start = layout.entryOffset(1) + layout.pageSize
            for i in start..<start + layout.pageSize { bytes[i] = 0 }
        }
        let table = try ImageTable(directory: dir.path, format: format)
        #expect(hit(table, 1) == nil)
        #expect(try #require(hit(table, 0)).hasSamePixels(as: try #require(hit(table, 0))))
        #expect(TableTestPattern.matches(try #require(hit(table, 2)), n: 2, version: 1))
    }

    enum MetadataDamage: String, CaseIterable { case missing, truncated, garbage, zeroed, oneRecord }

    @Test(arguments: MetadataDamage.allCases)
    func damagedMetadataIsRebuiltFromTrailers(damage: MetadataDamage) throws {
        let dir = TempDirectory()
        let format = testFormat(max: 6)
        do {
            let table = try ImageTable(directory: dir.path, format: format)
            for n in 0..<6 { try storePattern(table, n, version: 7) }
        }
        let meta = dir.path + "/t.meta"
        switch damage {
        case .missing: unlink(meta)
        case .truncated: try patchFile(meta) { $0.removeLast($0.count / 2) }
        case .garbage:
            try patchFile(meta) { bytes in
                var x: UInt32 = 12345
                for i in bytes.indices {
                    x = x &* 1_103_515_245 &+ 12345
                    bytes[i] = UInt8(truncatingIfNeeded: x >> 16)
                }
            }
        case .zeroed: try patchFile(meta) { bytes in for i in bytes.indices { bytes[i] = 0 } }
        case .oneRecord: try patchFile(meta) { $0[MetadataLayout.headerLength + 2 * MetadataLayout.recordLength + 3] ^= 0xFF }
        }
        let table = try ImageTable(directory: dir.path, format: format)
        if damage == .zeroed {
            // A valid-looking empty index is not "corrupt": the header check fails, so it is rebuilt too.
        }
        for n in 0..<6 {
            let image = try #require(hit(table, n, version: 7), "entity \(n) after \(damage) metadata")
            #expect(TableTestPattern.matches(image, n: n, version: 7))
        }
        // The table keeps working: new writes and reopening.
        try storePattern(table, 1, version: 8)
        #expect(TableTestPattern.matches(try #require(hit(table, 1, version: 8)), n: 1, version: 8))
    }

    @Test func aLiveInstanceFollowsAMetadataRebuildByAnother() throws {
        let dir = TempDirectory()
        let a = try ImageTable(directory: dir.path, format: testFormat(max: 4))
        for n in 0..<4 { try storePattern(a, n) }
        try patchFile(dir.path + "/t.meta") { bytes in for i in 0..<32 { bytes[i] ^= 0xFF } }  // corrupt header
        let b = try ImageTable(directory: dir.path, format: testFormat(max: 4))  // rebuilds from trailers
        #expect(b.count == 4)
        for n in 4..<8 { try storePattern(b, n) }  // replaces all of a's entries
        for n in 0..<8 {
            if let image = hit(a, n) { #expect(TableTestPattern.matches(image, n: n, version: 1), "entity \(n)") }
        }
        #expect((0..<8).filter { hit(a, $0) != nil } == [4, 5, 6, 7])
    }

    @Test func theMaximumCountIsHard() throws {
        let dir = TempDirectory()
        let format = testFormat(max: 4)
        let layout = TableLayout(format: format)
        let table = try ImageTable(directory: dir.path, format: format)
        for n in 0..<25 { try storePattern(table, n) }
        #expect(table.count == 4)
        var st = stat()
        stat(dir.path + "/t.table", &st)
        #expect(Int(st.st_size) <= layout.entriesOffset + 4 * layout.entryLength)
        #expect((0..<25).filter { hit(table, $0) != nil } == [21, 22, 23, 24])
    }

    @Test func leastRecentlyUsedSlotIsReplacedFirst() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 3))
        for n in 0..<3 { try storePattern(table, n) }
        _ = hit(table, 0)  // order of use now: 1, 2, 0
        try storePattern(table, 3)  // replaces 1
        #expect(hit(table, 1) == nil)
        _ = hit(table, 2)  // order: 0, 3, 2
        try storePattern(table, 4)  // replaces 0
        #expect(hit(table, 0) == nil)
        try storePattern(table, 5)  // replaces 3
        #expect((0..<6).filter { hit(table, $0) != nil } == [2, 4, 5])
    }

    @Test func aPinnedSlotSurvivesEvictionPressure() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 2))
        let pinned = try storePattern(table, 100)
        for n in 0..<50 { try storePattern(table, n) }
        #expect(TableTestPattern.matches(pinned, n: 100, version: 1))
        #expect(hit(table, 100) != nil)
        // With every slot held, the hard maximum makes a write fail instead of reusing a slot.
        let second = try #require(hit(table, 49))
        #expect(throws: ImageTableError.tableFull(format: "t", maximumCount: 2)) { try storePattern(table, 7) }
        #expect(TableTestPattern.matches(pinned, n: 100, version: 1))
        #expect(TableTestPattern.matches(second, n: 49, version: 1))
    }

    @Test func rewritingAPinnedEntityUsesAnotherSlot() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 3))
        let old = try storePattern(table, 1, version: 1)
        try storePattern(table, 1, version: 2)
        #expect(TableTestPattern.matches(old, n: 1, version: 1))
        #expect(hit(table, 1, version: 1) == nil)
        #expect(TableTestPattern.matches(try #require(hit(table, 1, version: 2)), n: 1, version: 2))
    }

    @Test func anotherInstanceNeverReusesASlotPinnedHere() throws {
        // Two instances on one directory behave like two processes (own flock, own pin segment).
        let dir = TempDirectory()
        let a = try ImageTable(directory: dir.path, format: testFormat(max: 3))
        let b = try ImageTable(directory: dir.path, format: testFormat(max: 3))
        try storePattern(a, 1)
        let held = try #require(hit(a, 1))
        for n in 10..<40 { try storePattern(b, n) }
        #expect(TableTestPattern.matches(held, n: 1, version: 1))
        #expect(hit(b, 1) != nil, "b sees a's entry and never evicted it")
        let fromB = try #require(hit(b, 39))
        #expect(TableTestPattern.matches(fromB, n: 39, version: 1), "a reads b's writes")
        #expect(TableTestPattern.matches(try #require(hit(a, 39)), n: 39, version: 1))
    }

    @Test func canvasMayShrinkTheContentOrBeReplaced() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(mode: .fit))
        let fit = try table.store(TableTestPattern.entityID(1), sourceVersion: 1) { canvas in
            TableTestPattern.draw(&canvas.image, n: 1, version: 1)
            canvas.contentSize = PixelSize(width: 20, height: 9)
        }
        #expect(fit.size == PixelSize(width: 20, height: 9))
        #expect(try #require(hit(table, 1)).size == PixelSize(width: 20, height: 9))
        var replacement = PixelImage(width: 10, height: 12)
        TableTestPattern.draw(&replacement, n: 2, version: 1)
        let replaced = try table.store(TableTestPattern.entityID(2), sourceVersion: 1) { canvas in canvas.image = replacement }
        #expect(replaced.hasSamePixels(as: replacement))
        #expect(throws: ImageTableError.self) {
            try table.setImage(PixelImage(width: 21, height: 12), for: TableTestPattern.entityID(3), sourceVersion: 1)
        }
        #expect(throws: ImageTableError.self) {
            try table.setImage(PixelImage(width: 4, height: 4, style: .gray8), for: TableTestPattern.entityID(3), sourceVersion: 1)
        }
        #expect(hit(table, 3) == nil)
    }

    @Test func aFailedDrawLeavesAMissAndTheTableUsable() throws {
        struct Boom: Error {}
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat())
        #expect(throws: Boom.self) {
            try table.store(TableTestPattern.entityID(1), sourceVersion: 1) { canvas in
                TableTestPattern.draw(&canvas.image, n: 1, version: 1)
                throw Boom()
            }
        }
        #expect(hit(table, 1) == nil)
        try storePattern(table, 1)
        #expect(TableTestPattern.matches(try #require(hit(table, 1)), n: 1, version: 1))
    }

    @Test func deleteResetAndCompactKeepHandedOutImagesValid() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 64))
        for n in 0..<64 { try storePattern(table, n) }
        let held = try #require(hit(table, 5))
        try table.delete(TableTestPattern.entityID(5))
        #expect(hit(table, 5) == nil)
        for n in 0..<60 { try table.delete(TableTestPattern.entityID(n)) }
        let before = table.diskUsage
        let freed = try table.compact()
        #expect(freed > 0)
        #expect(table.diskUsage < before)
        #expect((0..<64).filter { hit(table, $0) != nil } == [60, 61, 62, 63])
        #expect(TableTestPattern.matches(try #require(hit(table, 62)), n: 62, version: 1))
        // Another instance follows the compaction.
        let other = try ImageTable(directory: dir.path, format: testFormat(max: 64))
        #expect(TableTestPattern.matches(try #require(hit(other, 61)), n: 61, version: 1))
        try table.reset()
        #expect(table.count == 0)
        #expect(hit(other, 61) == nil, "the other instance notices the reset")
        #expect(TableTestPattern.matches(held, n: 5, version: 1))
        try storePattern(other, 9)
        #expect(TableTestPattern.matches(try #require(hit(table, 9)), n: 9, version: 1))
    }

    @Test func aFormatChangeReplacesTheTable() throws {
        let dir = TempDirectory()
        do {
            let table = try ImageTable(directory: dir.path, format: testFormat())
            try storePattern(table, 1)
        }
        let table = try ImageTable(directory: dir.path, format: testFormat(size: PixelSize(width: 16, height: 16)))
        #expect(hit(table, 1) == nil)
        try storePattern(table, 1)
        #expect(try #require(hit(table, 1)).size == PixelSize(width: 16, height: 16))
    }

    @Test func invalidFormatsAreRefused() {
        let dir = TempDirectory()
        for bad in [
            testFormat("../x"), testFormat(".hidden"), testFormat(max: 0),
            testFormat(size: PixelSize(width: 0, height: 3)),
        ] {
            #expect(throws: ImageTableError.self) { try ImageTable(directory: dir.path, format: bad) }
        }
        var badPermissions = testFormat()
        badPermissions.filePermissions = 0o400
        #expect(throws: ImageTableError.self) { try ImageTable(directory: dir.path, format: badPermissions) }
    }

    @Test func filePermissionsAreApplied() throws {
        let dir = TempDirectory()
        var format = testFormat()
        format.filePermissions = 0o640
        let table = try ImageTable(directory: dir.path, format: format)
        try storePattern(table, 1)
        for suffix in ["table", "meta", "pins", "lock"] {
            var st = stat()
            #expect(stat(dir.path + "/t." + suffix, &st) == 0)
            #expect(st.st_mode & 0o777 == 0o640, "t.\(suffix)")
        }
    }
}
