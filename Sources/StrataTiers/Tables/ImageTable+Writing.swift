import Synchronization
import StrataBase

/// Writing: every writer holds the writer gate and the file's `flock` (which readers never
/// take) for its whole operation, and the state lock only for short in-memory updates: disk
/// reservations, mappings, scans and the draw run outside it.
extension ImageTable {
    /// Draws the entry for `id` at `sourceVersion` into a slot and returns it (pinned).
    ///
    /// `draw` gets a canvas whose image is the slot's memory (format size and style); it runs
    /// with this table's writer gate and `flock` held (readers go on meanwhile). The slot is the
    /// entity's old slot when that is free, else an unused one, else the least recently used
    /// slot that no live image references. Throws ``ImageTableError/tableFull(format:maximumCount:)``
    /// when every slot is held, and rethrows `draw`'s errors (the entry is then absent).
    ///
    /// `streaming`: for a writer that streams many entries it does not read back (a pyramid's
    /// build). The canvas is then private memory, not the slot, and the entry reaches the file
    /// with two `pwrite`s (pixels, then the trailer that vouches for them) into the page cache
    /// every mapping of the table shares, and the slot's pages leave this process's resident set
    /// (only the trailer's page, invalidated through the mapping when the slot is claimed, was
    /// mapped): the kernel's buffered write path is much cheaper than faulting and dirtying
    /// shared mapped pages one by one. The canvas's image is valid during `draw` only.
    ///
    /// Blocks (waits for other processes' writers, reserves disk space): call it from a
    /// dedicated thread, never from Swift's cooperative pool.
    @discardableResult
    public func store(
        _ id: ImageEntityID, sourceVersion: UInt64, streaming: Bool = false, draw: (inout ImageTableCanvas) throws -> Void
    ) throws -> PixelImage {
        try writerGate.withLock { lockFile throws -> PixelImage in
            try lockAndRefresh(&lockFile)
            defer { Self.unlockWriter(lockFile) }
            state.withLock { s in flushRecency(&s) }
            let (file, chunk, entry, slot) = try chooseSlot(for: id)  // pinned by this writer
            defer { unpin(slot, file: file) }
            var content = format.size
            // Streaming: the rows drawn into private memory and written out below.
            var streamed: PixelImage?
            do {
                var canvas = ImageTableCanvas(
                    format: format,
                    image: streaming
                        ? takeStreamingRows()
                        : makeImage(
                            file: file, chunk: chunk, entry: entry, slot: slot,
                            width: layout.width, height: layout.height, writable: true, pinFirst: true))
                let start = streaming ? canvas.image.withUnsafeBytes { $0.baseAddress! } : UnsafeRawPointer(entry)
                try draw(&canvas)
                content = canvas.contentSize
                let inPlace =
                    canvas.image.withUnsafeBytes { $0.baseAddress } == start && canvas.image.bytesPerRow == layout.bytesPerRow
                if inPlace, streaming {
                    // Never write what the heap held before.
                    canvas.image.withUnsafeMutableBytes { zeroOutside(content, in: $0.baseAddress!) }
                    streamed = canvas.image
                } else if !inPlace {
                    let img = canvas.image
                    guard img.style == format.style, img.width <= layout.width, img.height <= layout.height else {
                        throw ImageTableError.imageDoesNotFit(format: format.name, size: img.size, style: img.style)
                    }
                    if streaming {
                        var rows = takeStreamingRows()
                        rows.withUnsafeMutableBytes { copyRows(of: img, to: $0.baseAddress!) }
                        streamed = rows
                    } else {
                        copyRows(of: img, to: entry)
                    }
                    content = img.size
                }
            }
            guard content.width >= 1, content.height >= 1, content.width <= layout.width, content.height <= layout.height else {
                throw ImageTableError.imageDoesNotFit(format: format.name, size: content, style: format.style)
            }
            let sequence = takeSequence()
            func trailer(_ rows: UnsafeRawBufferPointer) -> EntryTrailer.Fields {
                EntryTrailer.Fields(
                    width: content.width, height: content.height, id: id, sourceVersion: sourceVersion,
                    sequence: sequence, pixelChecksum: EntryTrailer.pixelChecksum(rows, id: id, sourceVersion: sourceVersion))
            }
            let fields: EntryTrailer.Fields
            if let streamed {
                precondition(streamed.bytesPerRow == layout.bytesPerRow, "ImageTable: streamed rows of another stride")
                fields = try streamed.withUnsafeBytes { raw throws(ImageTableError) in
                    let rows = UnsafeRawBufferPointer(start: raw.baseAddress, count: layout.rowsBytes)
                    let fields = trailer(rows)
                    try writeThrough(rows, fields, slot: slot, file: file)
                    return fields
                }
                // Kept for the next streaming store; a draw that kept a copy of its canvas
                // shares it, and the next draw's writes then copy it first (copy on write).
                streamingRows.withLock { $0 = streamed }
            } else {
                fields = trailer(UnsafeRawBufferPointer(start: entry, count: layout.rowsBytes))
                // Pixels are complete before the trailer that vouches for them.
                atomicMemoryFence(ordering: .sequentiallyConsistent)
                layout.trailer(entry).write(fields, slot: slot)
                atomicMemoryFence(ordering: .sequentiallyConsistent)
            }
            state.withLock { s in
                // The files cannot have been replaced (gate and flock held); if they were, the
                // entry is simply not published (the returned image stays valid).
                guard s.file === file else { return }
                let now = tick(&s)
                record(&s, slot).write(.init(id: id, sourceVersion: sourceVersion, sequence: sequence), slot: slot, lastUsed: now)
                s.index[id] = slot
                s.slots[slot].verified(fields)
                s.slots[slot].lastUsed = now
                s.slots[slot].flushedUsed = now
                bumpChange(&s)
                pin(&s, slot)  // for the returned image
            }
            // The claim invalidated the old trailer through the mapping: that page leaves too.
            if streaming { MappedRegion.dropResidentPages(entry, length: layout.entryLength) }
            return makeImage(
                file: file, chunk: chunk, entry: entry, slot: slot, width: content.width,
                height: content.height, writable: false)
        }
    }

