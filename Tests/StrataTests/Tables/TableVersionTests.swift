import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// Tables written before the checksums became XXH3 (version 1, XXH64 checksums) are recreated:
/// none of their entries is served.
@Suite struct TableVersionTests {
    /// Rewrites the table header and the metadata header at `dir` as version 1 wrote them:
    /// version 1 and XXH64 checksums (valid ones, so only the version refuses them).
    static func downgradeToVersionOne(_ dir: String) throws {
        try patchFile(dir + "/t.table") { b in
            b.withUnsafeMutableBytes { raw in
                let header = TableHeaderView(base: raw.baseAddress!)
                header.store(TableHeaderView.Field.version, 1)
                let sum = XXHash.xxh64(
                    UnsafeRawBufferPointer(start: raw.baseAddress!, count: TableHeaderView.Field.checksum.offset),
                    seed: TableHeaderView.checksumSeed)
                header.store(TableHeaderView.Field.checksum, sum)
            }
        }
        try patchFile(dir + "/t.meta") { b in
            b.withUnsafeMutableBytes { raw in
                let header = MetadataHeaderView(base: raw.baseAddress!)
                header.store(MetadataHeaderView.Field.version, 1)
                let sum = XXHash.xxh64(
                    UnsafeRawBufferPointer(start: raw.baseAddress!, count: MetadataHeaderView.Field.checksum.offset),
                    seed: MetadataHeaderView.checksumSeed)
                header.store(MetadataHeaderView.Field.checksum, sum)
            }
        }
    }

    @Test func aVersionOneTableIsRecreatedAndServesNothingOfIt() throws {
        let dir = TempDirectory()
        do {
            let t = try ImageTable(directory: dir.path, format: testFormat(max: 4))
            try storePattern(t, 1)
            try storePattern(t, 2)
        }
        try Self.downgradeToVersionOne(dir.path)
        let table = try ImageTable(directory: dir.path, format: testFormat(max: 4))
        #expect(hit(table, 1) == nil, "an entry of a version-1 table was served")
        #expect(hit(table, 2) == nil, "an entry of a version-1 table was served")
        let fd = try FileDescriptor(open: dir.path + "/t.table", flags: O_RDONLY)
        let bytes = try fd.readAll()
        let version = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self) }
        #expect(version == TableHeaderView.version && version == 2, "the table file was not rewritten")
        try storePattern(table, 3)
        #expect(hit(table, 3).map { TableTestPattern.matches($0, n: 3, version: 1) } == true)
    }

    @Test func aVersionOneTrailerDoesNotVerify() throws {
        let trailer = EntryTrailer.Fields(
            width: 20, height: 12, id: ImageEntityID(high: 1, low: 2), sourceVersion: 3, sequence: 4, pixelChecksum: 5)
        var bytes = [UInt8](repeating: 0, count: EntryTrailerView.length)
        bytes.withUnsafeMutableBytes { raw in
            let view = EntryTrailerView(base: raw.baseAddress!)
            view.write(trailer, slot: 7)
            #expect(view.read(slot: 7) == trailer)
            // As version 1 wrote it: version 1, an XXH64 checksum seeded with the slot.
            view.store(EntryTrailerView.Field.version, 1)
            let sum = XXHash.xxh64(
                UnsafeRawBufferPointer(start: raw.baseAddress!, count: EntryTrailerView.Field.checksum.offset), seed: 7)
            view.store(EntryTrailerView.Field.checksum, sum)
            #expect(view.read(slot: 7) == nil)
        }
    }

    @Test func anEntityIDIsTheKeysOneDigest() {
        // One derivation of a key's identities: the table id is the key's digest (the first 128
        // bits of its SHA-256), the same in every process — and the disk tier's file name.
        let id = ImageEntityID(hashing: "photo/1")
        #expect(id == CacheKey("photo/1").entityID && id == ImageEntityID(CacheKey("photo/1")))
        #expect(id.high == 0xd86f_7b2f_4f01_c898 && id.low == 0x8c44_a71f_97ef_72a4)
        #expect(
            DiskFileName(digest: CacheKey("photo/1").entityID, variant: VariantDescriptor(size: PixelSize(width: 1, height: 1))).string
                .hasPrefix("d86f7b2f4f01c8988c44a71f97ef72a4-"))
    }
}
