import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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
/// - Readers never wait for writers. They share one in-memory lock with them, and nobody holds
///   it for more than a few in-memory updates: every file operation (reserving disk space,
///   mapping, copying, `fsync`, renaming, the writer `flock`), every scan of the whole metadata
///   and every draw runs outside it. Writers (``store(_:sourceVersion:streaming:draw:)``, ``delete(_:)``,
///   ``reset()``, ``compact()``) are serialised by a writer gate and the file's `flock`, which
///   readers never take; all of them block, so call them from a dedicated thread
///   (``ImageTableCache`` runs them on its ``/StrataBase/BlockingPool``).
/// - A write invalidates the slot, draws the pixels, then writes the trailer, then the metadata
///   record: a process killed at any point leaves a miss, never a torn image.
/// - A slot referenced by a live ``/StrataBase/PixelImage`` (in this or any other process) is never reused;
///   when every slot is held, a write throws ``ImageTableError/tableFull(format:maximumCount:)``.
/// - The file is never truncated or shrunk in place: ``reset()`` and ``compact()`` write new
///   files and rename them over the old ones, so existing images stay valid; readers keep being
///   served from the old files until the new ones are in place.
///
/// Limits worth knowing:
/// - An entry's pixel checksum is verified once per instance and write (on its first
///   retrieval); later corruption of the mapped bytes in memory is not re-detected.
/// - After another process wrote, the first miss in this instance re-reads the whole metadata
///   (64 bytes per slot) to pick up its entries — outside the lock, one reader at a time; other
///   readers meanwhile answer from the index they have (a miss for what it lacks).
/// - The files must not be truncated or deleted by anything else while instances have them
///   open (a truncated mapping raises SIGBUS; a deleted metadata file is only noticed by this
///   instance's next write, hits meanwhile still check each entry's trailer; a deleted lock
///   file is reopened by writers, but instances opened before and after it hold their pin
///   leases on different files, so one may take the other's segment for dead).
/// - At most 32 instances (across processes) may have one table open at once.
/// - `store`'s `draw` must not call `store` on the same table (the writer gate is not
///   re-entrant).
public final class ImageTable: Sendable {
    public let format: ImageTableFormat
    public let directory: String
    package let layout: TableLayout
    package let tablePath: String
    package let metaPath: String
    package let pins: SharedPins
    /// Serialises this instance's writers (the `flock` is per open file, so it does not), and
    /// holds the open `<name>.lock` file writers `flock` (reopened when the file was replaced).
    /// Held across the `flock` wait, file work and the draw: only writers take it.
    package let writerGate: Lock<Shared<FileDescriptor>>
    /// The private rows a streaming `store` draws into, kept for the next one (writers are
    /// serialised by `writerGate`): a build writes thousands of entries, and a fresh heap block
    /// for each is page faults in every entry (and, under the address sanitizer, a quarantine
    /// of freed blocks that grows with the build).
    package let streamingRows = Lock<PixelImage?>(nil)
    /// What readers and writers of this instance share. Held only for short in-memory work.
    package let state: Lock<State>
    /// Test seams (pausing a compaction or a metadata scan part-way).
    package let hooks = TableTestHooks()

    package struct State {
        /// The table file (its identity tells images whose pins are still counted here).
        package var file: Shared<FileDescriptor>
        /// Mappings of the table file's chunks, made on first use.
        package var chunks: [Shared<MappedRegion>?]
        package var meta: Shared<FileDescriptor>
        package var metaMap: Shared<MappedRegion>
        package var index: [ImageEntityID: Int] = [:]
        /// Per-slot state of this instance.
        package var slots: [SlotState]
        /// The shared change counter the index reflects.
        package var seenChange: UInt64 = 0
        package var clock: UInt64 = 0
        package var freeCursor = 0
        /// The table file's size as last seen; entries past it are not touched.
        package var fileSize = 0
        /// Slots whose recency is waiting to be written to the shared records.
        package var touched: [Int32] = []
        /// A reader is bringing the index up to date (outside the lock); others do not queue up
        /// behind it but answer from what is here.
        package var maintaining = false
    }

