import StrataBase
/// The on-disk records of an image table, each a typed view over its bytes (in a mapping or a
/// buffer): named fields that read and write at their offsets. Every offset is written down
/// once, in the view's `Field` table below; nothing else in Tables/ uses raw offsets.
/// All integers are little-endian (the only byte order Strata runs on) and naturally aligned.

/// A field of a record: its byte offset and type.
package struct RecordField<Value: FixedWidthInteger>: Sendable {
    package let offset: Int
    package init(_ offset: Int) { self.offset = offset }
}

/// A view over one record's bytes (the memory must stay valid while the view is used).
package protocol RecordView {
    var base: UnsafeMutableRawPointer { get }
}

extension RecordView {
    @inline(__always) package func load<Value>(_ field: RecordField<Value>) -> Value {
        base.load(fromByteOffset: field.offset, as: Value.self)
    }

    @inline(__always) package func store<Value>(_ field: RecordField<Value>, _ value: Value) {
        base.storeBytes(of: value, toByteOffset: field.offset, as: Value.self)
    }

    /// The checksum of the record's first `count` bytes with `seed`.
    package func checksum(of count: Int, seed: UInt64) -> UInt64 {
        TableChecksum.hash(UnsafeRawBufferPointer(start: base, count: count), seed: seed)
    }
}

// MARK: - Table file header

/// The table file's header (first page): identifies the layout and the file's generation (a
/// random number that ties the metadata file to this table file).
///
/// | offset | field | type |
/// |---:|---|---|
/// | 0 | magic `STATBL01` | UInt64 |
/// | 8 | header version (2: XXH3 checksums; a table of version 1 is recreated) | UInt32 |
/// | 12 | pixel style · 13 content mode | UInt8 · UInt8 |
/// | 16 | width · 20 height · 24 bytes per row | UInt32 ×3 |
/// | 32 | entry length · 40 maximum count · 48 page size | UInt64 ×3 |
/// | 56 | generation | UInt64 |
/// | 64 | checksum of bytes 0..<64 | UInt64 |
package struct TableHeaderView: RecordView {
    package init(base: UnsafeMutableRawPointer) { self.base = base }

    package enum Field {
        package static let magic = RecordField<UInt64>(0)
        package static let version = RecordField<UInt32>(8)
        package static let style = RecordField<UInt8>(12)
        package static let mode = RecordField<UInt8>(13)
        package static let width = RecordField<UInt32>(16)
        package static let height = RecordField<UInt32>(20)
        package static let bytesPerRow = RecordField<UInt32>(24)
        package static let entryLength = RecordField<UInt64>(32)
        package static let maximumCount = RecordField<UInt64>(40)
        package static let pageSize = RecordField<UInt64>(48)
        package static let generation = RecordField<UInt64>(56)
        package static let checksum = RecordField<UInt64>(64)
    }
    package static let magic: UInt64 = 0x3130_4C42_4154_5453  // "STATBL01"
    /// 2 since the checksums are XXH3 (version 1: XXH64).
    package static let version: UInt32 = 2
    /// Bytes covered by the header (the rest of the page is zero).
    package static let length = 72
    /// Bytes that must equal those of a header encoded for the expected layout.
    package static let layoutBytes = 56
    package static let checksumSeed: UInt64 = 0x7461_626C

    package let base: UnsafeMutableRawPointer

    package var generation: UInt64 { load(Field.generation) }
    package var checksumIsValid: Bool { load(Field.checksum) == checksum(of: Field.checksum.offset, seed: Self.checksumSeed) }

    /// Writes a complete header for layout `l` and `generation`.
    package func write(_ l: TableLayout, generation: UInt64) {
        store(Field.magic, Self.magic)
        store(Field.version, Self.version)
        store(Field.style, l.style.rawValue)
        store(Field.mode, l.mode.rawValue)
        store(Field.width, UInt32(l.width))
        store(Field.height, UInt32(l.height))
        store(Field.bytesPerRow, UInt32(l.bytesPerRow))
        store(Field.entryLength, UInt64(l.entryLength))
        store(Field.maximumCount, UInt64(l.maximumCount))
        store(Field.pageSize, UInt64(l.pageSize))
        store(Field.generation, generation)
        store(Field.checksum, checksum(of: Field.checksum.offset, seed: Self.checksumSeed))
    }

    /// A header page for layout `l` and `generation`.
    package static func encode(_ l: TableLayout, generation: UInt64) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: l.pageSize)
        bytes.withUnsafeMutableBytes { TableHeaderView(base: $0.baseAddress!).write(l, generation: generation) }
        return bytes
    }

    /// The generation stored in `bytes` when they are a valid header for layout `l`.
    package static func generation(in bytes: [UInt8], for l: TableLayout) -> UInt64? {
        guard bytes.count >= length else { return nil }
        let expected = encode(l, generation: 0)
        var copy = bytes
        return copy.withUnsafeMutableBytes { raw -> UInt64? in
            let header = TableHeaderView(base: raw.baseAddress!)
            guard header.checksumIsValid, bytes[0..<layoutBytes] == expected[0..<layoutBytes] else { return nil }
            return header.generation
        }
    }
}

