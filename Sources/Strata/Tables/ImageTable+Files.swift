#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Opening, creating and rebuilding the table's files (the writer `flock` held unless `repair`
/// is false). Static: these work on a ``ImageTable/State`` nobody else sees yet, never under the
/// state lock.
extension ImageTable {
    static func openLockFile(_ path: String, permissions: UInt32) throws(SystemCallError) -> TableFileHandle {
        let lock = try TableFileHandle.open(path, flags: O_RDWR | O_CREAT, permissions: permissions)
        _ = fchmod(lock.fd, mode_t(permissions))
        return lock
    }

    /// Takes the writer `flock` on the file now at `lock`'s path: a lock on a file that was
    /// deleted or replaced since it was opened excludes nobody who opens the path, so then the
    /// path is opened again (creating it) and locked again.
    static func lockWriter(_ lock: inout TableFileHandle, permissions: UInt32) throws(SystemCallError) {
        while true {
            try lock.lockExclusive()
            if isCurrent(lock) { return }
            lock.unlock()
            lock = try openLockFile(lock.path, permissions: permissions)
        }
    }

    /// Whether two handles are open on the same file (device and inode).
    static func isSameFile(_ a: TableFileHandle, _ b: TableFileHandle) -> Bool {
        guard let x = try? a.stat(), let y = try? b.stat() else { return false }
        return x.st_ino == y.st_ino && x.st_dev == y.st_dev
    }

    /// Whether `file`'s path still names the file we have open (an `fstat` and a `stat`).
    static func isCurrent(_ file: TableFileHandle) -> Bool {
        var byPath = stat()
        guard let open = try? file.stat(), stat(file.path, &byPath) == 0 else { return false }
        return open.st_ino == byPath.st_ino && open.st_dev == byPath.st_dev
    }