    /// Opens (creating if needed) the table for `format` in `directory` (created, with its
    /// parents, if missing).
    ///
    /// Rebuilds the metadata from the entries' trailers when it is missing, truncated or
    /// corrupt, and replaces a table file whose header does not match the format. Cost: reads
    /// the metadata file (64 bytes per slot); a rebuild also reads every stored trailer. Blocks
    /// while another process writes the table.
    public init(directory: String, format: ImageTableFormat) throws(ImageTableError) {
        try format.validate()
        self.format = format
        self.directory = directory
        self.layout = TableLayout(format: format)
        self.tablePath = directory + "/" + format.name + ".table"
        self.metaPath = directory + "/" + format.name + ".meta"
        let lockPath = directory + "/" + format.name + ".lock"
        var lock: Shared<FileDescriptor>
        do throws(SystemCallError) {
            try FileDescriptor.makeDirectories(directory)
            lock = try Self.openLockFile(lockPath, permissions: format.filePermissions)
            try Self.lockWriter(&lock, permissions: format.filePermissions)
        } catch { throw .system(error) }
        defer { Self.unlockWriter(lock) }
        writerGate = Lock(lock)
        pins = try SharedPins(
            path: directory + "/" + format.name + ".pins", format: format.name, slots: format.maximumCount,
            permissions: format.filePermissions, lockFile: lock)
        let opened = try Self.openFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath, repair: true)
        state = Lock(opened)
    }

    deinit {
        state.withLock { s in flushRecency(&s) }
    }

    /// Number of indexed entries.
    public var count: Int { state.withLock { $0.index.count } }

    /// Bytes the table's files occupy on disk (allocated blocks of the table, metadata and pins
    /// files).
    public var diskUsage: Int {
        let (file, meta) = state.withLock { ($0.file, $0.meta) }
        func used(_ f: Shared<FileDescriptor>) -> Int { (try? Int(f.resource.status().st_blocks) * 512) ?? 0 }
        return used(file) + used(meta) + pins.diskUsage
    }

    /// Writes the metadata and table files' dirty pages to disk (`msync` is implied by `fsync`
    /// on a shared mapping on Linux).
    public func flush() throws(ImageTableError) {
        let (file, meta) = state.withLock { s in
            flushRecency(&s)
            return (s.file, s.meta)
        }
        do throws(SystemCallError) {
            try file.resource.sync()
            try meta.resource.sync()
        } catch { throw .system(error) }
    }

    // MARK: - Per-slot state (callers hold the state lock where `inout State` is passed)

    /// What this instance knows about a slot.
    package struct SlotState {
        /// The write sequence whose pixel checksum this instance verified (0 = none), and what
        /// that write holds. Trusted only while the slot's trailer still names that write.
        package var verified: UInt64 = 0
        package var id = ImageEntityID(high: 0, low: 0)
        package var sourceVersion: UInt64 = 0
        /// Last use by this instance, and the value last written to the shared record.
        package var lastUsed: UInt64 = 0
        package var flushedUsed: UInt64 = 0
        /// Live images (and writers) of the slot in this instance.
        package var pins: Int32 = 0
        package var width: UInt16 = 0
        package var height: UInt16 = 0

        package mutating func verified(_ f: EntryTrailer.Fields) {
            verified = f.sequence
            id = f.id
            sourceVersion = f.sourceVersion
            width = UInt16(f.width)
            height = UInt16(f.height)
        }
    }

    /// Recency is kept per instance and written to the shared records in batches: a slot is
    /// queued when its last use is a second newer than what the record holds.
    package static let recencyFlushInterval: UInt64 = 1_000_000_000
    package static let recencyBatch = 256
    /// Slots looked at per hold of the state lock by the writers' scans (free slot, least
    /// recently used slot, compaction), so that readers get the lock between batches.
    package static let scanBatch = 1024

    /// Values read from the files beyond these bounds are damage, not data: a last-used time
    /// past 2116 (nanoseconds since 1970) counts as never used, and write sequences stay below
    /// 2^62, so counters derived from the files can never overflow.
    package static let recencyLimit: UInt64 = 1 << 62
    package static let sequenceLimit: UInt64 = 1 << 62

    /// A record's last-used time as stored, or 0 when it is implausible.
    package static func saneRecency(_ used: UInt64) -> UInt64 { used < recencyLimit ? used : 0 }

    /// The write sequence to use after `sequence` (saturating at ``sequenceLimit``).
    package static func sequence(after sequence: UInt64) -> UInt64 { min(sequence, sequenceLimit - 1) + 1 }

    /// The shared metadata header of the files in place.
    package func header(_ s: inout State) -> MetadataHeaderView { MetadataHeaderView(base: s.metaMap.resource.base) }

    /// `slot`'s shared metadata record in the files in place.
    package func record(_ s: inout State, _ slot: Int) -> MetadataRecordView { MetadataLayout.record(s.metaMap.resource.base, slot) }

    package func tick(_ s: inout State) -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)  // vDSO, not a syscall; cannot fail for CLOCK_REALTIME
        let now = UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
        s.clock = max(s.clock &+ 1, now)
        return s.clock
    }

    package func touch(_ s: inout State, _ slot: Int) {
        let now = tick(&s)
        s.slots[slot].lastUsed = now
        if now &- s.slots[slot].flushedUsed > Self.recencyFlushInterval {
            s.slots[slot].flushedUsed = now
            s.touched.append(Int32(slot))
            if s.touched.count >= Self.recencyBatch { flushRecency(&s) }
        }
    }

    /// Writes queued recency to the shared records (only where a record still names the write
    /// this instance used). At most ``recencyBatch`` records.
    package func flushRecency(_ s: inout State) {
        for slot in s.touched.map({ Int($0) }) {
            let r = record(&s, slot)
            if r.isMarkedValid, r.sequence == s.slots[slot].verified {
                r.lastUsed = max(r.lastUsed, s.slots[slot].lastUsed)
            }
        }
        s.touched.removeAll(keepingCapacity: true)
    }

    package func bumpChange(_ s: inout State) {
        let h = header(&s)
        let old = h.change
        h.change = old &+ 1
        if s.seenChange == old { s.seenChange = old &+ 1 }
    }

    package func pin(_ s: inout State, _ slot: Int) {
        s.slots[slot].pins += 1
        if s.slots[slot].pins == 1 { pins.set(slot, true) }
    }

    /// Drops a pin taken on `file` (nothing when the table was reset or compacted since: the
    /// pin counts of the old file are gone with it).
    package func unpinLocked(_ s: inout State, _ slot: Int, file: Shared<FileDescriptor>) {
        guard s.file === file else { return }
        s.slots[slot].pins -= 1
        if s.slots[slot].pins == 0 { pins.set(slot, false) }
    }

    package func unpin(_ slot: Int, file: Shared<FileDescriptor>) {
        state.withLock { s in unpinLocked(&s, slot, file: file) }
    }

    /// An image over `entry` that unpins `slot` when its last copy goes away (the caller has
    /// pinned it, or `pinFirst` pins it here).
    package func makeImage(
        file: Shared<FileDescriptor>, chunk: Shared<MappedRegion>, entry: UnsafeMutableRawPointer, slot: Int,
        width: Int, height: Int, writable: Bool, pinFirst: Bool = false
    ) -> PixelImage {
        if pinFirst { state.withLock { s in pin(&s, slot) } }
        let storage = PixelStorage(borrowing: entry, count: layout.rowsBytes, kind: .tableSlot, writable: writable) {
            [self, chunk] _, _ in
            withExtendedLifetime(chunk) { unpin(slot, file: file) }
        }
        return PixelImage(
            width: width, height: height, bytesPerRow: layout.bytesPerRow, style: layout.style,
            storage: storage, offset: 0)
    }

    // MARK: - Mapping entries

    /// `slot`'s chunk and entry when the chunk is mapped and the file is known to cover the
    /// entry; `nil` otherwise (then ``mapChunk(of:file:)`` outside the lock).
    package func mappedEntry(_ s: inout State, _ slot: Int) -> (Shared<MappedRegion>, UnsafeMutableRawPointer)? {
        let (c, offset) = layout.chunkPosition(slot)
        guard layout.entryEnd(slot) <= s.fileSize, let chunk = s.chunks[c] else { return nil }
        return (chunk, chunk.resource.base + offset)
    }

    /// Maps `slot`'s chunk of `file` (outside the state lock) and installs it unless another
    /// thread did first; returns the chunk and the entry. Mappings may extend past the end of
    /// the file: callers only touch entries inside it.
    package func mapChunk(
        of slot: Int, file: Shared<FileDescriptor>
    ) throws(SystemCallError) -> (Shared<MappedRegion>, UnsafeMutableRawPointer) {
        let (c, entryOffset) = layout.chunkPosition(slot)
        if let mapped = state.withLock({ s in s.file === file ? s.chunks[c] : nil }) { return (mapped, mapped.resource.base + entryOffset) }
        let fresh = try Self.mapChunk(c, of: file, layout: layout)
        let chunk = state.withLock { s -> Shared<MappedRegion> in
            guard s.file === file else { return fresh }
            if let other = s.chunks[c] { return other }  // ours is unmapped after the lock is dropped
            s.chunks[c] = fresh
            return fresh
        }
        return (chunk, chunk.resource.base + entryOffset)
    }

    /// Records that `file` is at least `size` bytes long.
    package func noteFileSize(_ size: Int, of file: Shared<FileDescriptor>) {
        state.withLock { s in if s.file === file { s.fileSize = max(s.fileSize, size) } }
    }
}

/// Test seams of an ``ImageTable``: closures called at points where a test wants to pause work
/// that readers must not wait for. Empty in production (one uncontended lock per call site).
package final class TableTestHooks: Sendable {
    /// Called by ``ImageTable/compact()`` after each entry it copied (with the number copied so
    /// far), outside the state lock and with the writer gate held.
    package let afterCompactingEntry = Lock<(@Sendable (Int) -> Void)?>(nil)
    /// Called when a scan of the whole metadata (to bring the index up to date) has started,
    /// outside the state lock.
    package let duringIndexScan = Lock<(@Sendable () -> Void)?>(nil)

    package func call(_ hook: Lock<(@Sendable (Int) -> Void)?>, _ value: Int) {
        if let body = hook.withLock({ $0 }) { body(value) }
    }

    package func call(_ hook: Lock<(@Sendable () -> Void)?>) {
        if let body = hook.withLock({ $0 }) { body() }
    }
}