// MARK: - Entry trailer

/// The 64-byte trailer after an entry's rows, written after the pixels (magic first cleared,
/// then fields, then magic, then the checksum):
///
/// | offset | field | type |
/// |---:|---|---|
/// | 0 | magic `STRT` (0 = invalidated) | UInt32 |
/// | 4 | trailer version (2: XXH3 checksums) | UInt32 |
/// | 8 | content width · 12 content height | UInt32 ×2 |
/// | 16 | entity id high · 24 entity id low | UInt64 ×2 |
/// | 32 | source version · 40 write sequence | UInt64 ×2 |
/// | 48 | checksum of the rows (seeded with id and version) | UInt64 |
/// | 56 | checksum of bytes 0..<56 (seeded with the slot; 0 = invalidated) | UInt64 |
package struct EntryTrailerView: RecordView {
    package init(base: UnsafeMutableRawPointer) { self.base = base }

    package enum Field {
        package static let magic = RecordField<UInt32>(0)
        package static let version = RecordField<UInt32>(4)
        package static let width = RecordField<UInt32>(8)
        package static let height = RecordField<UInt32>(12)
        package static let idHigh = RecordField<UInt64>(16)
        package static let idLow = RecordField<UInt64>(24)
        package static let sourceVersion = RecordField<UInt64>(32)
        package static let sequence = RecordField<UInt64>(40)
        package static let pixelChecksum = RecordField<UInt64>(48)
        package static let checksum = RecordField<UInt64>(56)
    }
    package static let length = 64
    package static let magic: UInt32 = 0x5452_5453  // "STRT" little-endian
    package static let version: UInt32 = 2

    package let base: UnsafeMutableRawPointer

    /// The trailer's fields when its magic and own checksum verify (the pixels are not checked).
    package func read(slot: Int) -> EntryTrailer.Fields? {
        guard load(Field.magic) == Self.magic, load(Field.version) == Self.version,
            load(Field.checksum) == checksum(of: Field.checksum.offset, seed: UInt64(slot))
        else { return nil }
        return EntryTrailer.Fields(
            width: Int(load(Field.width)), height: Int(load(Field.height)),
            id: ImageEntityID(high: load(Field.idHigh), low: load(Field.idLow)),
            sourceVersion: load(Field.sourceVersion), sequence: load(Field.sequence), pixelChecksum: load(Field.pixelChecksum))
    }

    package func write(_ f: EntryTrailer.Fields, slot: Int) {
        store(Field.version, Self.version)
        store(Field.width, UInt32(f.width))
        store(Field.height, UInt32(f.height))
        store(Field.idHigh, f.id.high)
        store(Field.idLow, f.id.low)
        store(Field.sourceVersion, f.sourceVersion)
        store(Field.sequence, f.sequence)
        store(Field.pixelChecksum, f.pixelChecksum)
        store(Field.magic, Self.magic)
        store(Field.checksum, checksum(of: Field.checksum.offset, seed: UInt64(slot)))
    }

    /// Whether the trailer (valid magic) still names write `sequence` of `id`: a cheap check
    /// for an entry whose pixels were verified before (no checksums).
    package func names(sequence: UInt64, id: ImageEntityID) -> Bool {
        load(Field.magic) == Self.magic && load(Field.sequence) == sequence
            && load(Field.idHigh) == id.high && load(Field.idLow) == id.low
    }

    package func invalidate() {
        store(Field.magic, 0)
        store(Field.checksum, 0)
    }
}

