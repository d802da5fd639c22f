import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A read-only look at one image table's files: whether they are there and valid for the
/// format, how many entries the metadata lists, and how many bytes the files take.
///
/// Use it to inspect tables that running processes may be using — `strata stats` does.
/// Opening an ``ImageTable`` is not read-only (it creates the directory and the files, takes
/// the writer lock, and rebuilds a damaged metadata file); taking an inventory only opens the
/// existing `<name>.table` and `<name>.meta` read-only, reads the table's header page and the
/// metadata records with `pread`, and `stat`s `<name>.pins` and `<name>.lock`. It takes no
/// lock, maps nothing and writes nothing, so it never waits for a writer; a record being
/// written at that moment may read as damaged (counted in ``damagedRecords``).
///
/// Cost: one `pread` of the header page and a read of the metadata file (64 bytes per slot, in
/// 1 MiB pieces); memory for one dictionary entry per listed entity.
public struct ImageTableInventory: Sendable, Hashable {
    /// What the files say.
    public enum State: String, Sendable, Hashable {
        /// No `<name>.table` file: nothing stored yet for this format.
        case absent
        /// The table file's header matches the format and the metadata file belongs to it.
        case valid
        /// The table file does not match the format, or the metadata file is missing, truncated,
        /// damaged or retired: the next process that opens the table recreates or rebuilds it
        /// (see ``problem``). ``entries`` is 0.
        case needsRepair
    }

    /// The format the files were checked against.
    public var format: ImageTableFormat
    public var state: State
    /// Why the files need repair (``State/needsRepair``), else `nil`.
    public var problem: String?
    /// Entities the metadata lists (one per entity: the newest write when two slots name it).
    public var entries = 0
    /// Metadata records whose checksum does not verify (damage, or a write in progress).
    public var damagedRecords = 0
    /// Length of `<name>.table` (`st_size`; the file is sparse, see ``allocatedBytes``).
    public var tableFileBytes = 0
    /// Length of `<name>.meta`.
    public var metadataFileBytes = 0
    /// Length of `<name>.pins`.
    public var pinsFileBytes = 0
    /// Blocks the table, metadata and pins files occupy (`st_blocks` × 512), as
    /// ``ImageTable/diskUsage`` counts them.
    public var allocatedBytes = 0
    /// The entries' entity ids, when the inventory was asked to collect them (a valid table).
    public var entityIDs: [ImageEntityID] = []

    /// Takes the inventory of `format`'s files in `directory` (see the type's documentation:
    /// nothing is written).
    ///
    /// - Throws: ``ImageTableError/system(_:)`` when `directory` does not exist or cannot be
    ///   read, or a file exists and cannot be read (check the path and its permissions);
    ///   ``ImageTableError/invalidFormat(name:reason:)`` for a format that cannot be stored.
    ///   `collectingEntityIDs`: also keep every entry's id in ``entityIDs`` (16 bytes each).
    public init(directory: String, format: ImageTableFormat, collectingEntityIDs: Bool = false) throws(ImageTableError) {
        try format.validate()
        self.format = format
        state = .absent
        do throws(SystemCallError) {
            // The directory must be there and readable; nothing is created.
            _ = try FileDescriptor(directory: directory, create: false)
            let base = directory + "/" + format.name
            pinsFileBytes = try Self.sizes(of: base + ".pins", allocated: &allocatedBytes)
            metadataFileBytes = try Self.sizes(of: base + ".meta", allocated: &allocatedBytes)
            tableFileBytes = try Self.sizes(of: base + ".table", allocated: &allocatedBytes)
            guard let table = try Self.openIfPresent(base + ".table") else { return }
            try inspect(table: table, metaPath: base + ".meta", collectingEntityIDs: collectingEntityIDs)
        } catch {
            throw .system(error)
        }
    }

    /// The inventory of every format in `formats` (in their order) in `directory`.
    public static func scan(directory: String, formats: [ImageTableFormat]) throws(ImageTableError) -> [ImageTableInventory] {
        var result: [ImageTableInventory] = []
        for format in formats { result.append(try ImageTableInventory(directory: directory, format: format)) }
        return result
    }

    private mutating func inspect(
        table: borrowing FileDescriptor, metaPath: String, collectingEntityIDs: Bool
    ) throws(SystemCallError) {
        let layout = TableLayout(format: format)
        var header = [UInt8](repeating: 0, count: layout.pageSize)
        let n = try rethrowingTyped(SystemCallError.self) { try header.withUnsafeMutableBytes { try table.read(into: $0, at: 0) } }
        guard let generation = TableHeaderView.generation(in: Array(header[0..<n]), for: layout) else {
            return needsRepair("the table file's header does not match the format (the next writer recreates the table)")
        }
        guard let meta = try Self.openIfPresent(metaPath) else {
            return needsRepair("the metadata file is missing (the next writer rebuilds it from the entries)")
        }
        let slots = layout.maximumCount
        guard try meta.size() == MetadataLayout.fileLength(slots: slots) else {
            return needsRepair("the metadata file has the wrong length (the next writer rebuilds it from the entries)")
        }
        // Records in pieces of 1 MiB: the header first, then 64-byte records.
        let piece = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: piece, alignment: 64)
        defer { buffer.deallocate() }
        let headerRead = try meta.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<MetadataLayout.headerLength]), at: 0)
        let metaHeader = MetadataHeaderView(base: buffer.baseAddress!)
        guard headerRead == MetadataLayout.headerLength, metaHeader.isValid(generation: generation, slots: slots) else {
            return needsRepair("the metadata file does not belong to the table file (the next writer rebuilds it from the entries)")
        }
        if metaHeader.isRetired {
            return needsRepair("the metadata file is retired (a writer is replacing it)")
        }
        var newest: [ImageEntityID: UInt64] = [:]
        var slot = 0
        let perPiece = piece / MetadataLayout.recordLength
        while slot < slots {
            let count = min(perPiece, slots - slot)
            let offset = MetadataLayout.headerLength + slot * MetadataLayout.recordLength
            let bytes = count * MetadataLayout.recordLength
            let got = try meta.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<bytes]), at: offset)
            for i in 0..<got / MetadataLayout.recordLength {
                let record = MetadataRecordView(base: buffer.baseAddress! + i * MetadataLayout.recordLength)
                switch record.read(slot: slot + i) {
                case .empty: break
                case .corrupt: damagedRecords += 1
                case .valid(let r):
                    if let sequence = newest[r.id], sequence >= r.sequence { continue }
                    newest[r.id] = r.sequence
                }
            }
            if got < bytes { break }  // truncated since its size was read
            slot += count
        }
        entries = newest.count
        if collectingEntityIDs { entityIDs = Array(newest.keys) }
        state = .valid
    }

    private mutating func needsRepair(_ reason: String) {
        state = .needsRepair
        problem = reason
    }

    /// `path` opened read-only, or `nil` when it does not exist.
    private static func openIfPresent(_ path: String) throws(SystemCallError) -> FileDescriptor? {
        do {
            return try FileDescriptor(open: path, flags: O_RDONLY)
        } catch  where error.errno == ENOENT {
            return nil
        }
    }

    /// The length of `path` (0 when absent), adding its blocks to `allocated`.
    private static func sizes(of path: String, allocated: inout Int) throws(SystemCallError) -> Int {
        do {
            let st = try FileDescriptor.status(ofPath: path)
            allocated += Int(st.st_blocks) * 512
            return Int(st.st_size)
        } catch  where error.errno == ENOENT {
            return 0
        }
    }
}
