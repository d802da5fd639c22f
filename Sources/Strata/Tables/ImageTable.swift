#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// One image table: a memory-mapped file of fixed-size entries for one ``ImageTableFormat``
/// (FastImageCache's `FICImageTable`), shareable between processes.
///
/// Files in the directory: `<name>.table` (header page, then `maximumCount` page-aligned
/// entries: rows + a checksummed trailer), `<name>.meta` (entity → slot and recency, one
/// 64-byte record per slot, mapped and updated in place), `<name>.pins` (cross-process pins)
/// and `<name>.lock` (writer `flock`, pin leases).
///
/// - Retrieval (``image(for:sourceVersion:)``) is O(1): a dictionary lookup, a trailer check and
///   a pin, then an image over the mapped slot (no copy). The first retrieval of an entry in a
///   process also verifies the checksum of its pixels; an entry that does not verify is a miss.
/// - Writes (``store(_:sourceVersion:draw:)``) take an in-process writer lock and the file's
///   `flock`; readers never wait for them. A write invalidates the slot, draws the pixels, then
///   writes the trailer, then the metadata record: a process killed at any point leaves a miss,
///   never a torn image.
/// - A slot referenced by a live ``PixelImage`` (in this or any other process) is never reused;
///   when every slot is held, a write throws ``ImageTableError/tableFull(format:maximumCount:)``.
/// - The file is never truncated or shrunk in place: ``reset()`` and ``compact()`` write new
///   files and rename them over the old ones, so existing images stay valid.
///
/// Limits worth knowing:
/// - An entry's pixel checksum is verified once per instance and write (on its first
///   retrieval); later corruption of the mapped bytes in memory is not re-detected.
/// - After another process wrote, the first miss in this instance re-reads the whole metadata
///   (64 bytes per slot) to pick up its entries.
/// - The files must not be truncated or deleted by anything else while instances have them
///   open (a truncated mapping raises SIGBUS; a deleted metadata file is only noticed by this
///   instance's next write, hits meanwhile still check each entry's trailer; a deleted lock
///   file is reopened by writers, but instances opened before and after it hold their pin
///   leases on different files, so one may take the other's segment for dead).
/// - At most 32 instances (across processes) may have one table open at once.
/// - `store`'s `draw` must not call `store` on the same table (the writer lock is not
///   re-entrant).
public final class ImageTable: Sendable {
    public let format: ImageTableFormat
    public let directory: String
    let layout: TableLayout
    let tablePath: String
    let metaPath: String
    let pins: SharedPins
    /// Serialises this instance's writers (the `flock` is per open file, so it does not), and
    /// holds the open `<name>.lock` file writers `flock` (reopened when the file was replaced).
    let writerGate: Mutex<TableFileHandle>
    let state: Mutex<State>

    struct State {
        var file: TableFileHandle
        var chunks: [TableMapping?]
        var meta: TableFileHandle
        var metaMap: TableMapping
        var index: [ImageEntityID: Int] = [:]
        /// Per-slot state of this instance (one 16-byte element: one cache line per hit).
        var slots: [SlotState]
        var seenChange: UInt64 = 0
        var clock: UInt64 = 0
        var freeCursor = 0
        /// The table file's size as last seen; entries past it are not touched.
        var fileSize = 0
        /// Slots whose recency is waiting to be written to the shared records.
        var touched: [Int32] = []
    }