/// What an entry's trailer vouches for.
package enum EntryTrailer {
    package struct Fields: Hashable {
        package init(width: Int, height: Int, id: ImageEntityID, sourceVersion: UInt64, sequence: UInt64, pixelChecksum: UInt64) {
            self.width = width
            self.height = height
            self.id = id
            self.sourceVersion = sourceVersion
            self.sequence = sequence
            self.pixelChecksum = pixelChecksum
        }

        package var width: Int
        package var height: Int
        package var id: ImageEntityID
        package var sourceVersion: UInt64
        package var sequence: UInt64
        package var pixelChecksum: UInt64
    }

    package static func pixelChecksum(_ rows: UnsafeRawBufferPointer, id: ImageEntityID, sourceVersion: UInt64) -> UInt64 {
        TableChecksum.hash(rows, seed: id.low ^ sourceVersion ^ (id.high &* TableChecksum.prime3))
    }
}

// MARK: - Metadata file

/// The metadata file: a 64-byte header then one 64-byte record per slot, mapped shared so that
/// an update touches one record (never rewritten whole) and other processes see it at once.
package enum MetadataLayout {
    package static let headerLength = 64
    package static let recordLength = 64

    package static func fileLength(slots: Int) -> Int { headerLength + slots * recordLength }

    /// The view of `slot`'s record in the metadata mapped at `base`.
    package static func record(_ base: UnsafeMutableRawPointer, _ slot: Int) -> MetadataRecordView {
        MetadataRecordView(base: base + headerLength + slot * recordLength)
    }
}

/// The metadata file's header:
///
/// | offset | field | type |
/// |---:|---|---|
/// | 0 | magic `STMETA01` · 8 version (2: XXH3 checksums) | UInt64 ×2 |
/// | 16 | table generation · 24 slot count | UInt64 ×2 |
/// | 32 | checksum of bytes 0..<32 | UInt64 |
/// | 40 | change counter (bumped on every claim, write and delete) | UInt64 |
/// | 48 | next write sequence (outside the checksum: checked for plausibility) | UInt64 |
/// | 56 | retired flag (1 = replaced: instances must reopen) | UInt64 |
package struct MetadataHeaderView: RecordView {
    package init(base: UnsafeMutableRawPointer) { self.base = base }

    package enum Field {
        package static let magic = RecordField<UInt64>(0)
        package static let version = RecordField<UInt64>(8)
        package static let generation = RecordField<UInt64>(16)
        package static let slotCount = RecordField<UInt64>(24)
        package static let checksum = RecordField<UInt64>(32)
        package static let change = RecordField<UInt64>(40)
        package static let nextSequence = RecordField<UInt64>(48)
        package static let retired = RecordField<UInt64>(56)
    }
    package static let magic: UInt64 = 0x3130_4154_454D_5453  // "STMETA01"
    package static let version: UInt64 = 2
    package static let checksumSeed: UInt64 = 0x6D65_7461

    package let base: UnsafeMutableRawPointer

    package var change: UInt64 {
        get { load(Field.change) }
        nonmutating set { store(Field.change, newValue) }
    }
    package var nextSequence: UInt64 {
        get { load(Field.nextSequence) }
        nonmutating set { store(Field.nextSequence, newValue) }
    }
    package var isRetired: Bool { load(Field.retired) != 0 }
    package func retire() { store(Field.retired, 1) }

    package func write(generation: UInt64, slots: Int, nextSequence: UInt64) {
        store(Field.magic, Self.magic)
        store(Field.version, Self.version)
        store(Field.generation, generation)
        store(Field.slotCount, UInt64(slots))
        store(Field.checksum, checksum(of: Field.checksum.offset, seed: Self.checksumSeed))
        store(Field.change, 1)
        store(Field.nextSequence, nextSequence)
        store(Field.retired, 0)
    }

    package func isValid(generation: UInt64, slots: Int) -> Bool {
        load(Field.magic) == Self.magic && load(Field.version) == Self.version && load(Field.generation) == generation
            && load(Field.slotCount) == UInt64(slots)
            && load(Field.checksum) == checksum(of: Field.checksum.offset, seed: Self.checksumSeed)
    }
}

