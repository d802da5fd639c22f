#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A shared read-write mapping of part of a file, unmapped when the last reference goes away
/// (table slots handed out as images keep their chunk alive).
final class TableMapping: @unchecked Sendable {
    // Immutable after init; the bytes are shared with other processes by design.
    let base: UnsafeMutableRawPointer
    let length: Int

    init(fd: Int32, offset: Int, length: Int, path: String) throws(SystemCallError) {
        let address = try Syscall.retrying("mmap", path: path) {
            Int(bitPattern: mmap(nil, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off_t(offset)))
        }
        self.base = UnsafeMutableRawPointer(bitPattern: address)!
        self.length = length
    }

    deinit { munmap(base, length) }
}

/// An open file closed on deinit (a class so that mappings and images can share it).
final class TableFileHandle: @unchecked Sendable {
    let fd: Int32
    /// The path the file is published under (set once after a rename, under the writer lock,
    /// before the handle is shared).
    var path: String

    init(adopting fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    static func open(_ path: String, flags: Int32, permissions: UInt32) throws(SystemCallError) -> TableFileHandle {
        let fd = try Syscall.retrying("open", path: path) { Glibc.open(path, flags | O_CLOEXEC, mode_t(permissions)) }
        return TableFileHandle(adopting: fd, path: path)
    }

    func stat() throws(SystemCallError) -> Glibc.stat {
        var st = Glibc.stat()
        try Syscall.retrying("fstat", path: path) { fstat(fd, &st) }
        return st
    }

    func size() throws(SystemCallError) -> Int { Int(try stat().st_size) }

    func read(_ count: Int, at offset: Int) throws(SystemCallError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = try Syscall.retrying("pread", path: path) {
                bytes.withUnsafeMutableBytes { raw in pread(fd, raw.baseAddress! + done, count - done, off_t(offset + done)) }
            }
            if n == 0 { break }
            done += n
        }
        return Array(bytes[0..<done])
    }

    func write(_ bytes: [UInt8], at offset: Int) throws(SystemCallError) {
        var done = 0
        while done < bytes.count {
            let n = try Syscall.retrying("pwrite", path: path) {
                bytes.withUnsafeBytes { raw in pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(offset + done)) }
            }
            done += n
        }
    }

    /// Reserves `[offset, offset + length)` on disk (extending the file), so that a mapping of
    /// it cannot SIGBUS on a full disk.
    func reserve(offset: Int, length: Int) throws(SystemCallError) {
        try Syscall.retryingReturnedErrno("posix_fallocate", path: path) {
            posix_fallocate(fd, off_t(offset), off_t(length))
        }
    }

    func sync() throws(SystemCallError) { try Syscall.retrying("fsync", path: path) { fsync(fd) } }

    /// Takes (blocking) or releases the exclusive writer lock (`flock`).
    func lockExclusive() throws(SystemCallError) { try Syscall.retrying("flock", path: path) { flock(fd, LOCK_EX) } }
    func unlock() { _ = flock(fd, LOCK_UN) }
}

/// Byte layout of one table file, derived from its format.
///
/// ```
/// [header page][entry 0][entry 1]…[entry maximumCount-1]
/// entry = rows (height × bytesPerRow, 64-byte aligned) + 64-byte trailer, rounded up to the page size
/// ```
struct TableLayout: Sendable, Hashable {
    let width: Int
    let height: Int
    let style: PixelStyle
    let mode: ContentMode
    let bytesPerRow: Int
    let rowsBytes: Int
    let trailerOffset: Int
    let entryLength: Int
    let maximumCount: Int
    let pageSize: Int
    let entriesOffset: Int
    let entriesPerChunk: Int

    static let trailerLength = 64
    static let chunkBytes = 4 << 20

    init(format: ImageTableFormat) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        width = format.size.width
        height = format.size.height
        style = format.style
        mode = format.mode
        bytesPerRow = PixelLayout.bytesPerRow(width: width, style: style)
        rowsBytes = bytesPerRow * height
        trailerOffset = rowsBytes   // rowsBytes is a multiple of 64
        entryLength = (rowsBytes + Self.trailerLength + page - 1) / page * page
        maximumCount = format.maximumCount
        pageSize = page
        entriesOffset = page
        entriesPerChunk = max(1, Self.chunkBytes / entryLength)
    }

    var chunkCount: Int { (maximumCount + entriesPerChunk - 1) / entriesPerChunk }
    func entryOffset(_ slot: Int) -> Int { entriesOffset + slot * entryLength }
    /// File range of chunk `c`.
    func chunkRange(_ c: Int) -> (offset: Int, length: Int) {
        let first = c * entriesPerChunk
        let count = min(entriesPerChunk, maximumCount - first)
        return (entryOffset(first), count * entryLength)
    }
}

