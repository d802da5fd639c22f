import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Opening, creating and rebuilding the table's files (the writer `flock` held unless `repair`
/// is false). Static: these work on a ``ImageTable/State`` nobody else sees yet, never under the
/// state lock. Every call reaches the system through ``FileDescriptor``/``MappedRegion``, so
/// errors name the call and the path, and ``SyscallFaults`` can fail any of them.
extension ImageTable {
    // MARK: - The writer lock file

    package static func openLockFile(_ path: String, permissions: UInt32) throws(SystemCallError) -> Shared<FileDescriptor> {
        let lock = try FileDescriptor(open: path, flags: O_RDWR | O_CREAT, mode: mode_t(permissions))
        try? lock.setPermissions(mode_t(permissions))  // a file another user created may refuse; it still works
        return Shared(lock)
    }

    /// Takes the writer `flock` on the file now at `lock`'s path: a lock on a file that was
    /// deleted or replaced since it was opened excludes nobody who opens the path, so then the
    /// path is opened again (creating it) and locked again. Blocks while another process writes.
    package static func lockWriter(_ lock: inout Shared<FileDescriptor>, permissions: UInt32) throws(SystemCallError) {
        while true {
            try lock.resource.lockFile(.exclusive)
            if isCurrent(lock) { return }
            unlockWriter(lock)
            lock = try openLockFile(lock.resource.path, permissions: permissions)
        }
    }

    package static func unlockWriter(_ lock: Shared<FileDescriptor>) {
        _ = try? lock.resource.lockFile(.unlock)
    }

    /// Whether two descriptors are open on the same file (device and inode).
    package static func isSameFile(_ a: Shared<FileDescriptor>, _ b: Shared<FileDescriptor>) -> Bool {
        guard let x = try? a.resource.status(), let y = try? b.resource.status() else { return false }
        return FileDescriptor.isSameFile(x, y)
    }

    /// Whether `file`'s path still names the file we have open (an `fstat` and a `stat`).
    package static func isCurrent(_ file: Shared<FileDescriptor>) -> Bool {
        guard let open = try? file.resource.status(), let byPath = try? FileDescriptor.status(ofPath: file.resource.path)
        else { return false }
        return FileDescriptor.isSameFile(open, byPath)
    }

    /// Bytes of disk `file` occupies (0 when it cannot be asked).
    package static func allocatedBytes(_ file: Shared<FileDescriptor>) -> Int {
        (try? Int(file.resource.status().st_blocks) * 512) ?? 0
    }

    // MARK: - Opening

