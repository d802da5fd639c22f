import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// Hostile or stale files, and instances that follow another instance's repairs: never a trap,
/// never another entity's pixels, never a live image overwritten.
@Suite(.serialized) struct ImageTableRobustnessTests {
    // Record bytes 40..<48 (last used) are outside the record checksum.
    @Test func hostileRecencyInARecordDoesNotCrash() throws {
        let dir = TempDirectory()
        do {
            let t = try ImageTable(directory: dir.path, format: testFormat(max: 2))
            try storePattern(t, 1)
        }
        try patchFile(dir.path + "/t.meta") { b in
            for i in 0..<8 { b[MetadataLayout.headerLength + MetadataRecordView.Field.lastUsed.offset + i] = 0xFF }
        }
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 2))
        let image = try #require(hit(table, 1))
        #expect(TableTestPattern.matches(image, n: 1, version: 1))
        try storePattern(table, 2)
        #expect(hit(table, 2) != nil)
    }

    // Header bytes 48..<56 (next write sequence) are outside the header checksum.
    @Test func hostileNextSequenceInTheHeaderDoesNotCrash() throws {
        let dir = TempDirectory()
        do {
            let t = try ImageTable(directory: dir.path, format: testFormat(max: 2))
            try storePattern(t, 1)
        }
        let next = MetadataHeaderView.Field.nextSequence.offset
        try patchFile(dir.path + "/t.meta") { b in for i in next..<next + 8 { b[i] = 0xFF } }
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 2))
        try storePattern(table, 2)
        try storePattern(table, 3)
        #expect(hit(table, 3).map { TableTestPattern.matches($0, n: 3, version: 1) } == true)
        // The entries still survive a metadata rebuild (their sequences stay ordered).
        unlink(dir.path + "/t.meta")
        let reopened = try ImageTable(directory: dir.path, format: testFormat(max: 2))
        #expect(hit(reopened, 3).map { TableTestPattern.matches($0, n: 3, version: 1) } == true)
        #expect(hit(reopened, 1) == nil, "slot reused by entity 3 must not serve entity 1")
    }

    // Following a metadata rebuild of the same table file keeps this instance's pins.
    @Test func pinsSurviveFollowingAMetadataRebuild() throws {
        let dir = TempDirectory()
        let a = try ImageTable(directory: dir.path, format: testFormat(max: 1))
        let held = try storePattern(a, 1)
        try patchFile(dir.path + "/t.meta") { bytes in for i in 0..<32 { bytes[i] ^= 0xFF } }  // corrupt header
        let b = try ImageTable(directory: dir.path, format: testFormat(max: 1))  // rebuilds, retires old meta
        _ = hit(a, 99)  // a follows the retirement (a miss is enough)
        #expect(throws: ImageTableError.tableFull(format: "t", maximumCount: 1), "b reused a slot that a still holds") {
            try storePattern(b, 2)
        }
        #expect(TableTestPattern.matches(held, n: 1, version: 1), "a's live image changed under it")
        #expect(hit(a, 1).map { TableTestPattern.matches($0, n: 1, version: 1) } == true)
    }

    // A reader whose metadata file was deleted (so it cannot be flagged retired) must not trust
    // its orphaned change counter for a slot another instance has rewritten.
    @Test func aReaderWithOrphanedMetadataNeverServesAnotherEntity() throws {
        let dir = TempDirectory()
        let a = try ImageTable(directory: dir.path, format: testFormat(max: 1))
        try storePattern(a, 1)
        do { _ = try #require(hit(a, 1)) }  // verified in a, then released
        unlink(dir.path + "/t.meta")
        let b = try ImageTable(directory: dir.path, format: testFormat(max: 1))  // rebuilds from trailers
        try storePattern(b, 2)  // reuses slot 0 (nothing pinned)
        if let image = hit(a, 1) {
            #expect(TableTestPattern.matches(image, n: 1, version: 1), "a served entity 2's pixels as entity 1")
        }
    }

    // A reader whose metadata was retired but whose replacement it cannot open answers from
    // nothing rather than from the retired index.
    @Test func aReaderThatCannotFollowARetirementReportsMisses() throws {
        let dir = TempDirectory()
        let a = try ImageTable(directory: dir.path, format: testFormat(max: 1))
        try storePattern(a, 1)
        do { _ = try #require(hit(a, 1)) }
        try patchFile(dir.path + "/t.meta") { bytes in for i in 0..<32 { bytes[i] ^= 0xFF } }  // corrupt header
        let b = try ImageTable(directory: dir.path, format: testFormat(max: 1))  // rebuilds, retires a's
        try storePattern(b, 2)  // reuses slot 0
        unlink(dir.path + "/t.meta")  // a cannot follow (it never repairs on reads)
        #expect(!a.contains(TableTestPattern.entityID(1)), "a answered from its retired index")
        #expect(hit(a, 1) == nil)
    }

    // A slot inside the file's size must not be a hole: claim() stores into it through the
    // shared mapping (SIGBUS on a full disk).
    @Test func slotsInsideTheFileAreReservedBeforeClaimWritesThem() throws {
        let dir = TempDirectory()
        let format = testFormat(max: 4)
        let layout = TableLayout(format: format)
        let a = try ImageTable(directory: dir.path, format: format)
        let b = try ImageTable(directory: dir.path, format: format)
        let held = try storePattern(a, 1)  // a pins slot 0
        try b.reset()  // new file; a's bit for slot 0 stays set
        try storePattern(b, 2)  // slot 0 excluded -> slot 1 reserved
        let fd = open(dir.path + "/t.table", O_RDONLY)
        defer { close(fd) }
        let dataAt = lseek(fd, off_t(layout.entryOffset(0)), 3 /* SEEK_DATA */)
        withExtendedLifetime(held) {}
        #expect(Int(dataAt) == layout.entryOffset(0), "slot 0 of the new file is a hole inside st_size (next data at \(dataAt))")
    }

    /// A rule failing every `posix_fallocate` on this test's table file with `code`.
    func failingReservations(_ dir: TempDirectory, _ code: Int32) -> SyscallFaults.Rule {
        SyscallFaults.Rule(call: "posix_fallocate", pathContains: dir.path + "/t.table", errno: code, times: nil)
    }

    // delete() stores into the slot too: it reserves the slot first (it could be a hole inside
    // the file), and a failed reservation changes nothing.
    @Test func deleteReservesTheSlotBeforeStoringIntoIt() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 2))
        try storePattern(table, 1)
        let (_, failures) = SyscallFaults.injecting(failingReservations(dir, EIO)) {
            #expect(throws: ImageTableError.system(SystemCallError(call: "posix_fallocate", path: dir.path + "/t.table", errno: EIO))) {
                try table.delete(TableTestPattern.entityID(1))
            }
        }
        #expect(failures == 1)
        #expect(table.contains(TableTestPattern.entityID(1)))
        #expect(hit(table, 1).map { TableTestPattern.matches($0, n: 1, version: 1) } == true)
    }

    // A failed reservation (ENOSPC on a full disk) is reported as what it is, not as an mmap
    // failure, and leaves a miss.
    @Test func aFailedReservationReportsTheRealError() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 2))
        _ = SyscallFaults.injecting(failingReservations(dir, ENOSPC)) {
            do {
                try storePattern(table, 1)
                Issue.record("a store succeeded although its disk reservation failed")
            } catch ImageTableError.system(let error) {
                #expect(error.call == "posix_fallocate")
                #expect(error.errno == ENOSPC)
                #expect(error.path == dir.path + "/t.table")
            } catch {
                Issue.record("unexpected error \(error)")
            }
        }
        #expect(hit(table, 1) == nil)
    }

    // A full disk while storing: a typed error naming the call and the file; the entries
    // already there (including the one being rewritten) are still served, and once there is
    // space again a store succeeds.
    @Test func noSpaceWhileStoringLeavesTheTableReadableAndWritable() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 4))
        for n in 0..<2 { try storePattern(table, n) }
        let noSpace = ImageTableError.system(SystemCallError(call: "posix_fallocate", path: dir.path + "/t.table", errno: ENOSPC))
        let (_, failures) = SyscallFaults.injecting(failingReservations(dir, ENOSPC)) {
            #expect(throws: noSpace, "a new entity") { try storePattern(table, 2) }
            #expect(throws: noSpace, "a new version of a stored entity") { try storePattern(table, 0, version: 2) }
            for n in 0..<2 {
                #expect(hit(table, n).map { TableTestPattern.matches($0, n: n, version: 1) } == true, "entity \(n) during the fault")
            }
        }
        #expect(failures == 2)
        #expect(hit(table, 2) == nil)
        #expect(hit(table, 0, version: 2) == nil)
        for n in 0..<2 {
            #expect(hit(table, n).map { TableTestPattern.matches($0, n: n, version: 1) } == true, "entity \(n) after the fault")
        }
        try storePattern(table, 2)
        try storePattern(table, 0, version: 2)
        #expect(hit(table, 2).map { TableTestPattern.matches($0, n: 2, version: 1) } == true)
        #expect(hit(table, 0, version: 2).map { TableTestPattern.matches($0, n: 0, version: 2) } == true)
        #expect(hit(table, 1).map { TableTestPattern.matches($0, n: 1, version: 1) } == true)
        // A fresh instance agrees.
        let reopened = try ImageTable(directory: dir.path, format: testFormat(max: 4))
        #expect(hit(reopened, 0, version: 2).map { TableTestPattern.matches($0, n: 0, version: 2) } == true)
    }

    // A writer must hold the lock of the file now at `<name>.lock`, which is what any other
    // instance opens and locks; a lock on a deleted file excludes nobody.
    @Test func aDeletedLockFileStillExcludesOtherWriters() throws {
        let dir = TempDirectory()
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 2))
        try storePattern(table, 1)
        unlink(dir.path + "/t.lock")
        var excluded = false
        try table.store(TableTestPattern.entityID(2), sourceVersion: 1) { canvas in
            TableTestPattern.draw(&canvas.image, n: 2, version: 1)
            // What another instance does to write: open (creating) the path and lock it.
            let fd = open(dir.path + "/t.lock", O_RDWR | O_CREAT, 0o644)
            defer { close(fd) }
            excluded = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK
        }
        #expect(excluded, "another writer could take the lock while this one was writing")
        #expect(hit(table, 2).map { TableTestPattern.matches($0, n: 2, version: 1) } == true)
    }
}