// MARK: - Raw field access

extension UnsafeMutableRawPointer {
    @inline(__always) func u64(_ offset: Int) -> UInt64 { load(fromByteOffset: offset, as: UInt64.self) }
    @inline(__always) func u32(_ offset: Int) -> UInt32 { load(fromByteOffset: offset, as: UInt32.self) }
    @inline(__always) func set(_ offset: Int, _ value: UInt64) { storeBytes(of: value, toByteOffset: offset, as: UInt64.self) }
    @inline(__always) func set(_ offset: Int, _ value: UInt32) { storeBytes(of: value, toByteOffset: offset, as: UInt32.self) }
}

/// The 64-byte trailer after an entry's rows, written after the pixels:
///
/// | off | field |
/// |----:|-------|
/// | 0 | magic `STRT` (UInt32) · 4 layout version (UInt16) · 6 flags |
/// | 8 | content width (UInt32) · 12 content height (UInt32) |
/// | 16 | entity id high · 24 entity id low |
/// | 32 | source version · 40 write sequence |
/// | 48 | checksum of the rows · 56 checksum of bytes 0..<56 (seeded with the slot) |
enum EntryTrailer {
    static let magic: UInt32 = 0x5452_5453   // "STRT" little-endian
    static let version: UInt32 = 1

    struct Fields: Hashable {
        var width: Int
        var height: Int
        var id: ImageEntityID
        var sourceVersion: UInt64
        var sequence: UInt64
        var pixelChecksum: UInt64
    }

    /// The trailer's fields when its magic and own checksum verify (the pixels are not checked).
    static func read(_ p: UnsafeMutableRawPointer, slot: Int) -> Fields? {
        guard p.u32(0) == magic, p.u32(4) == version else { return nil }
        guard p.u64(56) == TableChecksum.hash(UnsafeRawBufferPointer(start: p, count: 56), seed: UInt64(slot)) else { return nil }
        return Fields(width: Int(p.u32(8)), height: Int(p.u32(12)), id: ImageEntityID(high: p.u64(16), low: p.u64(24)),
                      sourceVersion: p.u64(32), sequence: p.u64(40), pixelChecksum: p.u64(48))
    }

    static func write(_ f: Fields, to p: UnsafeMutableRawPointer, slot: Int) {
        p.set(4, version)
        p.set(8, UInt32(f.width))
        p.set(12, UInt32(f.height))
        p.set(16, f.id.high)
        p.set(24, f.id.low)
        p.set(32, f.sourceVersion)
        p.set(40, f.sequence)
        p.set(48, f.pixelChecksum)
        p.set(0, magic)
        p.set(56, TableChecksum.hash(UnsafeRawBufferPointer(start: p, count: 56), seed: UInt64(slot)))
    }

    /// Whether the trailer at `p` (valid magic) still names write `sequence` of `id`; a cheap
    /// check for an entry whose pixels were verified before (no checksums).
    static func names(_ p: UnsafeMutableRawPointer, sequence: UInt64, id: ImageEntityID) -> Bool {
        p.u32(0) == magic && p.u64(40) == sequence && p.u64(16) == id.high && p.u64(24) == id.low
    }

    static func invalidate(_ p: UnsafeMutableRawPointer) {
        p.set(0, UInt32(0))
        p.set(56, UInt64(0))
    }

    static func pixelChecksum(_ rows: UnsafeRawBufferPointer, id: ImageEntityID, sourceVersion: UInt64) -> UInt64 {
        TableChecksum.hash(rows, seed: id.low ^ sourceVersion ^ (id.high &* TableChecksum.prime3))
    }
}

/// The table file's header page: identifies the layout and the file's generation (a random
/// number that ties the metadata file to this table file).
enum TableHeader {
    static let magic: UInt64 = 0x3130_4C42_4154_5453   // "STATBL01"
    static let length = 72