    /// Opens (creating if needed) the table for `format` in `directory` (created if missing).
    ///
    /// Rebuilds the metadata from the entries' trailers when it is missing, truncated or
    /// corrupt, and replaces a table file whose header does not match the format. Cost: reads
    /// the metadata file (64 bytes per slot); a rebuild also reads every stored trailer.
    public init(directory: String, format: ImageTableFormat) throws(ImageTableError) {
        try format.validate()
        self.format = format
        self.directory = directory
        self.layout = TableLayout(format: format)
        self.tablePath = directory + "/" + format.name + ".table"
        self.metaPath = directory + "/" + format.name + ".meta"
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            throw .system(SystemCallError(call: "mkdir", path: directory, errno: errno))
        }
        let lockPath = directory + "/" + format.name + ".lock"
        var lock: TableFileHandle
        do throws(SystemCallError) {
            lock = try Self.openLockFile(lockPath, permissions: format.filePermissions)
            try Self.lockWriter(&lock, permissions: format.filePermissions)
        } catch { throw .system(error) }
        defer { lock.unlock() }
        writerGate = Mutex(lock)
        pins = try SharedPins(path: directory + "/" + format.name + ".pins", format: format.name, slots: format.maximumCount,
                              permissions: format.filePermissions, lockFile: lock)
        let opened = try Self.openFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath, repair: true)
        state = Mutex(opened)
    }

    deinit {
        state.withLock { s in flushRecency(&s) }
    }

    // MARK: - Reading

    /// The stored image of entity `id` drawn from `sourceVersion`, or `nil` at once when there is
    /// none (never waits for a writer). The image maps the slot (no copy) and pins it until the
    /// last copy of the image goes away; it is read-only (mutating it copies).
    public func image(for id: ImageEntityID, sourceVersion: UInt64) -> PixelImage? {
        let hit = state.withLock { s -> (TableFileHandle, TableMapping, UnsafeMutableRawPointer, Int, Int, Int)? in
            guard let slot = lookup(&s, id) else { return nil }
            // Pin first (publishing the pin to other processes), then check the entry: a writer
            // invalidates the record and trailer before it looks at pins (see SharedPins).
            pin(&s, slot)
            guard let (chunk, entry) = entryPointer(&s, slot) else { unpinLocked(&s, slot); return nil }
            let known = s.slots[slot]
            var current = false
            if known.verified != 0, known.id == id {
                // Nothing was claimed anywhere since this instance synced its index (one hot
                // header line), or else the slot's record still names the verified write.
                if s.metaMap.base.u64(40) == s.seenChange {
                    current = true
                } else {
                    let r = record(&s, slot)
                    current = r.u64(24) == known.verified && r.u32(32) == 1 && r.u64(0) == id.high && r.u64(8) == id.low
                }
                // The metadata may no longer be the current one (deleted or replaced without
                // this instance noticing): the entry's own trailer must still name that write
                // (one more cache line; read after the pin, see SharedPins).
                current = current && EntryTrailer.names(entry + layout.trailerOffset, sequence: known.verified, id: id)
            }
            let w: Int, h: Int
            if current {
                guard known.sourceVersion == sourceVersion else { unpinLocked(&s, slot); return nil }
                w = Int(known.width)
                h = Int(known.height)
            } else {
                guard let f = verify(&s, slot, entry), f.id == id else {
                    s.index.removeValue(forKey: id)
                    unpinLocked(&s, slot)
                    return nil
                }
                guard f.sourceVersion == sourceVersion else { unpinLocked(&s, slot); return nil }
                w = f.width
                h = f.height
            }
            touch(&s, slot)
            return (s.file, chunk, entry, slot, w, h)
        }
        guard let (file, chunk, entry, slot, w, h) = hit else { return nil }
        return makeImage(file: file, chunk: chunk, entry: entry, slot: slot, width: w, height: h, writable: false)
    }

    /// Whether an entry for `id` (any source version) is indexed; no verification, no pin.
    public func contains(_ id: ImageEntityID) -> Bool {
        state.withLock { s in lookup(&s, id) != nil }
    }

    /// Number of indexed entries.
    public var count: Int { state.withLock { $0.index.count } }

    /// Bytes the table's files occupy on disk (allocated blocks of the table, metadata and pins
    /// files).
    public var diskUsage: Int {
        state.withLock { s in
            func used(_ f: TableFileHandle) -> Int { (try? Int(f.stat().st_blocks) * 512) ?? 0 }
            return used(s.file) + used(s.meta) + pins.diskUsage
        }
    }

    // MARK: - Writing

    /// Draws the entry for `id` at `sourceVersion` into a slot and returns it (pinned).
    ///
    /// `draw` gets a canvas whose image is the slot's memory (format size and style); it runs
    /// with this table's writer lock held. The slot is the entity's old slot when that is free,
    /// else an unused one, else the least recently used slot that no live image references.
    /// Throws ``ImageTableError/tableFull(format:maximumCount:)`` when every slot is held, and
    /// rethrows `draw`'s errors (the entry is then absent).
    @discardableResult
    public func store(
        _ id: ImageEntityID, sourceVersion: UInt64, draw: (inout ImageTableCanvas) throws -> Void
    ) throws -> PixelImage {
        try writerGate.withLock { lockFile in
            do throws(SystemCallError) {
                try Self.lockWriter(&lockFile, permissions: format.filePermissions)
            } catch { throw ImageTableError.system(error) }
            defer { lockFile.unlock() }
            let (file, chunk, entry, slot) = try state.withLock { s throws(ImageTableError) in
                try refreshForWriting(&s)
                flushRecency(&s)
                let slot = try chooseSlot(&s, for: id)
                let (chunk, entry) = try reservedEntry(&s, slot)
                pin(&s, slot)       // the writer's own pin, dropped below
                return (s.file, chunk, entry, slot)
            }
            defer { unpin(slot, file: file) }
            var content = format.size
            do {
                var canvas = ImageTableCanvas(
                    format: format,
                    image: makeImage(file: file, chunk: chunk, entry: entry, slot: slot,
                                     width: layout.width, height: layout.height, writable: true, pinFirst: true))
                try draw(&canvas)
                content = canvas.contentSize
                let inPlace = canvas.image.withUnsafeBytes { $0.baseAddress } == UnsafeRawPointer(entry)
                    && canvas.image.bytesPerRow == layout.bytesPerRow
                if !inPlace {
                    let img = canvas.image
                    guard img.style == format.style, img.width <= layout.width, img.height <= layout.height else {
                        throw ImageTableError.imageDoesNotFit(format: format.name, size: img.size, style: img.style)
                    }
                    copyRows(of: img, to: entry)
                    content = img.size
                }
            }
            guard content.width >= 1, content.height >= 1, content.width <= layout.width, content.height <= layout.height else {
                throw ImageTableError.imageDoesNotFit(format: format.name, size: content, style: format.style)
            }
            let sequence = state.withLock { s in
                // The header's counter is outside its checksum: an implausible value is
                // recomputed from the records rather than trusted.
                let stored = s.metaMap.base.u64(48)
                let next = (1..<Self.sequenceLimit).contains(stored) ? stored : nextSequenceFromRecords(&s)
                s.metaMap.base.set(48, next + 1)
                return next
            }
            let rows = UnsafeRawBufferPointer(start: entry, count: layout.rowsBytes)
            let fields = EntryTrailer.Fields(
                width: content.width, height: content.height, id: id, sourceVersion: sourceVersion,
                sequence: sequence, pixelChecksum: EntryTrailer.pixelChecksum(rows, id: id, sourceVersion: sourceVersion))
            // Pixels are complete before the trailer that vouches for them.
            atomicMemoryFence(ordering: .sequentiallyConsistent)
            EntryTrailer.write(fields, to: entry + layout.trailerOffset, slot: slot)
            atomicMemoryFence(ordering: .sequentiallyConsistent)
            state.withLock { s in
                let now = tick(&s)
                MetadataLayout.writeRecord(record(&s, slot), slot: slot,
                                           .init(id: id, sourceVersion: sourceVersion, sequence: sequence), lastUsed: now)
                s.index[id] = slot
                s.slots[slot].verified(fields)
                s.slots[slot].lastUsed = now
                s.slots[slot].flushedUsed = now
                bumpChange(&s)
                pin(&s, slot)   // for the returned image
            }
            return makeImage(file: file, chunk: chunk, entry: entry, slot: slot, width: content.width,
                             height: content.height, writable: false)
        }
    }

    /// Stores a copy of `image` (which must have the format's style and fit its size).
    @discardableResult
    public func setImage(_ image: PixelImage, for id: ImageEntityID, sourceVersion: UInt64) throws -> PixelImage {
        guard image.style == format.style, image.width <= layout.width, image.height <= layout.height else {
            throw ImageTableError.imageDoesNotFit(format: format.name, size: image.size, style: image.style)
        }
        return try store(id, sourceVersion: sourceVersion) { canvas in
            let entry = canvas.image.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress!) }
            copyRows(of: image, to: entry)
            canvas.contentSize = image.size
        }
    }

    /// Removes the entry of `id` (its slot becomes free once no image references it).
    public func delete(_ id: ImageEntityID) throws(ImageTableError) {
        try writing { s throws(ImageTableError) in
            guard let slot = lookup(&s, id) else { return }
            // Reserved before the store below (the slot could be a hole inside the file).
            let entry = entryPointer(&s, slot) == nil ? nil : try reservedEntry(&s, slot).1
            s.index.removeValue(forKey: id)
            if let entry { EntryTrailer.invalidate(entry + layout.trailerOffset) }
            MetadataLayout.writeRecord(record(&s, slot), slot: slot, nil, lastUsed: 0)
            s.slots[slot].verified = 0
            bumpChange(&s)
        }
    }

    /// Empties the table: new, empty files are renamed over the old ones (never truncated in
    /// place), so images already handed out stay valid; other processes switch on their next
    /// access.
    public func reset() throws(ImageTableError) {
        try writing { s throws(ImageTableError) in
            let fresh = try Self.createFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath)
            retire(&s)
            s = fresh
            pins.clearOwn()
        }
    }

    /// Rewrites the table with its live entries packed into the lowest slots, as new files
    /// renamed over the old ones, and returns the bytes of disk freed. Images already handed
    /// out keep the old (unlinked) mapping.
    @discardableResult
    public func compact() throws(ImageTableError) -> Int {
        try writing { s throws(ImageTableError) -> Int in
            let before = (try? Int(s.file.stat().st_blocks) * 512) ?? 0
            var fresh = try Self.createFiles(layout: layout, format: format, tablePath: tablePath + ".compact",
                                             metaPath: metaPath + ".compact", publish: false)
            var next = 0
            var nextSequence: UInt64 = 1
            for (id, slot) in s.index.sorted(by: { $0.value < $1.value }) {
                guard let (_, from) = entryPointer(&s, slot),
                      let f = verify(&s, slot, from), f.id == id else { continue }
                let (_, to) = try reservedEntry(&fresh, next)
                to.copyMemory(from: from, byteCount: layout.rowsBytes)
                EntryTrailer.write(f, to: to + layout.trailerOffset, slot: next)
                MetadataLayout.writeRecord(record(&fresh, next), slot: next,
                                           .init(id: id, sourceVersion: f.sourceVersion, sequence: f.sequence),
                                           lastUsed: max(Self.saneRecency(record(&s, slot).u64(40)), s.slots[slot].lastUsed))
                fresh.index[id] = next
                fresh.slots[next].verified(f)
                nextSequence = max(nextSequence, Self.sequence(after: f.sequence))
                next += 1
            }
            fresh.metaMap.base.set(48, max(nextSequence, s.metaMap.base.u64(48)))
            fresh.freeCursor = next
            do throws(SystemCallError) {
                try fresh.file.sync()
                try fresh.meta.sync()
                try Syscall.retrying("rename", path: tablePath) { rename(tablePath + ".compact", tablePath) }
                try Syscall.retrying("rename", path: metaPath) { rename(metaPath + ".compact", metaPath) }
                fresh.file.path = tablePath
                fresh.meta.path = metaPath
            } catch { throw .system(error) }
            retire(&s)
            s = fresh
            pins.clearOwn()
            let after = (try? Int(s.file.stat().st_blocks) * 512) ?? 0
            return max(0, before - after)
        }
    }

    /// Writes the metadata and table files' dirty pages to disk (`msync` is implied by `fsync`
    /// on a shared mapping on Linux).
    public func flush() throws(ImageTableError) {
        let (file, meta) = state.withLock { s in
            flushRecency(&s)
            return (s.file, s.meta)
        }
        do {
            try file.sync()
            try meta.sync()
        } catch { throw .system(error) }
    }

    // MARK: - Internals (callers hold the state lock where `inout State` is passed)

    /// What this instance knows about a slot (64 bytes: one cache line per hit).
    struct SlotState {
        /// The write sequence whose pixel checksum this instance verified (0 = none), and what
        /// that write holds.
        var verified: UInt64 = 0
        var id = ImageEntityID(high: 0, low: 0)
        var sourceVersion: UInt64 = 0
        /// Last use by this instance, and the value last written to the shared record.
        var lastUsed: UInt64 = 0
        var flushedUsed: UInt64 = 0
        /// Live images (and writers) of the slot in this instance.
        var pins: Int32 = 0
        var width: UInt16 = 0
        var height: UInt16 = 0

        mutating func verified(_ f: EntryTrailer.Fields) {
            verified = f.sequence
            id = f.id
            sourceVersion = f.sourceVersion
            width = UInt16(f.width)
            height = UInt16(f.height)
        }
    }

    /// Recency is kept per instance and written to the shared records in batches: a slot is
    /// queued when its last use is a second newer than what the record holds.
    static let recencyFlushInterval: UInt64 = 1_000_000_000
    static let recencyBatch = 256

    /// Values read from the files beyond these bounds are damage, not data: a last-used time
    /// past 2116 (nanoseconds since 1970) counts as never used, and write sequences stay below
    /// 2^62, so counters derived from the files can never overflow.
    static let recencyLimit: UInt64 = 1 << 62
    static let sequenceLimit: UInt64 = 1 << 62

    /// A record's last-used time as stored, or 0 when it is implausible.
    static func saneRecency(_ used: UInt64) -> UInt64 { used < recencyLimit ? used : 0 }

    /// The write sequence to use after `sequence` (saturating at ``sequenceLimit``).
    static func sequence(after sequence: UInt64) -> UInt64 { min(sequence, sequenceLimit - 1) + 1 }

    /// The next write sequence derived from the valid records (when the header's is damaged).
    private func nextSequenceFromRecords(_ s: inout State) -> UInt64 {
        var highest: UInt64 = 0
        for slot in 0..<layout.maximumCount {
            if case .valid(let rec) = MetadataLayout.readRecord(record(&s, slot), slot: slot) { highest = max(highest, rec.sequence) }
        }
        return Self.sequence(after: highest)
    }

    private func touch(_ s: inout State, _ slot: Int) {
        let now = tick(&s)
        s.slots[slot].lastUsed = now
        if now &- s.slots[slot].flushedUsed > Self.recencyFlushInterval {
            s.slots[slot].flushedUsed = now
            s.touched.append(Int32(slot))
            if s.touched.count >= Self.recencyBatch { flushRecency(&s) }
        }
    }

    /// Writes queued recency to the shared records (only where a record still names the write
    /// this instance used).
    func flushRecency(_ s: inout State) {
        for slot in s.touched.map({ Int($0) }) {
            let r = record(&s, slot)
            if r.u32(32) == 1, r.u64(24) == s.slots[slot].verified {
                r.set(40, max(r.u64(40), s.slots[slot].lastUsed))
            }
        }
        s.touched.removeAll(keepingCapacity: true)
    }

    private func writing<R>(_ body: (inout State) throws(ImageTableError) -> R) throws(ImageTableError) -> R {
        let result: Result<R, ImageTableError> = writerGate.withLock { lockFile in
            do throws(SystemCallError) {
                try Self.lockWriter(&lockFile, permissions: format.filePermissions)
            } catch { return .failure(.system(error)) }
            defer { lockFile.unlock() }
            return state.withLock { s in
                do throws(ImageTableError) {
                    try refreshForWriting(&s)
                    return .success(try body(&s))
                } catch { return .failure(error) }
            }
        }
        return try result.get()
    }

    func record(_ s: inout State, _ slot: Int) -> UnsafeMutableRawPointer {
        s.metaMap.base + MetadataLayout.headerLength + slot * MetadataLayout.recordLength
    }

    private func tick(_ s: inout State) -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        let now = UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
        s.clock = max(s.clock &+ 1, now)
        return s.clock
    }

    private func bumpChange(_ s: inout State) {
        let p = s.metaMap.base
        let old = p.u64(40)
        p.set(40, old &+ 1)
        if s.seenChange == old { s.seenChange = old &+ 1 }
    }

    func pin(_ s: inout State, _ slot: Int) {
        s.slots[slot].pins += 1
        if s.slots[slot].pins == 1 { pins.set(slot, true) }
    }

    func unpinLocked(_ s: inout State, _ slot: Int) {
        s.slots[slot].pins -= 1
        if s.slots[slot].pins == 0 { pins.set(slot, false) }
    }

    func unpin(_ slot: Int, file: TableFileHandle) {
        state.withLock { s in
            guard s.file === file else { return }   // the table was reset or compacted since
            unpinLocked(&s, slot)
        }
    }

    /// The slot of `id`, re-reading the shared metadata if another writer changed it.
    private func lookup(_ s: inout State, _ id: ImageEntityID) -> Int? {
        let meta = s.metaMap.base
        if let slot = s.index[id], meta.u64(56) == 0 { return slot }
        if meta.u64(56) != 0 {
            // Our index describes a retired file: without the current one there is no answer.
            guard let fresh = try? Self.openFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath,
                                                  repair: false) else { return nil }
            adopt(&s, fresh)
            return s.index[id]
        }
        if meta.u64(40) != s.seenChange {
            rebuildIndex(&s)
            return s.index[id]
        }
        return nil
    }

    /// The chunk and start of `slot`'s entry for reading, mapping the chunk on first use; `nil`
    /// (a miss) when the file does not cover the entry yet or it cannot be mapped.
    func entryPointer(_ s: inout State, _ slot: Int) -> (TableMapping, UnsafeMutableRawPointer)? {
        let end = layout.entryOffset(slot) + layout.entryLength
        if end > s.fileSize {
            guard let size = try? s.file.size() else { return nil }
            s.fileSize = size
            guard end <= s.fileSize else { return nil }   // never touch pages past the end (SIGBUS)
        }
        return Self.entryPointerStatic(file: s.file, chunks: &s.chunks, layout: layout, slot: slot)
    }

    /// The chunk and start of `slot`'s entry for writing (under the `flock`): the entry's disk
    /// space is reserved first, so stores through the mapping cannot fault on a full disk.
    /// Throws the failing call's error (e.g. `posix_fallocate` with ENOSPC).
    func reservedEntry(_ s: inout State, _ slot: Int) throws(ImageTableError) -> (TableMapping, UnsafeMutableRawPointer) {
        do throws(SystemCallError) {
            // Always reserve the entry's own range: a larger file may still have a hole here.
            try s.file.reserve(offset: layout.entryOffset(slot), length: layout.entryLength)
            s.fileSize = max(s.fileSize, layout.entryOffset(slot) + layout.entryLength)
            return try Self.mapEntry(file: s.file, chunks: &s.chunks, layout: layout, slot: slot)
        } catch { throw .system(error) }
    }

    /// Verifies `slot`'s trailer and pixel checksum; records the verified sequence.
    private func verify(_ s: inout State, _ slot: Int, _ entry: UnsafeMutableRawPointer) -> EntryTrailer.Fields? {
        guard let f = EntryTrailer.read(entry + layout.trailerOffset, slot: slot),
              f.width >= 1, f.height >= 1, f.width <= layout.width, f.height <= layout.height else { return nil }
        if s.slots[slot].verified != f.sequence {
            let rows = UnsafeRawBufferPointer(start: entry, count: layout.rowsBytes)
            guard EntryTrailer.pixelChecksum(rows, id: f.id, sourceVersion: f.sourceVersion) == f.pixelChecksum else { return nil }
            s.slots[slot].verified(f)
        }
        return f
    }

    /// Picks the slot for a new entry of `id` and invalidates it (record, then trailer), making
    /// sure no other instance holds an image of it.
    private func chooseSlot(_ s: inout State, for id: ImageEntityID) throws(ImageTableError) -> Int {
        var excluded = Set<Int>()
        if let previous = s.index.removeValue(forKey: id) {
            // The entity's old slot: reuse it when nobody holds it, else just retire it.
            if try claim(&s, previous) { return previous }
            excluded.insert(previous)
        }
        var swept = false
        while true {
            var candidate = -1
            var cursor = s.freeCursor
            while cursor < layout.maximumCount {
                if s.slots[cursor].pins == 0, !excluded.contains(cursor), record(&s, cursor).u32(32) != 1 { candidate = cursor; break }
                cursor += 1
            }
            s.freeCursor = cursor
            if candidate < 0 {
                var oldest = UInt64.max
                for slot in 0..<layout.maximumCount where s.slots[slot].pins == 0 && !excluded.contains(slot) {
                    let r = record(&s, slot)
                    let used = r.u32(32) == 1 ? max(Self.saneRecency(r.u64(40)), s.slots[slot].lastUsed) : 0
                    if used < oldest { oldest = used; candidate = slot; if used == 0 { break } }
                }
            }
            if candidate < 0 {
                if !swept {
                    swept = true
                    pins.sweepDeadSegments()
                    excluded.removeAll()
                    continue
                }
                throw .tableFull(format: format.name, maximumCount: layout.maximumCount)
            }
            if try claim(&s, candidate) { return candidate }
            excluded.insert(candidate)
        }
    }

    /// Invalidates `slot` (record, index, trailer) and reports whether it is free to rewrite.
    private func claim(_ s: inout State, _ slot: Int) throws(ImageTableError) -> Bool {
        // Reserve the entry's disk space before anything is stored into it through the shared
        // mapping: a slot inside the file can be a hole (after a reset while another instance
        // held a slot), and a store into a hole on a full disk raises SIGBUS.
        let (_, entry) = try reservedEntry(&s, slot)
        // Held here, or (without a fence: a cheap early answer) by another instance: leave it be.
        guard s.slots[slot].pins == 0, !pins.isPinnedElsewhere(slot, fence: false) else { return false }
        let r = record(&s, slot)
        if case .valid(let old) = MetadataLayout.readRecord(r, slot: slot), s.index[old.id] == slot {
            s.index.removeValue(forKey: old.id)
        }
        MetadataLayout.writeRecord(r, slot: slot, nil, lastUsed: 0)
        s.slots[slot].verified = 0
        s.slots[slot].lastUsed = 0
        bumpChange(&s)
        EntryTrailer.invalidate(entry + layout.trailerOffset)
        return !pins.isPinnedElsewhere(slot)
    }

    private func makeImage(
        file: TableFileHandle, chunk: TableMapping, entry: UnsafeMutableRawPointer, slot: Int,
        width: Int, height: Int, writable: Bool, pinFirst: Bool = false
    ) -> PixelImage {
        if pinFirst { state.withLock { s in pin(&s, slot) } }
        let storage = PixelStorage(borrowing: entry, count: layout.rowsBytes, kind: .tableSlot, writable: writable) {
            [self, chunk] _, _ in
            withExtendedLifetime(chunk) { unpin(slot, file: file) }
        }
        return PixelImage(width: width, height: height, bytesPerRow: layout.bytesPerRow, style: layout.style,
                          storage: storage, offset: 0)
    }

    private func copyRows(of image: PixelImage, to entry: UnsafeMutableRawPointer) {
        let rowBytes = image.width * image.style.bytesPerPixel
        image.withUnsafeBytes { src in
            for y in 0..<image.height {
                let dst = entry + y * layout.bytesPerRow
                dst.copyMemory(from: src.baseAddress! + y * image.bytesPerRow, byteCount: rowBytes)
                if layout.bytesPerRow > rowBytes {
                    (dst + rowBytes).initializeMemory(as: UInt8.self, repeating: 0, count: layout.bytesPerRow - rowBytes)
                }
            }
            for y in image.height..<layout.height {
                (entry + y * layout.bytesPerRow).initializeMemory(as: UInt8.self, repeating: 0, count: layout.bytesPerRow)
            }
        }
    }

    /// Before writing: follow a reset/compaction by another process, and pick up its changes.
    private func refreshForWriting(_ s: inout State) throws(ImageTableError) {
        if s.metaMap.base.u64(56) != 0 || !Self.isCurrent(s.meta) || !Self.isCurrent(s.file) {
            // Replaced by another process (or removed): retire our view and reopen.
            s.metaMap.base.set(56, UInt64(1))
            adopt(&s, try Self.openFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath, repair: true))
        } else if s.metaMap.base.u64(40) != s.seenChange {
            rebuildIndex(&s)
        }
    }

    /// Switches to `fresh` (the files reopened after another instance replaced or rebuilt
    /// them). When the table file is still the same file (only the metadata was rebuilt), this
    /// instance's live images are in it: its handle, mappings and pin counts are kept, and so
    /// are its shared pin bits. Only a really new table file starts with no pins.
    private func adopt(_ s: inout State, _ fresh: State) {
        var fresh = fresh
        if Self.isSameFile(s.file, fresh.file) {
            fresh.file = s.file
            fresh.chunks = s.chunks
            fresh.fileSize = max(s.fileSize, fresh.fileSize)
            fresh.clock = max(s.clock, fresh.clock)
            for slot in 0..<layout.maximumCount { fresh.slots[slot].pins = s.slots[slot].pins }
            s = fresh
        } else {
            s = fresh
            pins.clearOwn()
        }
    }

    private static func openLockFile(_ path: String, permissions: UInt32) throws(SystemCallError) -> TableFileHandle {
        let lock = try TableFileHandle.open(path, flags: O_RDWR | O_CREAT, permissions: permissions)
        _ = fchmod(lock.fd, mode_t(permissions))
        return lock
    }

    /// Takes the writer `flock` on the file now at `lock`'s path: a lock on a file that was
    /// deleted or replaced since it was opened excludes nobody who opens the path, so then the
    /// path is opened again (creating it) and locked again.
    private static func lockWriter(_ lock: inout TableFileHandle, permissions: UInt32) throws(SystemCallError) {
        while true {
            try lock.lockExclusive()
            if isCurrent(lock) { return }
            lock.unlock()
            lock = try openLockFile(lock.path, permissions: permissions)
        }
    }

    /// Whether two handles are open on the same file (device and inode).
    private static func isSameFile(_ a: TableFileHandle, _ b: TableFileHandle) -> Bool {
        guard let x = try? a.stat(), let y = try? b.stat() else { return false }
        return x.st_ino == y.st_ino && x.st_dev == y.st_dev
    }

    /// Whether `file`'s path still names the file we have open (an `fstat` and a `stat`).
    private static func isCurrent(_ file: TableFileHandle) -> Bool {
        var byPath = stat()
        guard let open = try? file.stat(), stat(file.path, &byPath) == 0 else { return false }
        return open.st_ino == byPath.st_ino && open.st_dev == byPath.st_dev
    }

    private func retire(_ s: inout State) {
        s.metaMap.base.set(56, UInt64(1))
    }

    /// Rebuilds the in-memory index from the metadata records; returns the corrupt slots.
    @discardableResult
    private func rebuildIndex(_ s: inout State) -> [Int] {
        s.seenChange = s.metaMap.base.u64(40)
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        let (index, corrupt) = Self.scanRecords(s.metaMap, slots: layout.maximumCount)
        s.index = index
        // Forget verifications of writes that another process has since replaced: the hit fast
        // path trusts them while the change counter stays at `seenChange`.
        for slot in 0..<layout.maximumCount where s.slots[slot].verified != 0 {
            let r = record(&s, slot)
            if r.u32(32) != 1 || r.u64(24) != s.slots[slot].verified { s.slots[slot].verified = 0 }
        }
        return corrupt
    }

    static func scanRecords(_ meta: TableMapping, slots: Int) -> ([ImageEntityID: Int], [Int]) {
        var index: [ImageEntityID: Int] = [:]
        var sequences: [ImageEntityID: UInt64] = [:]
        var corrupt: [Int] = []
        for slot in 0..<slots {
            let r = meta.base + MetadataLayout.headerLength + slot * MetadataLayout.recordLength
            switch MetadataLayout.readRecord(r, slot: slot) {
            case .empty: break
            case .corrupt: corrupt.append(slot)
            case .valid(let rec):
                if let seq = sequences[rec.id], seq >= rec.sequence { continue }
                index[rec.id] = slot
                sequences[rec.id] = rec.sequence
            }
        }
        return (index, corrupt)
    }

    // MARK: - Opening and creating files (writer flock held unless `repair` is false)

    private static func openFiles(
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
                map.base.set(56, UInt64(1))
            }
            opened = try rebuildMetadata(file: file, chunks: &chunks, layout: layout, format: format,
                                         generation: generation, metaPath: metaPath)
        }
        var s = State(file: file, chunks: chunks, meta: opened!.0, metaMap: opened!.1,
                      slots: Array(repeating: SlotState(), count: layout.maximumCount))
        s.fileSize = (try? file.size()) ?? 0
        s.seenChange = s.metaMap.base.u64(40)
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
    private static func rebuildMetadata(
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
    private static func createFiles(
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
}
