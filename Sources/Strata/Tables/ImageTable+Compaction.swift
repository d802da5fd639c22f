#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Replacing the files: new files are written beside the old ones and renamed over them, never
/// truncated in place, so images already handed out stay valid. All of it runs outside the
/// state lock (readers keep being served from the old files meanwhile); only the switch to the
/// new files takes it, in O(1).
extension ImageTable {
    /// Empties the table: new, empty files are renamed over the old ones, so images already
    /// handed out stay valid; other processes switch on their next access. Blocks like
    /// ``store(_:sourceVersion:draw:)``; readers are not held up.
    public func reset() throws(ImageTableError) {
        try writing { () throws(ImageTableError) in
            var fresh = try Self.createFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath)
            publishReplacement(&fresh)
        }
    }

    /// Rewrites the table with its live entries packed into the lowest slots, as new files
    /// renamed over the old ones, and returns the bytes of disk freed. Images already handed
    /// out keep the old (unlinked) mapping. Blocks like ``store(_:sourceVersion:draw:)``; readers
    /// are served from the old files until the new ones are in place.
    @discardableResult
    public func compact() throws(ImageTableError) -> Int {
        try writing { () throws(ImageTableError) -> Int in
            let (file, metaMap) = state.withLock { ($0.file, $0.metaMap) }
            let before = (try? Int(file.stat().st_blocks) * 512) ?? 0
            var fresh = try Self.createFiles(layout: layout, format: format, tablePath: tablePath + ".compact",
                                             metaPath: metaPath + ".compact", publish: false)
            let fileSize: Int
            do throws(SystemCallError) { fileSize = try file.size() } catch { throw .system(error) }
            var next = 0
            var nextSequence: UInt64 = 1
            var start = 0
            while start < layout.maximumCount {
                for live in liveEntries(in: start..<min(layout.maximumCount, start + Self.scanBatch), of: file) {
                    guard layout.entryOffset(live.slot) + layout.entryLength <= fileSize,
                          let (_, from) = try? mapChunk(of: live.slot, file: file) else { continue }
                    // No writer can change the entry (the gate and flock are held): verify it
                    // unless this instance verified this very write before.
                    var verified = EntryTrailer.read(from + layout.trailerOffset, slot: live.slot)
                    if verified?.sequence != live.verified {
                        verified = Self.verifiedFields(from, slot: live.slot, layout: layout)
                    }
                    guard let f = verified, f.id == live.id else { continue }
                    let (_, to) = try Self.reservedEntry(&fresh, next, layout: layout)
                    to.copyMemory(from: from, byteCount: layout.rowsBytes)
                    EntryTrailer.write(f, to: to + layout.trailerOffset, slot: next)
                    let r = fresh.metaMap.base + MetadataLayout.headerLength + next * MetadataLayout.recordLength
                    MetadataLayout.writeRecord(r, slot: next, .init(id: f.id, sourceVersion: f.sourceVersion, sequence: f.sequence),
                                               lastUsed: live.lastUsed)
                    fresh.index[f.id] = next
                    fresh.slots[next].verified(f)
                    nextSequence = max(nextSequence, Self.sequence(after: f.sequence))
                    next += 1
                    hooks.call(hooks.afterCompactingEntry, next)
                }
                start += Self.scanBatch
            }
            fresh.metaMap.base.set(48, max(nextSequence, metaMap.base.u64(48)))
            fresh.freeCursor = next
            do throws(SystemCallError) {
                try fresh.file.sync()
                try fresh.meta.sync()
                try Syscall.retrying("rename", path: tablePath) { rename(tablePath + ".compact", tablePath) }
                try Syscall.retrying("rename", path: metaPath) { rename(metaPath + ".compact", metaPath) }
                fresh.file.path = tablePath
                fresh.meta.path = metaPath
            } catch { throw .system(error) }
            let after = (try? Int(fresh.file.stat().st_blocks) * 512) ?? 0
            publishReplacement(&fresh)
            return max(0, before - after)
        }
    }

    /// One indexed entry of the files in place, as a compaction copies it.
    private struct LiveEntry {
        var id: ImageEntityID
        var slot: Int
        /// The write this instance verified in the slot (0 if none).
        var verified: UInt64
        var lastUsed: UInt64
    }

    /// The indexed entries among `slots` (one short hold of the state lock).
    private func liveEntries(in slots: Range<Int>, of file: TableFileHandle) -> [LiveEntry] {
        state.withLock { s in
            guard s.file === file else { return [] }
            var live: [LiveEntry] = []
            for slot in slots {
                guard case .valid(let rec) = MetadataLayout.readRecord(record(&s, slot), slot: slot), s.index[rec.id] == slot
                else { continue }
                let used = max(Self.saneRecency(record(&s, slot).u64(40)), s.slots[slot].lastUsed)
                live.append(LiveEntry(id: rec.id, slot: slot, verified: s.slots[slot].verified, lastUsed: used))
            }
            return live
        }
    }
}