    static func encode(_ l: TableLayout, generation: UInt64) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: l.pageSize)
        bytes.withUnsafeMutableBytes { raw in
            let p = raw.baseAddress!
            p.set(0, magic)
            p.set(8, UInt32(1))
            p.storeBytes(of: l.style.rawValue, toByteOffset: 12, as: UInt8.self)
            p.storeBytes(of: l.mode.rawValue, toByteOffset: 13, as: UInt8.self)
            p.set(16, UInt32(l.width))
            p.set(20, UInt32(l.height))
            p.set(24, UInt32(l.bytesPerRow))
            p.set(32, UInt64(l.entryLength))
            p.set(40, UInt64(l.maximumCount))
            p.set(48, UInt64(l.pageSize))
            p.set(56, generation)
            p.set(64, TableChecksum.hash(UnsafeRawBufferPointer(start: p, count: 64), seed: 0x7461_626C))
        }
        return bytes
    }

    /// The generation stored in `bytes` when they are a valid header for layout `l`.
    static func generation(in bytes: [UInt8], for l: TableLayout) -> UInt64? {
        guard bytes.count >= length else { return nil }
        let expected = encode(l, generation: 0)
        return bytes.withUnsafeBytes { raw -> UInt64? in
            let p = UnsafeMutableRawPointer(mutating: raw.baseAddress!)
            guard p.u64(64) == TableChecksum.hash(UnsafeRawBufferPointer(start: p, count: 64), seed: 0x7461_626C) else { return nil }
            guard bytes[0..<56] == expected[0..<56] else { return nil }
            return p.u64(56)
        }
    }
}

/// The metadata file: a 64-byte header then one 64-byte record per slot, mapped shared so that
/// an update touches one record (never rewritten whole) and other processes see it at once.
///
/// Header: 0 magic · 8 version · 16 table generation · 24 slot count · 32 checksum of 0..<32 ·
/// 40 change counter · 48 next write sequence · 56 retired flag (set when replaced).
/// Record: 0 id high · 8 id low · 16 source version · 24 sequence · 32 state (1 = valid) ·
/// 40 last used (recency) · 48 checksum of 0..<40 seeded with the slot.
enum MetadataLayout {
    static let magic: UInt64 = 0x3130_4154_454D_5453   // "STMETA01"
    static let headerLength = 64
    static let recordLength = 64

    static func fileLength(slots: Int) -> Int { headerLength + slots * recordLength }

    static func headerChecksum(_ p: UnsafeMutableRawPointer) -> UInt64 {
        TableChecksum.hash(UnsafeRawBufferPointer(start: p, count: 32), seed: 0x6D65_7461)
    }

    static func writeHeader(_ p: UnsafeMutableRawPointer, generation: UInt64, slots: Int, nextSequence: UInt64) {
        p.set(0, magic)
        p.set(8, UInt64(1))
        p.set(16, generation)
        p.set(24, UInt64(slots))
        p.set(32, headerChecksum(p))
        p.set(40, UInt64(1))
        p.set(48, nextSequence)
        p.set(56, UInt64(0))
    }

    /// Whether the metadata file at `p` was retired (replaced: its readers must reopen).
    static func isRetired(_ p: UnsafeMutableRawPointer) -> Bool { p.u64(56) != 0 }

    /// Flags the metadata file at `p` retired.
    static func retire(_ p: UnsafeMutableRawPointer) { p.set(56, UInt64(1)) }

    static func headerIsValid(_ p: UnsafeMutableRawPointer, generation: UInt64, slots: Int) -> Bool {
        p.u64(0) == magic && p.u64(8) == 1 && p.u64(16) == generation && p.u64(24) == UInt64(slots)
            && p.u64(32) == headerChecksum(p)
    }

    struct Record: Hashable {
        var id: ImageEntityID
        var sourceVersion: UInt64
        var sequence: UInt64
    }

    static func recordChecksum(_ r: UnsafeMutableRawPointer, slot: Int) -> UInt64 {
        TableChecksum.hash(UnsafeRawBufferPointer(start: r, count: 40), seed: UInt64(slot) &+ 0x7265_636F)
    }

    enum RecordState { case empty, valid(Record), corrupt }

    static func readRecord(_ r: UnsafeMutableRawPointer, slot: Int) -> RecordState {
        let state = r.u32(32)
        if state == 0 && r.u64(48) == 0 { return .empty }
        guard r.u64(48) == recordChecksum(r, slot: slot) else { return .corrupt }
        guard state == 1 else { return .empty }
        return .valid(Record(id: ImageEntityID(high: r.u64(0), low: r.u64(8)), sourceVersion: r.u64(16), sequence: r.u64(24)))
    }

    static func writeRecord(_ r: UnsafeMutableRawPointer, slot: Int, _ record: Record?, lastUsed: UInt64) {
        if let record {
            r.set(0, record.id.high)
            r.set(8, record.id.low)
            r.set(16, record.sourceVersion)
            r.set(24, record.sequence)
            r.set(32, UInt32(1))
            r.set(36, UInt32(0))
        } else {
            for off in stride(from: 0, to: 40, by: 8) { r.set(off, UInt64(0)) }
        }
        r.set(40, lastUsed)
        r.set(48, record == nil ? 0 : recordChecksum(r, slot: slot))
    }
}