/// One slot's metadata record:
///
/// | offset | field | type |
/// |---:|---|---|
/// | 0 | entity id high · 8 entity id low | UInt64 ×2 |
/// | 16 | source version · 24 write sequence | UInt64 ×2 |
/// | 32 | state (0 empty, 1 valid) · 36 reserved (0) | UInt32 ×2 |
/// | 40 | last used, ns since 1970 (outside the checksum: recency) | UInt64 |
/// | 48 | checksum of bytes 0..<40 seeded with the slot (0 when empty) | UInt64 |
/// | 56 | unused | UInt64 |
package struct MetadataRecordView: RecordView {
    package enum Field {
        package static let idHigh = RecordField<UInt64>(0)
        package static let idLow = RecordField<UInt64>(8)
        package static let sourceVersion = RecordField<UInt64>(16)
        package static let sequence = RecordField<UInt64>(24)
        package static let state = RecordField<UInt32>(32)
        package static let reserved = RecordField<UInt32>(36)
        package static let lastUsed = RecordField<UInt64>(40)
        package static let checksum = RecordField<UInt64>(48)
    }

    package struct Record: Hashable {
        package init(id: ImageEntityID, sourceVersion: UInt64, sequence: UInt64) {
            self.id = id
            self.sourceVersion = sourceVersion
            self.sequence = sequence
        }

        package var id: ImageEntityID
        package var sourceVersion: UInt64
        package var sequence: UInt64
    }

    package enum State {
        case empty
        case valid(Record)
        case corrupt
    }

    package let base: UnsafeMutableRawPointer

    /// Whether the record claims to be valid (its checksum not checked): a cheap test for
    /// slot choice.
    package var isMarkedValid: Bool { load(Field.state) == 1 }
    package var sequence: UInt64 { load(Field.sequence) }
    package var lastUsed: UInt64 {
        get { load(Field.lastUsed) }
        nonmutating set { store(Field.lastUsed, newValue) }
    }

    private func expectedChecksum(slot: Int) -> UInt64 {
        checksum(of: Field.lastUsed.offset, seed: UInt64(slot) &+ 0x7265_636F)
    }

    package func read(slot: Int) -> State {
        let state = load(Field.state)
        if state == 0 && load(Field.checksum) == 0 { return .empty }
        guard load(Field.checksum) == expectedChecksum(slot: slot) else { return .corrupt }
        guard state == 1 else { return .empty }
        return .valid(
            Record(
                id: ImageEntityID(high: load(Field.idHigh), low: load(Field.idLow)),
                sourceVersion: load(Field.sourceVersion), sequence: load(Field.sequence)))
    }

    /// Writes `record` (or an empty record when `nil`) and its recency.
    package func write(_ record: Record?, slot: Int, lastUsed: UInt64) {
        if let record {
            store(Field.idHigh, record.id.high)
            store(Field.idLow, record.id.low)
            store(Field.sourceVersion, record.sourceVersion)
            store(Field.sequence, record.sequence)
            store(Field.state, 1)
            store(Field.reserved, 0)
        } else {
            for field in [Field.idHigh, Field.idLow, Field.sourceVersion, Field.sequence] { store(field, 0) }
            store(Field.state, 0)
            store(Field.reserved, 0)
        }
        store(Field.lastUsed, lastUsed)
        store(Field.checksum, record == nil ? 0 : expectedChecksum(slot: slot))
    }
}
