import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// Image tables on a small, real file system that fills up: a store that cannot reserve its
/// entry fails with a typed error (never SIGBUS through the mapping), leaves its entry a miss,
/// the entries stored before are still served, and stores work again once space returns.
@Suite(.serialized, .enabled(if: SmallFilesystem.canMount, "\(SmallFilesystem.skipMessage)"))
struct TableFullDiskTests {
    @Test func aFullFileSystemFailsTableStoresWithATypedErrorAndTheTableKeepsServingAndRecovers() throws {
        let fs = try #require(SmallFilesystem(megabytes: 4))
        // 256 KiB entries, 32 slots: the table would need 8 MiB.
        let format = ImageTableFormat(name: "big", family: "test", size: PixelSize(width: 256, height: 256), maximumCount: 32)
        let table = try ImageTable(directory: fs.path + "/tables", format: format)
        #expect(fs.ballast("ballast", bytes: 1 << 20) == 1 << 20)
        var stored: [Int] = []
        var failure: (any Error)?
        for n in 0..<32 {
            do {
                try table.store(TableTestPattern.entityID(n), sourceVersion: 1) { canvas in
                    TableTestPattern.draw(&canvas.image, n: n, version: 1)
                }
                stored.append(n)
            } catch {
                failure = error
                break
            }
        }
        guard case .system(let error) = failure as? ImageTableError else {
            Issue.record("expected ImageTableError.system(ENOSPC) once the file system is full, got \(String(describing: failure))")
            return
        }
        #expect(error.errno == ENOSPC)
        #expect(stored.count >= 4 && stored.count < 32)
        let failed = stored.count
        #expect(table.image(for: TableTestPattern.entityID(failed), sourceVersion: 1) == nil, "the failed store is a miss")
        for n in stored {
            let image = table.image(for: TableTestPattern.entityID(n), sourceVersion: 1)
            #expect(image.map { TableTestPattern.matches($0, n: n, version: 1) } == true, "entity \(n) after ENOSPC")
        }

        // Space returns: the entry that failed can be stored, and a fresh instance agrees.
        try FileDescriptor.unlink(path: fs.path + "/ballast")
        try table.store(TableTestPattern.entityID(failed), sourceVersion: 1) { TableTestPattern.draw(&$0.image, n: failed, version: 1) }
        let reopened = try ImageTable(directory: fs.path + "/tables", format: format)
        for n in stored + [failed] {
            let image = reopened.image(for: TableTestPattern.entityID(n), sourceVersion: 1)
            #expect(image.map { TableTestPattern.matches($0, n: n, version: 1) } == true, "entity \(n) reopened")
        }
    }

    /// A table directory on a read-only file system: opening a table there is a typed error
    /// (EROFS) — nothing is created, nothing traps — and once the file system is writable again
    /// the same directory opens and stores.
    @Test func aReadOnlyFileSystemRefusesToOpenATableWithATypedErrorUntilItIsWritable() throws {
        let fs = try #require(SmallFilesystem(megabytes: 4))
        let dir = fs.path + "/tables"
        let format = ImageTableFormat(name: "small", family: "test", size: PixelSize(width: 32, height: 32), maximumCount: 8)
        do {
            let table = try ImageTable(directory: dir, format: format)
            try table.store(TableTestPattern.entityID(1), sourceVersion: 1) { TableTestPattern.draw(&$0.image, n: 1, version: 1) }
        }  // closed: a file open for writing would keep the remount from succeeding
        #expect(fs.remount(readOnly: true))
        do {
            _ = try ImageTable(directory: dir, format: format)
            Issue.record("a table opened read-write on a read-only file system")
        } catch {
            guard case .system(let error) = error else {
                Issue.record("expected ImageTableError.system(EROFS), got \(error)")
                return
            }
            #expect(error.errno == EROFS)
        }
        #expect(fs.remount(readOnly: false))
        let table = try ImageTable(directory: dir, format: format)
        let image = table.image(for: TableTestPattern.entityID(1), sourceVersion: 1)
        #expect(image.map { TableTestPattern.matches($0, n: 1, version: 1) } == true, "the entry survived")
    }

    /// A regular file where the table directory should be: a typed error naming the path.
    @Test func aFileInPlaceOfTheTableDirectoryIsATypedError() throws {
        let fs = try #require(SmallFilesystem(megabytes: 4))
        #expect(fs.ballast("tables", bytes: 10) == 10)
        let format = ImageTableFormat(name: "small", family: "test", size: PixelSize(width: 32, height: 32), maximumCount: 8)
        #expect(throws: ImageTableError.self) { _ = try ImageTable(directory: fs.path + "/tables", format: format) }
        #expect(throws: ImageTableError.self) { _ = try ImageTableCache(directory: fs.path + "/tables", formats: [format]) }
    }
}
