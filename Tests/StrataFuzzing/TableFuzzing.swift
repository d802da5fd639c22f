#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Strata
import StrataTestSupport

extension Fuzzing {
    /// An image table opened on files built from the fuzzer's bytes: a table file whose
    /// header, entries and trailers are valid, damaged, lying (valid checksums over wrong
    /// fields) or arbitrary, possibly truncated, and a metadata file that is missing, valid,
    /// lying or arbitrary. Opening may fail with an error; what opens must serve only images
    /// within the format, and a store into it must read back exactly. `directory` is a
    /// scratch directory the harness owns (its table files are replaced on every call).
    package static func imageTable(_ data: UnsafeRawBufferPointer, directory: String) {
        var input = FuzzInput(data)
        let size = PixelSize(width: 1 + input.below(12), height: 1 + input.below(12))
        let style = PixelStyle(rawValue: UInt8(input.below(4)))!
        let mode = ContentMode(rawValue: UInt8(input.below(2)))!
        let count = 1 + input.below(5)
        let format = ImageTableFormat(name: "f", family: "fuzz", size: size, style: style, mode: mode, maximumCount: count)
        let layout = TableLayout(format: format)
        let generation = input.uint64()
        var written: [EntryTrailer.Fields?] = Array(repeating: nil, count: count)

        var table = [UInt8](repeating: 0, count: layout.entriesOffset + count * layout.entryLength)
        table.withUnsafeMutableBytes { raw in
            let base = raw.baseAddress!
            if input.byte() % 8 != 0 {
                TableHeaderView(base: base).write(layout, generation: generation)
            } else {
                let header = input.take(TableHeaderView.length)
                UnsafeMutableRawBufferPointer(start: base, count: header.count).copyMemory(from: header)
            }
            for slot in 0..<count {
                let entry = base + layout.entryOffset(slot)
                let rows = UnsafeMutableRawBufferPointer(start: entry, count: layout.rowsBytes)
                let seed = input.byte()
                for i in rows.indices { rows[i] = UInt8(truncatingIfNeeded: i &* 7 &+ Int(seed)) }
                let kind = input.byte() % 5
                let id = ImageEntityID(high: 0, low: UInt64(input.below(4)))
                let sourceVersion = UInt64(input.below(3))
                let hostile = kind == 3
                let fields = EntryTrailer.Fields(
                    width: hostile ? Int(input.uint32()) : 1 + input.below(size.width),
                    height: hostile ? Int(input.uint32()) : 1 + input.below(size.height),
                    id: id, sourceVersion: sourceVersion, sequence: input.uint64() % 16,
                    pixelChecksum: kind == 4
                        ? input.uint64()
                        : EntryTrailer.pixelChecksum(UnsafeRawBufferPointer(rows), id: id, sourceVersion: sourceVersion))
                guard kind != 0 else { continue }
                let trailer = layout.trailer(entry)
                trailer.write(fields, slot: slot)
                written[slot] = fields
                if kind == 2 {
                    // One damaged byte in the rows or the trailer.
                    let at = input.below(layout.rowsBytes + EntryTrailerView.length)
                    entry.storeBytes(of: input.byte(), toByteOffset: at, as: UInt8.self)
                }
            }
        }
        if input.byte() % 4 == 0 { table.removeLast(input.below(table.count + 1)) }

        var meta: [UInt8]?
        switch input.byte() % 4 {
        case 0:
            meta = nil
        case 1, 2:
            // A valid header (for this generation or another) and records that repeat the
            // trailers, or lie about them.
            var bytes = [UInt8](repeating: 0, count: MetadataLayout.fileLength(slots: count))
            let lying = input.byte() % 2 == 0
            bytes.withUnsafeMutableBytes { raw in
                let base = raw.baseAddress!
                let otherGeneration = input.byte() % 8 == 0
                MetadataHeaderView(base: base).write(
                    generation: otherGeneration ? generation &+ 1 : generation, slots: count, nextSequence: input.uint64() % 32)
                for slot in 0..<count {
                    guard let fields = written[slot] else { continue }
                    let record = MetadataRecordView.Record(
                        id: lying ? ImageEntityID(high: 0, low: UInt64(input.below(4))) : fields.id,
                        sourceVersion: lying ? UInt64(input.below(3)) : fields.sourceVersion,
                        sequence: lying ? input.uint64() % 16 : fields.sequence)
                    MetadataLayout.record(base, slot).write(record, slot: slot, lastUsed: input.uint64())
                }
            }
            meta = bytes
        default:
            meta = Array(input.take(input.below(MetadataLayout.fileLength(slots: count) + 64)))
        }

        let tablePath = directory + "/f.table", metaPath = directory + "/f.meta"
        try? FileDescriptor.unlink(path: tablePath)
        try? FileDescriptor.unlink(path: metaPath)
        guard writeFile(tablePath, table), meta.map({ writeFile(metaPath, $0) }) ?? true else {
            Fuzzing.fail("cannot write the harness's files in \(directory)")
        }
        guard let opened = try? ImageTable(directory: directory, format: format) else { return }
        for low in UInt64(0)..<4 {
            for version in UInt64(0)..<3 {
                guard let image = opened.image(for: ImageEntityID(high: 0, low: low), sourceVersion: version) else { continue }
                Fuzzing.require(
                    image.width <= size.width && image.height <= size.height && image.style == style, "served beyond the format")
                _ = image.withUnsafeBytes { $0.reduce(0) { $0 &+ $1 } }  // every byte readable
            }
        }
        let fresh = ImageEntityID(high: 1, low: 9)
        do {
            try opened.store(fresh, sourceVersion: 1) { canvas in TableTestPattern.draw(&canvas.image, n: 9, version: 1) }
        } catch {
            return  // e.g. a table file that cannot be repaired in place
        }
        let back = opened.image(for: fresh, sourceVersion: 1)
        Fuzzing.require(back.map { TableTestPattern.matches($0, n: 9, version: 1) } == true, "a stored entry does not read back")
    }

    private static func writeFile(_ path: String, _ bytes: [UInt8]) -> Bool {
        guard let file = try? FileDescriptor(open: path, flags: O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600) else { return false }
        guard !bytes.isEmpty else { return true }
        do {
            try bytes.withUnsafeBytes { try file.write($0, at: 0) }
            return true
        } catch {
            return false
        }
    }
}