    package static func openFiles(
        layout: TableLayout, format: ImageTableFormat, tablePath: String, metaPath: String, repair: Bool
    ) throws(ImageTableError) -> State {
        let mode = mode_t(format.filePermissions)
        // The table file: a valid header for this layout, else (when repairing) a new file.
        let file: Shared<FileDescriptor>
        let generation: UInt64
        do throws(SystemCallError) {
            let f = try FileDescriptor(open: tablePath, flags: O_RDWR, mode: mode)
            var header = [UInt8](repeating: 0, count: layout.pageSize)
            let n = try rethrowingTyped(SystemCallError.self) { try header.withUnsafeMutableBytes { try f.read(into: $0, at: 0) } }
            guard let g = TableHeaderView.generation(in: Array(header[0..<n]), for: layout) else {
                throw SystemCallError(call: "open", path: tablePath, errno: EINVAL)
            }
            file = Shared(f)
            generation = g
        } catch {
            guard repair else { throw .system(error) }
            return try createFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath)
        }
        var chunks: [Shared<MappedRegion>?] = Array(repeating: nil, count: layout.chunkCount)
        // The metadata: valid for this table generation, else rebuilt from the trailers.
        let length = MetadataLayout.fileLength(slots: layout.maximumCount)
        var opened: (Shared<FileDescriptor>, Shared<MappedRegion>)?
        if let meta = try? FileDescriptor(open: metaPath, flags: O_RDWR, mode: mode),
            let size = try? meta.size(), size == length,
            let map = try? MappedRegion(file: meta, length: size, writable: true),
            MetadataHeaderView(base: map.base).isValid(generation: generation, slots: layout.maximumCount)
        {
            opened = (Shared(meta), Shared(map))
        }
        if opened == nil {
            guard repair else { throw .system(SystemCallError(call: "open", path: metaPath, errno: EINVAL)) }
            // A damaged file that other processes may still have mapped: flag it retired so
            // they reopen once the rebuilt one is in place.
            if let old = try? FileDescriptor(open: metaPath, flags: O_RDWR, mode: mode),
                let size = try? old.size(), size >= MetadataLayout.headerLength,
                let map = try? MappedRegion(file: old, length: MetadataLayout.headerLength, writable: true)
            {
                MetadataHeaderView(base: map.base).retire()
            }
            opened = try rebuildMetadata(
                file: file, chunks: &chunks, layout: layout, format: format,
                generation: generation, metaPath: metaPath)
        }
        var s = State(
            file: file, chunks: chunks, meta: opened!.0, metaMap: opened!.1,
            slots: Array(repeating: SlotState(), count: layout.maximumCount))
        s.fileSize = (try? file.resource.size()) ?? 0
        let metaBase = s.metaMap.resource.base
        s.seenChange = MetadataHeaderView(base: metaBase).change
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        let (index, corrupt) = scanRecords(s.metaMap, slots: layout.maximumCount)
        s.index = index
        if repair && !corrupt.isEmpty {
            // Damaged records: trust the slot's trailer when it verifies, else free the slot.
            for slot in corrupt {
                var rec: MetadataRecordView.Record?
                if layout.entryEnd(slot) <= s.fileSize,
                    let (_, entry) = try? mapEntry(file: s.file, chunks: &s.chunks, layout: layout, slot: slot),
                    let f = layout.trailer(entry).read(slot: slot), s.index[f.id] == nil
                {
                    rec = .init(id: f.id, sourceVersion: f.sourceVersion, sequence: f.sequence)
                    s.index[f.id] = slot
                }
                MetadataLayout.record(metaBase, slot).write(rec, slot: slot, lastUsed: rec?.sequence ?? 0)
            }
        }
        for slot in 0..<layout.maximumCount {
            s.clock = max(s.clock, saneRecency(MetadataLayout.record(metaBase, slot).lastUsed))
        }
        return s
    }

    /// Maps chunk `c` of `file` (the mapping may extend past the end of the file; callers only
    /// touch entries inside it).
    package static func mapChunk(
        _ c: Int, of file: Shared<FileDescriptor>, layout: TableLayout
    ) throws(SystemCallError) -> Shared<MappedRegion> {
        let (offset, length) = layout.chunkRange(c)
        return Shared(try MappedRegion(file: file.resource, length: length, offset: offset, writable: true))
    }

    /// `slot`'s chunk and entry in `chunks` (of a state nobody else sees yet), mapping the chunk
    /// if needed.
    package static func mapEntry(
        file: Shared<FileDescriptor>, chunks: inout [Shared<MappedRegion>?], layout: TableLayout, slot: Int
    ) throws(SystemCallError) -> (Shared<MappedRegion>, UnsafeMutableRawPointer) {
        let (c, offset) = layout.chunkPosition(slot)
        let chunk: Shared<MappedRegion>
        if let mapped = chunks[c] {
            chunk = mapped
        } else {
            chunk = try mapChunk(c, of: file, layout: layout)
            chunks[c] = chunk
        }
        return (chunk, chunk.resource.base + offset)
    }

    /// Reserves `slot`'s disk space in a state nobody else sees yet (a compaction's new files)
    /// and maps it.
    package static func reservedEntry(
        _ s: inout State, _ slot: Int, layout: TableLayout
    ) throws(ImageTableError) -> (Shared<MappedRegion>, UnsafeMutableRawPointer) {
        do throws(SystemCallError) {
            try s.file.resource.allocate(offset: layout.entryOffset(slot), length: layout.entryLength)
            s.fileSize = max(s.fileSize, layout.entryEnd(slot))
            return try mapEntry(file: s.file, chunks: &s.chunks, layout: layout, slot: slot)
        } catch { throw .system(error) }
    }

    // MARK: - Creating

    /// Creates `path` afresh (removing a leftover of an interrupted attempt first).
    private static func createFile(_ path: String, permissions: UInt32) throws(SystemCallError) -> FileDescriptor {
        do throws(SystemCallError) {
            try FileDescriptor.unlink(path: path)
        } catch  where error.errno == ENOENT {
        }
        let file = try FileDescriptor(open: path, flags: O_RDWR | O_CREAT | O_EXCL, mode: mode_t(permissions))
        try file.setPermissions(mode_t(permissions))  // regardless of the umask
        return file
    }

    /// Writes a new metadata file from the trailers of `file` and renames it into place.
    package static func rebuildMetadata(
        file: Shared<FileDescriptor>, chunks: inout [Shared<MappedRegion>?], layout: TableLayout, format: ImageTableFormat,
        generation: UInt64, metaPath: String
    ) throws(ImageTableError) -> (Shared<FileDescriptor>, Shared<MappedRegion>) {
        let temp = metaPath + ".rebuild"
        let length = MetadataLayout.fileLength(slots: layout.maximumCount)
        do throws(SystemCallError) {
            let meta = try createFile(temp, permissions: format.filePermissions)
            try meta.allocate(offset: 0, length: length)
            let map = try MappedRegion(file: meta, length: length, writable: true)
            var best: [ImageEntityID: (slot: Int, sequence: UInt64)] = [:]
            var maxSequence: UInt64 = 0
            let stored = min(layout.maximumCount, max(0, (try file.resource.size() - layout.entriesOffset) / layout.entryLength))
            for slot in 0..<stored {
                guard let (_, entry) = try? mapEntry(file: file, chunks: &chunks, layout: layout, slot: slot),
                    let f = layout.trailer(entry).read(slot: slot)
                else { continue }
                maxSequence = max(maxSequence, f.sequence)
                if let other = best[f.id], other.sequence >= f.sequence { continue }
                best[f.id] = (slot, f.sequence)
                MetadataLayout.record(map.base, slot)
                    .write(.init(id: f.id, sourceVersion: f.sourceVersion, sequence: f.sequence), slot: slot, lastUsed: f.sequence)
            }
            // Clear records of duplicates that lost to a newer write of the same entity.
            for slot in 0..<stored {
                let r = MetadataLayout.record(map.base, slot)
                if case .valid(let rec) = r.read(slot: slot), best[rec.id]?.slot != slot { r.write(nil, slot: slot, lastUsed: 0) }
            }
            MetadataHeaderView(base: map.base).write(
                generation: generation, slots: layout.maximumCount,
                nextSequence: sequence(after: maxSequence))
            try meta.sync()
            try FileDescriptor.rename(path: temp, to: metaPath)
            return (Shared(try meta.duplicate(path: metaPath)), Shared(map))
        } catch { throw .system(error) }
    }

    /// Creates an empty table file and metadata file (new generation) and, with `publish`,
    /// renames them into place (table first, then metadata).
    package static func createFiles(
        layout: TableLayout, format: ImageTableFormat, tablePath: String, metaPath: String, publish: Bool = true
    ) throws(ImageTableError) -> State {
        let generation = UInt64.random(in: 1...UInt64.max)
        let tableTemp = publish ? tablePath + ".new" : tablePath
        let metaTemp = publish ? metaPath + ".new" : metaPath
        var s: State
        do throws(SystemCallError) {
            let file = try createFile(tableTemp, permissions: format.filePermissions)
            let header = TableHeaderView.encode(layout, generation: generation)
            try rethrowingTyped(SystemCallError.self) { try header.withUnsafeBytes { try file.write($0, at: 0) } }
            let meta = try createFile(metaTemp, permissions: format.filePermissions)
            let length = MetadataLayout.fileLength(slots: layout.maximumCount)
            try meta.allocate(offset: 0, length: length)
            let map = try MappedRegion(file: meta, length: length, writable: true)
            MetadataHeaderView(base: map.base).write(generation: generation, slots: layout.maximumCount, nextSequence: 1)
            let change = MetadataHeaderView(base: map.base).change
            s = State(
                file: Shared(file), chunks: Array(repeating: nil, count: layout.chunkCount), meta: Shared(meta),
                metaMap: Shared(map), slots: Array(repeating: SlotState(), count: layout.maximumCount))
            s.seenChange = change
        } catch { throw .system(error) }
        if publish { try Self.publish(&s, from: (tableTemp, metaTemp), to: (tablePath, metaPath)) }
        return s
    }

    /// Makes new files durable and renames them into place (table first, then metadata); the
    /// state's descriptors then carry the published names.
    package static func publish(
        _ s: inout State, from temp: (table: String, meta: String), to path: (table: String, meta: String)
    )
        throws(ImageTableError)
    {
        do throws(SystemCallError) {
            try s.file.resource.sync()
            try s.meta.resource.sync()
            try FileDescriptor.rename(path: temp.table, to: path.table)
            try FileDescriptor.rename(path: temp.meta, to: path.meta)
            s.file = Shared(try s.file.resource.duplicate(path: path.table))
            s.meta = Shared(try s.meta.resource.duplicate(path: path.meta))
        } catch { throw .system(error) }
    }
}