    /// A streaming store's private rows (the last one's, or new): every byte is written before
    /// it is read (drawn, copied or zeroed outside the content).
    private func takeStreamingRows() -> PixelImage {
        let kept = streamingRows.withLock { rows -> PixelImage? in
            defer { rows = nil }
            return rows
        }
        return kept ?? PixelImage(uninitializedWidth: layout.width, height: layout.height, style: layout.style)
    }

    /// Stores a copy of `image` (which must have the format's style and fit its size). Blocks
    /// like ``store(_:sourceVersion:streaming:draw:)``.
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

    /// Removes the entry of `id` (its slot becomes free once no image references it). Blocks
    /// like ``store(_:sourceVersion:streaming:draw:)``.
    public func delete(_ id: ImageEntityID) throws(ImageTableError) {
        try writing { () throws(ImageTableError) in
            let (found, file) = state.withLock { ($0.index[id], $0.file) }
            guard let slot = found else { return }
            // The slot could be a hole inside the file: reserved before the store below.
            var entry: UnsafeMutableRawPointer?
            let size: Int
            do throws(SystemCallError) { size = try file.resource.size() } catch { throw .system(error) }
            if layout.entryEnd(slot) <= size { entry = try reservedEntry(slot, file: file).1 }
            state.withLock { s in
                guard s.file === file, s.index[id] == slot else { return }
                s.index.removeValue(forKey: id)
                if let entry { layout.trailer(entry).invalidate() }
                record(&s, slot).write(nil, slot: slot, lastUsed: 0)
                s.slots[slot].verified = 0
                bumpChange(&s)
            }
        }
    }

    /// Runs `body` with the writer gate and `flock` held, after following other instances.
    package func writing<R>(_ body: () throws(ImageTableError) -> R) throws(ImageTableError) -> R {
        try writerGate.withLock { lockFile throws(ImageTableError) -> R in
            try lockAndRefresh(&lockFile)
            defer { Self.unlockWriter(lockFile) }
            return try body()
        }
    }