    static func openFiles(
        layout: TableLayout, format: ImageTableFormat, tablePath: String, metaPath: String, repair: Bool
    ) throws(ImageTableError) -> State {
        // The table file: a valid header for this layout, else (when repairing) a new file.
        let file: TableFileHandle
        let generation: UInt64
        do throws(SystemCallError) {
            let f = try TableFileHandle.open(tablePath, flags: O_RDWR, permissions: format.filePermissions)
            guard let g = TableHeader.generation(in: try f.read(layout.pageSize, at: 0), for: layout) else {
                throw SystemCallError(call: "open", path: tablePath, errno: EINVAL)
            }
            file = f
            generation = g
        } catch {
            guard repair else { throw .system(error) }
            return try createFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath)
        }
        var chunks: [TableMapping?] = Array(repeating: nil, count: layout.chunkCount)
        // The metadata: valid for this table generation, else rebuilt from the trailers.
        var opened: (TableFileHandle, TableMapping)?
        if let meta = try? TableFileHandle.open(metaPath, flags: O_RDWR, permissions: format.filePermissions),
           let size = try? meta.size(), size == MetadataLayout.fileLength(slots: layout.maximumCount),
           let map = try? TableMapping(fd: meta.fd, offset: 0, length: size, path: metaPath),
           MetadataLayout.headerIsValid(map.base, generation: generation, slots: layout.maximumCount) {
            opened = (meta, map)
        }
        if opened == nil {
            guard repair else { throw .system(SystemCallError(call: "open", path: metaPath, errno: EINVAL)) }
            // A damaged file that other processes may still have mapped: flag it retired so
            // they reopen once the rebuilt one is in place.
            if let old = try? TableFileHandle.open(metaPath, flags: O_RDWR, permissions: format.filePermissions),
               let size = try? old.size(), size >= MetadataLayout.headerLength,
               let map = try? TableMapping(fd: old.fd, offset: 0, length: MetadataLayout.headerLength, path: metaPath) {
                MetadataLayout.retire(map.base)
            }
            opened = try rebuildMetadata(file: file, chunks: &chunks, layout: layout, format: format,
                                         generation: generation, metaPath: metaPath)
        }
        var s = State(file: file, chunks: chunks, meta: opened!.0, metaMap: opened!.1,
                      slots: Array(repeating: SlotState(), count: layout.maximumCount))
        s.fileSize = (try? file.size()) ?? 0
        s.seenChange = s.metaMap.base.u64(40)
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        let (index, corrupt) = scanRecords(s.metaMap, slots: layout.maximumCount)
        s.index = index
        if repair && !corrupt.isEmpty {
            // Damaged records: trust the slot's trailer when it verifies, else free the slot.
            for slot in corrupt {
                let r = s.metaMap.base + MetadataLayout.headerLength + slot * MetadataLayout.recordLength
                var rec: MetadataLayout.Record?
                if layout.entryOffset(slot) + layout.entryLength <= s.fileSize,
                   let (_, entry) = entryPointerStatic(file: s.file, chunks: &s.chunks, layout: layout, slot: slot),
                   let f = EntryTrailer.read(entry + layout.trailerOffset, slot: slot), s.index[f.id] == nil {
                    rec = .init(id: f.id, sourceVersion: f.sourceVersion, sequence: f.sequence)
                    s.index[f.id] = slot
                }
                MetadataLayout.writeRecord(r, slot: slot, rec, lastUsed: rec?.sequence ?? 0)
            }
        }
        for slot in 0..<layout.maximumCount {
            let used = (s.metaMap.base + MetadataLayout.headerLength + slot * MetadataLayout.recordLength).u64(40)
            s.clock = max(s.clock, saneRecency(used))
        }
        return s
    }

    /// Maps `slot`'s chunk if needed (the mapping may extend past the end of the file; callers
    /// only touch entries inside it).
    static func entryPointerStatic(
        file: TableFileHandle, chunks: inout [TableMapping?], layout: TableLayout, slot: Int
    ) -> (TableMapping, UnsafeMutableRawPointer)? {
        try? mapEntry(file: file, chunks: &chunks, layout: layout, slot: slot)
    }

    static func mapEntry(
        file: TableFileHandle, chunks: inout [TableMapping?], layout: TableLayout, slot: Int
    ) throws(SystemCallError) -> (TableMapping, UnsafeMutableRawPointer) {
        let c = slot / layout.entriesPerChunk
        let chunk: TableMapping
        if let mapped = chunks[c] {
            chunk = mapped
        } else {
            let (offset, length) = layout.chunkRange(c)
            chunk = try TableMapping(fd: file.fd, offset: offset, length: length, path: file.path)
            chunks[c] = chunk
        }
        return (chunk, chunk.base + (slot - c * layout.entriesPerChunk) * layout.entryLength)
    }

    /// Writes a new metadata file from the trailers of `s.file` and renames it into place.
    static func rebuildMetadata(
        file: TableFileHandle, chunks: inout [TableMapping?], layout: TableLayout, format: ImageTableFormat,
        generation: UInt64, metaPath: String
    ) throws(ImageTableError) -> (TableFileHandle, TableMapping) {
        let temp = metaPath + ".rebuild"
        let length = MetadataLayout.fileLength(slots: layout.maximumCount)
        do throws(SystemCallError) {
            unlink(temp)
            let meta = try TableFileHandle.open(temp, flags: O_RDWR | O_CREAT | O_EXCL, permissions: format.filePermissions)
            _ = fchmod(meta.fd, mode_t(format.filePermissions))
            try meta.reserve(offset: 0, length: length)
            let map = try TableMapping(fd: meta.fd, offset: 0, length: length, path: temp)
            var best: [ImageEntityID: (slot: Int, sequence: UInt64)] = [:]
            var maxSequence: UInt64 = 0
            let stored = min(layout.maximumCount, max(0, (try file.size() - layout.entriesOffset) / layout.entryLength))
            for slot in 0..<stored {
                guard let (_, entry) = entryPointerStatic(file: file, chunks: &chunks, layout: layout, slot: slot),
                      let f = EntryTrailer.read(entry + layout.trailerOffset, slot: slot) else { continue }
                maxSequence = max(maxSequence, f.sequence)
                if let other = best[f.id], other.sequence >= f.sequence { continue }
                best[f.id] = (slot, f.sequence)
                let r = map.base + MetadataLayout.headerLength + slot * MetadataLayout.recordLength
                MetadataLayout.writeRecord(r, slot: slot, .init(id: f.id, sourceVersion: f.sourceVersion, sequence: f.sequence),
                                           lastUsed: f.sequence)
            }
            // Clear records of duplicates that lost to a newer write of the same entity.
            for slot in 0..<stored {
                let r = map.base + MetadataLayout.headerLength + slot * MetadataLayout.recordLength
                if case .valid(let rec) = MetadataLayout.readRecord(r, slot: slot), best[rec.id]?.slot != slot {
                    MetadataLayout.writeRecord(r, slot: slot, nil, lastUsed: 0)
                }
            }
            MetadataLayout.writeHeader(map.base, generation: generation, slots: layout.maximumCount, nextSequence: sequence(after: maxSequence))
            try meta.sync()
            try Syscall.retrying("rename", path: metaPath) { rename(temp, metaPath) }
            meta.path = metaPath
            return (meta, map)
        } catch { throw .system(error) }
    }

    /// Creates an empty table file and metadata file (new generation) and, with `publish`,
    /// renames them into place (table first, then metadata).
    static func createFiles(
        layout: TableLayout, format: ImageTableFormat, tablePath: String, metaPath: String, publish: Bool = true
    ) throws(ImageTableError) -> State {
        let generation = UInt64.random(in: 1...UInt64.max)
        let tableTemp = publish ? tablePath + ".new" : tablePath
        let metaTemp = publish ? metaPath + ".new" : metaPath
        do {
            unlink(tableTemp)
            unlink(metaTemp)
            let file = try TableFileHandle.open(tableTemp, flags: O_RDWR | O_CREAT | O_EXCL, permissions: format.filePermissions)
            _ = fchmod(file.fd, mode_t(format.filePermissions))
            try file.write(TableHeader.encode(layout, generation: generation), at: 0)
            let meta = try TableFileHandle.open(metaTemp, flags: O_RDWR | O_CREAT | O_EXCL, permissions: format.filePermissions)
            _ = fchmod(meta.fd, mode_t(format.filePermissions))
            let length = MetadataLayout.fileLength(slots: layout.maximumCount)
            try meta.reserve(offset: 0, length: length)
            let map = try TableMapping(fd: meta.fd, offset: 0, length: length, path: metaTemp)
            MetadataLayout.writeHeader(map.base, generation: generation, slots: layout.maximumCount, nextSequence: 1)
            if publish {
                try file.sync()
                try meta.sync()
                try Syscall.retrying("rename", path: tablePath) { rename(tableTemp, tablePath) }
                try Syscall.retrying("rename", path: metaPath) { rename(metaTemp, metaPath) }
                file.path = tablePath
                meta.path = metaPath
            }
            var s = State(file: file, chunks: Array(repeating: nil, count: layout.chunkCount), meta: meta, metaMap: map,
                          slots: Array(repeating: SlotState(), count: layout.maximumCount))
            s.seenChange = map.base.u64(40)
            return s
        } catch { throw .system(error) }
    }

    /// Reserves `slot`'s disk space in a state nobody else sees yet (a compaction's new files)
    /// and maps it.
    static func reservedEntry(
        _ s: inout State, _ slot: Int, layout: TableLayout
    ) throws(ImageTableError) -> (TableMapping, UnsafeMutableRawPointer) {
        do throws(SystemCallError) {
            try s.file.reserve(offset: layout.entryOffset(slot), length: layout.entryLength)
            s.fileSize = max(s.fileSize, layout.entryOffset(slot) + layout.entryLength)
            return try mapEntry(file: s.file, chunks: &s.chunks, layout: layout, slot: slot)
        } catch { throw .system(error) }
    }
}
