import Synchronization
import StrataBase

/// Keeping the index in step with the shared files: rescans after another instance wrote,
/// reopening after it replaced the files. The scans and file work run outside the state lock;
/// the results are published under it in O(1) (what they replace is released after the lock).
///
/// Publishing rules, so that a slow scan never overwrites a newer view: an index is published
/// only over the files it was read from and only when it reflects a later change counter than
/// the one in place; reopened files only replace the files they were opened to replace.
extension ImageTable {
    /// Brings the index up to date (a rescan when another instance changed the metadata, a
    /// reopen when it was retired), at most one reader at a time. Returns false when another
    /// thread is already at it or the files cannot be reopened (the caller then answers a miss).
    @discardableResult
    package func maintainIndex() -> Bool {
        let snapshot = state.withLock { s -> (Shared<FileDescriptor>, Shared<FileDescriptor>, Shared<MappedRegion>)? in
            guard !s.maintaining else { return nil }
            s.maintaining = true
            return (s.file, s.meta, s.metaMap)
        }
        guard let (file, meta, metaMap) = snapshot else { return false }
        defer { state.withLock { $0.maintaining = false } }
        if MetadataHeaderView(base: metaMap.resource.base).isRetired {
            // Readers never repair: a damaged or missing file is a miss until a writer fixes it.
            guard
                let fresh = try? Self.openFiles(
                    layout: layout, format: format, tablePath: tablePath, metaPath: metaPath,
                    repair: false)
            else { return false }
            _ = publishReopened(fresh, replacing: file, meta: meta)
        } else {
            var (change, index) = scanIndex(metaMap)
            publishIndex(&index, change: change, file: file, meta: meta)
        }
        return true
    }

    /// Before writing (writer gate and `flock` held): follow a reset or compaction by another
    /// process, repair damaged files, and pick up other instances' changes.
    package func refreshForWriting() throws(ImageTableError) {
        for _ in 0..<8 {
            let (file, meta, metaMap, seen) = state.withLock { ($0.file, $0.meta, $0.metaMap, $0.seenChange) }
            let h = MetadataHeaderView(base: metaMap.resource.base)
            if h.isRetired || !Self.isCurrent(meta) || !Self.isCurrent(file) {
                // Replaced by another process (or removed): retire our view and reopen.
                h.retire()
                let fresh = try Self.openFiles(layout: layout, format: format, tablePath: tablePath, metaPath: metaPath, repair: true)
                if publishReopened(fresh, replacing: file, meta: meta) { return }
                continue
            }
            guard h.change != seen else { return }
            var (change, index) = scanIndex(metaMap)
            if publishIndex(&index, change: change, file: file, meta: meta) { return }
        }
    }

    /// Reads every record of `metaMap` (outside the lock): the change counter read first, then
    /// the index of the valid records.
    package func scanIndex(_ metaMap: Shared<MappedRegion>) -> (change: UInt64, index: [ImageEntityID: Int]) {
        let change = MetadataHeaderView(base: metaMap.resource.base).change
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        hooks.call(hooks.duringIndexScan)
        return (change, Self.scanRecords(metaMap, slots: layout.maximumCount).0)
    }

    /// Installs `index` (read at change counter `change` from the metadata of `file`/`meta`)
    /// when it is newer than the one in place; `index` then holds the replaced one, released by
    /// the caller after the lock.
    @discardableResult
    package func publishIndex(
        _ index: inout [ImageEntityID: Int], change: UInt64, file: Shared<FileDescriptor>, meta: Shared<FileDescriptor>
    ) -> Bool {
        state.withLock { s in
            guard s.file === file, s.meta === meta, change > s.seenChange else { return false }
            swap(&s.index, &index)
            s.seenChange = change
            return true
        }
    }

    /// Switches to `fresh` (files reopened after another instance replaced or rebuilt them)
    /// unless the files in place are no longer `file`/`meta`. When the table file is still the
    /// same file (only the metadata was rebuilt), this instance's live images are in it: its
    /// handle, mappings, per-slot state and pin bits are kept. Only a really new table file
    /// starts with no pins.
    package func publishReopened(_ fresh: State, replacing file: Shared<FileDescriptor>, meta: Shared<FileDescriptor>) -> Bool {
        var fresh = fresh
        let sameTableFile = Self.isSameFile(file, fresh.file)  // two fstats, before the lock
        return state.withLock { s in
            guard s.file === file, s.meta === meta else { return false }
            if sameTableFile {
                swap(&s.meta, &fresh.meta)
                swap(&s.metaMap, &fresh.metaMap)
                swap(&s.index, &fresh.index)
                s.seenChange = fresh.seenChange
                s.clock = max(s.clock, fresh.clock)
                s.fileSize = max(s.fileSize, fresh.fileSize)
                s.freeCursor = 0
                s.touched.removeAll()
            } else {
                swap(&s, &fresh)
                pins.clearOwn()
            }
            return true
        }
        // `fresh` now holds what was replaced: unmapped and closed here, after the lock.
    }

    /// Replaces the files in place by `fresh` (new files this instance created and renamed into
    /// place), retiring the old metadata so that other instances follow.
    package func publishReplacement(_ fresh: inout State) {
        state.withLock { s in
            header(&s).retire()
            swap(&s, &fresh)
            pins.clearOwn()
        }
    }

    /// The index of the valid records of the metadata mapped at `meta` (the newest write of an
    /// entity wins), and the slots whose records are corrupt.
    package static func scanRecords(_ meta: Shared<MappedRegion>, slots: Int) -> ([ImageEntityID: Int], [Int]) {
        var index: [ImageEntityID: Int] = [:]
        var sequences: [ImageEntityID: UInt64] = [:]
        var corrupt: [Int] = []
        for slot in 0..<slots {
            switch MetadataLayout.record(meta.resource.base, slot).read(slot: slot) {
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
}