    /// Takes the writer `flock` (blocking while another process writes) and follows what other
    /// instances did meanwhile.
    package func lockAndRefresh(_ lockFile: inout Shared<FileDescriptor>) throws(ImageTableError) {
        do throws(SystemCallError) {
            try Self.lockWriter(&lockFile, permissions: format.filePermissions)
        } catch { throw .system(error) }
        do {
            try refreshForWriting()
        } catch {
            Self.unlockWriter(lockFile)
            throw error
        }
    }

    /// The next write sequence (the header's counter is outside its checksum: an implausible
    /// value is recomputed from the records rather than trusted). Writers only.
    private func takeSequence() -> UInt64 {
        let metaMap = state.withLock { $0.metaMap }
        let header = MetadataHeaderView(base: metaMap.resource.base)
        var next = header.nextSequence
        if !(1..<Self.sequenceLimit).contains(next) {
            var highest: UInt64 = 0
            for slot in 0..<layout.maximumCount {
                if case .valid(let rec) = MetadataLayout.record(metaMap.resource.base, slot).read(slot: slot) {
                    highest = max(highest, rec.sequence)
                }
            }
            next = Self.sequence(after: highest)
        }
        header.nextSequence = next + 1
        return next
    }

    // MARK: - Choosing and claiming a slot (writer gate held)

    /// A slot invalidated and pinned for the writer: the table file, the chunk, the entry.
    package typealias ClaimedSlot = (file: Shared<FileDescriptor>, chunk: Shared<MappedRegion>, entry: UnsafeMutableRawPointer, slot: Int)

    /// Picks the slot for a new entry of `id`, invalidates it (record, then trailer) and pins
    /// it, making sure no other instance holds an image of it.
    private func chooseSlot(for id: ImageEntityID) throws(ImageTableError) -> ClaimedSlot {
        var excluded = Set<Int>()
        // The entity's old slot: reuse it when nobody holds it. It stays indexed until claimed (a
        // claim that fails — no disk space — must not lose the entry); while somebody holds it,
        // it stays valid until the new write replaces it in the index.
        if let previous = state.withLock({ $0.index[id] }) {
            if let claimed = try claim(previous) { return claimed }
            excluded.insert(previous)
        }
        var swept = false
        while true {
            guard let candidate = nextFreeSlot(excluding: excluded) ?? leastRecentlyUsedSlot(excluding: excluded) else {
                if !swept {
                    swept = true
                    pins.sweepDeadSegments()
                    excluded.removeAll()
                    continue
                }
                throw .tableFull(format: format.name, maximumCount: layout.maximumCount)
            }
            if let claimed = try claim(candidate) { return claimed }
            excluded.insert(candidate)
        }
    }

    /// The first slot from the free cursor on that no record and no image uses, looked at
    /// ``scanBatch`` slots per hold of the lock.
    private func nextFreeSlot(excluding excluded: Set<Int>) -> Int? {
        while true {
            let (found, finished) = state.withLock { s -> (Int?, Bool) in
                var cursor = s.freeCursor
                let end = min(layout.maximumCount, cursor + Self.scanBatch)
                defer { s.freeCursor = cursor }
                while cursor < end {
                    if s.slots[cursor].pins == 0, !excluded.contains(cursor), !record(&s, cursor).isMarkedValid { return (cursor, true) }
                    cursor += 1
                }
                return (nil, cursor >= layout.maximumCount)
            }
            if finished { return found }
        }
    }

    /// The least recently used slot that no image uses (never-used slots first), looked at
    /// ``scanBatch`` slots per hold of the lock.
    private func leastRecentlyUsedSlot(excluding excluded: Set<Int>) -> Int? {
        var candidate: Int?
        var oldest = UInt64.max
        var start = 0
        while start < layout.maximumCount && oldest > 0 {
            let end = min(layout.maximumCount, start + Self.scanBatch)
            state.withLock { s in
                for slot in start..<end where s.slots[slot].pins == 0 && !excluded.contains(slot) {
                    let r = record(&s, slot)
                    let used = r.isMarkedValid ? max(Self.saneRecency(r.lastUsed), s.slots[slot].lastUsed) : 0
                    if used < oldest {
                        oldest = used
                        candidate = slot
                        if used == 0 { break }
                    }
                }
            }
            start = end
        }
        return candidate
    }

