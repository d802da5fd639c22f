import StrataBase
/// Replacing the files: new files are written beside the old ones and renamed over them, never
/// truncated in place, so images already handed out stay valid. All of it runs outside the
/// state lock (readers keep being served from the old files meanwhile); only the switch to the
/// new files takes it, in O(1).
extension ImageTable {
    /// Empties the table: new, empty files are renamed over the old ones, so images already
    /// handed out stay valid; other processes switch on their next access. Blocks like
    /// ``store(_:sourceVersion:streaming:draw:)``; readers are not held up.
    public func reset() throws(ImageTableError) {
        try writing { () throws(ImageTableError) in
            var fresh = try Self.createFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath)
            publishReplacement(&fresh)
        }
    }

    /// Rewrites the table with its live entries packed into the lowest slots, as new files
    /// renamed over the old ones, and returns the bytes of disk freed. Images already handed
    /// out keep the old (unlinked) mapping. Blocks like ``store(_:sourceVersion:streaming:draw:)``; readers
    /// are served from the old files until the new ones are in place.
    @discardableResult
    public func compact() throws(ImageTableError) -> Int {
        try writing { () throws(ImageTableError) -> Int in
            let (file, metaMap) = state.withLock { ($0.file, $0.metaMap) }
            let before = Self.allocatedBytes(file)
            var fresh = try Self.createFiles(
                layout: layout, format: format, tablePath: tablePath + ".compact",
                metaPath: metaPath + ".compact", publish: false)
            let fileSize: Int
            do throws(SystemCallError) { fileSize = try file.resource.size() } catch { throw .system(error) }
            var next = 0
            var nextSequence: UInt64 = 1
            var start = 0
            while start < layout.maximumCount {
                for live in liveEntries(in: start..<min(layout.maximumCount, start + Self.scanBatch), of: file) {
                    guard layout.entryEnd(live.slot) <= fileSize,
                        let (_, from) = try? mapChunk(of: live.slot, file: file)
                    else { continue }
                    // No writer can change the entry (the gate and flock are held): verify it
                    // unless this instance verified this very write before.
                    var verified = layout.trailer(from).read(slot: live.slot)
                    if verified?.sequence != live.verified {
                        verified = Self.verifiedFields(from, slot: live.slot, layout: layout)
                    }
                    guard let f = verified, f.id == live.id else { continue }
                    let (_, to) = try Self.reservedEntry(&fresh, next, layout: layout)
                    to.copyMemory(from: from, byteCount: layout.rowsBytes)
                    layout.trailer(to).write(f, slot: next)
                    MetadataLayout.record(fresh.metaMap.resource.base, next)
                        .write(.init(id: f.id, sourceVersion: f.sourceVersion, sequence: f.sequence), slot: next, lastUsed: live.lastUsed)
                    fresh.index[f.id] = next
                    fresh.slots[next].verified(f)
                    nextSequence = max(nextSequence, Self.sequence(after: f.sequence))
                    next += 1
                    hooks.call(hooks.afterCompactingEntry, next)
                }
                start += Self.scanBatch
            }
            let freshHeader = MetadataHeaderView(base: fresh.metaMap.resource.base)
            freshHeader.nextSequence = max(nextSequence, MetadataHeaderView(base: metaMap.resource.base).nextSequence)
            fresh.freeCursor = next
            try Self.publish(&fresh, from: (tablePath + ".compact", metaPath + ".compact"), to: (tablePath, metaPath))
            let after = Self.allocatedBytes(fresh.file)
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
    private func liveEntries(in slots: Range<Int>, of file: Shared<FileDescriptor>) -> [LiveEntry] {
        state.withLock { s in
            guard s.file === file else { return [] }
            var live: [LiveEntry] = []
            for slot in slots {
                let r = record(&s, slot)
                guard case .valid(let rec) = r.read(slot: slot), s.index[rec.id] == slot else { continue }
                let used = max(Self.saneRecency(r.lastUsed), s.slots[slot].lastUsed)
                live.append(LiveEntry(id: rec.id, slot: slot, verified: s.slots[slot].verified, lastUsed: used))
            }
            return live
        }
    }
}
