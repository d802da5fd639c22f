import StrataBase
/// Retrieval: the fast path is one short hold of the state lock (dictionary lookup, pin, trailer
/// check); verification, mapping and scans run outside it.
extension ImageTable {
    /// The stored image of entity `id` drawn from `sourceVersion`, or `nil` when there is none.
    /// Never waits for a writer. The image maps the slot (no copy) and pins it until the last
    /// copy of the image goes away; it is read-only (mutating it copies).
    ///
    /// Cost: O(1) for an entry this instance has verified; the first retrieval of an entry
    /// checksums its pixels, and a miss after another process wrote re-reads the metadata.
    public func image(for id: ImageEntityID, sourceVersion: UInt64) -> PixelImage? {
        if case .hit(let found) = read(id, sourceVersion: sourceVersion, maintain: true) { return found.image }
        return nil
    }

    /// The stored image of entity `id` whatever source version it was drawn from, with that
    /// version (for callers that decide freshness themselves, such as the engine); as
    /// ``image(for:sourceVersion:)`` otherwise.
    public func entry(for id: ImageEntityID) -> (image: PixelImage, sourceVersion: UInt64)? {
        if case .hit(let found) = read(id, sourceVersion: nil, maintain: true) { return found }
        return nil
    }

    /// The ids of the entries this instance knows (its index; another process's latest writes
    /// may be missing) that `matching` accepts. Cost: one pass over the index under its lock.
    public func entityIDs(where matching: (ImageEntityID) -> Bool) -> [ImageEntityID] {
        state.withLock { s in s.index.keys.filter(matching) }
    }

    /// The source version the indexed entry for `id` was drawn from, as its metadata record
    /// says (no pixel verification, no pin: a retrieval may still miss), or `nil` when none is
    /// indexed. Brings the index up to date after another process wrote, as ``contains(_:)``.
    /// Cost: a dictionary lookup and one record read under the lock.
    public func indexedSourceVersion(of id: ImageEntityID) -> UInt64? {
        guard contains(id) else { return nil }
        return state.withLock { s -> UInt64? in
            guard let slot = s.index[id], case .valid(let record) = self.record(&s, slot).read(slot: slot), record.id == id else {
                return nil
            }
            return record.sourceVersion
        }
    }

    /// Whether an entry for `id` (any source version) is indexed; no verification, no pin.
    public func contains(_ id: ImageEntityID) -> Bool {
        for _ in 0..<2 {
            let answer = state.withLock { s -> Bool? in
                let h = header(&s)
                if h.isRetired { return nil }
                if s.index[id] != nil { return true }
                return h.change == s.seenChange ? false : nil
            }
            if let answer { return answer }
            guard maintainIndex() else { return false }
        }
        return false
    }

    /// The outcome of one retrieval: the image and the source version it was drawn from, a miss,
    /// or ``TierLookup/wouldWait`` when the index must be brought up to date first (a scan of the
    /// whole metadata, or reopening files another process replaced; only when `maintain` is false).
    package typealias ReadOutcome = TierLookup<(image: PixelImage, sourceVersion: UInt64)>

    /// What the fast path (under the lock) found.
    private enum Step {
        case hit(Shared<FileDescriptor>, Shared<MappedRegion>, UnsafeMutableRawPointer, slot: Int, width: Int, height: Int, version: UInt64)
        case miss
        /// Pinned; the trailer and pixels must be verified (outside the lock).
        case verify(Shared<FileDescriptor>, Shared<MappedRegion>, UnsafeMutableRawPointer, slot: Int)
        /// The entry's chunk is not mapped or the file size is not known to cover it.
        case map(Shared<FileDescriptor>, slot: Int)
        case maintain
    }