    /// Invalidates `slot` (record, index, trailer) and pins it for the writer when nobody else
    /// holds it; `nil` when somebody does.
    private func claim(_ slot: Int) throws(ImageTableError) -> ClaimedSlot? {
        // Reserve the entry's disk space before anything is stored into it through the shared
        // mapping: a slot inside the file can be a hole (after a reset while another instance
        // held a slot), and a store into a hole on a full disk raises SIGBUS.
        let file = state.withLock { $0.file }
        let (chunk, entry) = try reservedEntry(slot, file: file)
        let claimed = state.withLock { s -> Bool in
            // Held here, or (without a fence: a cheap early answer) by another instance: leave it be.
            guard s.file === file, s.slots[slot].pins == 0, !pins.isPinnedElsewhere(slot, fence: false) else { return false }
            let r = record(&s, slot)
            if case .valid(let old) = r.read(slot: slot), s.index[old.id] == slot {
                s.index.removeValue(forKey: old.id)
            }
            r.write(nil, slot: slot, lastUsed: 0)
            s.slots[slot].verified = 0
            s.slots[slot].lastUsed = 0
            bumpChange(&s)
            layout.trailer(entry).invalidate()
            pin(&s, slot)
            return true
        }
        guard claimed else { return nil }
        if pins.isPinnedElsewhere(slot) {
            unpin(slot, file: file)
            return nil
        }
        return (file, chunk, entry, slot)
    }

    /// The chunk and start of `slot`'s entry of `file` for writing: the entry's disk space is
    /// reserved first (outside the state lock), so stores through the mapping cannot fault on
    /// a full disk. Throws the failing call's error (e.g. `posix_fallocate` with ENOSPC).
    package func reservedEntry(
        _ slot: Int, file: Shared<FileDescriptor>
    ) throws(ImageTableError) -> (Shared<MappedRegion>, UnsafeMutableRawPointer) {
        do throws(SystemCallError) {
            // Always reserve the entry's own range: a larger file may still have a hole here.
            try file.resource.allocate(offset: layout.entryOffset(slot), length: layout.entryLength)
            noteFileSize(layout.entryEnd(slot), of: file)
            return try mapChunk(of: slot, file: file)
        } catch { throw .system(error) }
    }

    /// A streamed entry's rows, then its trailer, written into `slot` of `file` (two `pwrite`s,
    /// in that order: a reader never finds a trailer vouching for pixels not yet there).
    private func writeThrough(
        _ rows: UnsafeRawBufferPointer, _ fields: EntryTrailer.Fields, slot: Int, file: Shared<FileDescriptor>
    ) throws(ImageTableError) {
        let trailer = UnsafeMutableRawPointer.allocate(byteCount: EntryTrailerView.length, alignment: 64)
        defer { trailer.deallocate() }
        trailer.initializeMemory(as: UInt8.self, repeating: 0, count: EntryTrailerView.length)
        EntryTrailerView(base: trailer).write(fields, slot: slot)
        do throws(SystemCallError) {
            try file.resource.write(rows, at: layout.entryOffset(slot))
            try file.resource.write(
                UnsafeRawBufferPointer(start: trailer, count: EntryTrailerView.length), at: layout.entryOffset(slot) + layout.trailerOffset)
        } catch {
            throw .system(error)
        }
    }

    /// Zeroes what lies outside `content` in the rows at `entry`.
    private func zeroOutside(_ content: PixelSize, in entry: UnsafeMutableRawPointer) {
        let used = content.width * layout.style.bytesPerPixel
        for y in 0..<layout.height {
            let row = entry + y * layout.bytesPerRow
            if y >= content.height {
                row.initializeMemory(as: UInt8.self, repeating: 0, count: layout.bytesPerRow)
            } else if used < layout.bytesPerRow {
                (row + used).initializeMemory(as: UInt8.self, repeating: 0, count: layout.bytesPerRow - used)
            }
        }
    }

    package func copyRows(of image: PixelImage, to entry: UnsafeMutableRawPointer) {
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
}