    /// A retrieval (of `sourceVersion`, or of any version when it is `nil`); with `maintain`
    /// false it never does O(maximumCount) work (it answers ``TierLookup/wouldWait``
    /// instead), so an async caller can move that to a pool.
    package func read(_ id: ImageEntityID, sourceVersion: UInt64?, maintain: Bool) -> ReadOutcome {
        // Each slow step changes what the next attempt finds; a few attempts always suffice
        // unless other threads keep replacing the files.
        for _ in 0..<4 {
            switch state.withLock({ s in fastStep(&s, id, sourceVersion) }) {
            case .hit(let file, let chunk, let entry, let slot, let width, let height, let version):
                return .hit(
                    (makeImage(file: file, chunk: chunk, entry: entry, slot: slot, width: width, height: height, writable: false), version))
            case .miss:
                return .miss
            case .verify(let file, let chunk, let entry, let slot):
                return verifyAndServe(id, sourceVersion: sourceVersion, file: file, chunk: chunk, entry: entry, slot: slot)
            case .map(let file, let slot):
                guard let size = try? file.resource.size() else { return .miss }
                noteFileSize(size, of: file)
                // Never touch pages past the end of the file (SIGBUS).
                guard layout.entryEnd(slot) <= size, (try? mapChunk(of: slot, file: file)) != nil
                else { return .miss }
            case .maintain:
                guard maintain else { return .wouldWait }
                guard maintainIndex() else { return .miss }
            }
        }
        return .miss
    }

    @inline(__always)
    private func fastStep(_ s: inout State, _ id: ImageEntityID, _ sourceVersion: UInt64?) -> Step {
        // A retired index describes replaced files: without the current ones there is no answer.
        let h = header(&s)
        if h.isRetired { return .maintain }
        guard let slot = s.index[id] else {
            // Another instance changed the metadata since the index was built: it may have the entry.
            return h.change == s.seenChange ? .miss : .maintain
        }
        guard let (chunk, entry) = mappedEntry(&s, slot) else { return .map(s.file, slot: slot) }
        // Pin first (publishing the pin to other processes), then check the entry: a writer
        // invalidates the trailer before it looks at pins (see SharedPins).
        pin(&s, slot)
        let known = s.slots[slot]
        // The trailer still names the write this instance verified (one more cache line): the
        // pixels are the ones checksummed then.
        guard known.verified != 0, known.id == id, layout.trailer(entry).names(sequence: known.verified, id: id)
        else { return .verify(s.file, chunk, entry, slot: slot) }
        guard sourceVersion == nil || known.sourceVersion == sourceVersion else {
            unpinLocked(&s, slot, file: s.file)
            return .miss
        }
        touch(&s, slot)
        return .hit(s.file, chunk, entry, slot: slot, width: Int(known.width), height: Int(known.height), version: known.sourceVersion)
    }

    /// Verifies a pinned entry outside the lock (a writer never reuses a pinned slot), then
    /// records the verification and serves it.
    private func verifyAndServe(
        _ id: ImageEntityID, sourceVersion: UInt64?, file: Shared<FileDescriptor>, chunk: Shared<MappedRegion>,
        entry: UnsafeMutableRawPointer, slot: Int
    ) -> ReadOutcome {
        let fields = Self.verifiedFields(entry, slot: slot, layout: layout)
        let served = state.withLock { s -> Bool in
            guard let f = fields, f.id == id else {
                if s.file === file, s.index[id] == slot { s.index.removeValue(forKey: id) }
                unpinLocked(&s, slot, file: file)
                return false
            }
            if s.file === file { s.slots[slot].verified(f) }
            guard sourceVersion == nil || f.sourceVersion == sourceVersion else {
                unpinLocked(&s, slot, file: file)
                return false
            }
            if s.file === file { touch(&s, slot) }
            return true
        }
        guard served, let f = fields else { return .miss }
        return .hit(
            (
                makeImage(file: file, chunk: chunk, entry: entry, slot: slot, width: f.width, height: f.height, writable: false),
                f.sourceVersion
            ))
    }

    /// The entry's trailer fields when the trailer and the pixel checksum verify.
    package static func verifiedFields(_ entry: UnsafeMutableRawPointer, slot: Int, layout: TableLayout) -> EntryTrailer.Fields? {
        guard let f = layout.trailer(entry).read(slot: slot),
            f.width >= 1, f.height >= 1, f.width <= layout.width, f.height <= layout.height
        else { return nil }
        let rows = UnsafeRawBufferPointer(start: entry, count: layout.rowsBytes)
        guard EntryTrailer.pixelChecksum(rows, id: f.id, sourceVersion: f.sourceVersion) == f.pixelChecksum else { return nil }
        return f
    }
}
