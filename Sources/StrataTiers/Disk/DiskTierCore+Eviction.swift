import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging

/// The byte limit and every deletion by name (eviction, `remove`, `removeAll`, invalid files):
/// a name is deleted only while it still holds the file the index knew.
extension DiskTier.Core {
    /// Victims chosen per acquisition of the index lock.
    package static let evictionBatch = 64

    /// Deletes least-recently-used files until the index, the reservations (which include
    /// the store of `newEntry`) and nothing more fit in `limit`, freeing a little more than
    /// needed (1/128 of the limit) so that a full cache evicts once per many writes.
    ///
    /// Victims are taken in batches of ``evictionBatch`` from the oldest end of the index's
    /// recency list: each batch costs O(batch) under the index lock, and the files are
    /// deleted outside it, so lookups interleave with even a very large eviction (a directory
    /// opened far over a smaller limit). A victim that cannot be deleted (EPERM, EBUSY, EROFS,
    /// a directory under the name…) goes back into the index as most recently used, so that
    /// it is not retried on every store, and others are evicted in its place; after four
    /// batches in a row that deleted nothing the store goes ahead over the limit.
    package func evict(toFit newEntry: DiskIndexEntry?, limit: Int, directory: Shared<FileDescriptor>) {
        var fruitless = 0
        while fruitless < 4 {
            var examined = 0
            let (victims, device): ([DiskIndexEntry], UInt64) = state.withLock { s in
                let replacing = newEntry.map { s.index.slot(of: $0) != nil ? $0.chargedBytes : 0 } ?? 0
                let excess = s.index.chargedBytes - replacing + s.reserved - limit
                guard excess > 0 else { return ([], s.device) }
                let victims = s.index.takeLeastRecentlyUsed(
                    atLeast: excess + limit / 128, maximumCount: Self.evictionBatch, excluding: newEntry, examined: &examined)
                s.markDeleting(victims)
                return (victims, s.device)
            }
            evictionExamined.add(examined, ordering: .relaxed)
            if victims.isEmpty { return }
            testHooks.withLock { $0.evictionBatchChosen }?(victims)
            var kept: [DiskIndexEntry] = []
            for victim in victims {
                let name = victim.name.string
                // Unmarked in the step that deletes it (under the name's lock): a file published
                // under the name afterwards may get the deleted file's inode number, and must be
                // indexed (found by the 3-minute soak: such a file was skipped as "being deleted"
                // until the batch ended, never counted, and the directory went over its limit).
                let outcome = deleteFile(name, digest: victim.digest, ifIdentity: FileIdentity(of: victim, device: device), in: directory) {
                    unmarkDeleting(victim)
                }
                testHooks.withLock { $0.victimDeleted }?(name)
                switch outcome {
                case .deleted, .gone:
                    evictions.add(1, ordering: .relaxed)
                case .replaced, .foreign:
                    // A newer file under the name (published after the victim was chosen):
                    // indexed by its publish or its inotify event, not ours to delete.
                    unmarkDeleting(victim)
                case .failed(let error):
                    logger.warning(
                        "cannot evict cache file; keeping it in the index",
                        metadata: ["file": "\(path)/\(name)", "error": "\(error)"])
                    kept.append(victim)
                }
            }
            state.withLock { s in
                s.unmarkDeleting(victims)
                for entry in kept { s.index.insert(entry, use: true) }
            }
            fruitless = kept.count == victims.count ? fruitless + 1 : 0
        }
    }

    /// Whether the index would take `entry` back: not while its file is being deleted.
    /// Deletes least-recently-used files until the index fits the current byte limit (after
    /// ``DiskTier/setByteLimit(_:)`` lowered it). On the calling thread.
    package func evictToLimit() {
        guard let directory = state.withLock({ $0.closed ? nil : $0.directory }) else { return }
        evict(toFit: nil, limit: byteLimit.load(ordering: .relaxed), directory: directory)
    }

    /// Ends ``State/markDeleting(_:)`` for one file (see ``State/unmarkDeleting(_:)``).
    package func unmarkDeleting(_ entry: DiskIndexEntry) {
        state.withLock { $0.unmarkDeleting(CollectionOfOne(entry)) }
    }

    package static func mayIndex(_ entry: DiskIndexEntry, in s: State) -> Bool {
        entry.inode == 0 || !s.deleting.contains(DeletingFile(entry))
    }

    package enum DeleteOutcome {
        case deleted
        /// Nothing under the name.
        case gone
        /// The name holds another file than the one asked for (or the index never knew which
        /// file it described): left alone.
        case replaced
        /// Not a regular file or symlink (only with `regularOnly`): left alone.
        case foreign
        case failed(SystemCallError)
    }

    /// The lock that orders deletions of and publishes onto names of `digest`.
    package func nameLock(_ digest: ImageEntityID) -> Lock<Void> {
        nameLocks[Int(truncatingIfNeeded: digest.high) & (nameLocks.count - 1)]
    }

    /// Deletes `name` only while it is the file `identity` (`fstatat`, compare device and
    /// inode, `unlinkat`), holding the name's lock, so that a store of this process cannot land
    /// between the check and the deletion; `andThen` runs under that lock after a deletion (or
    /// when nothing is there), e.g. to drop the entry from the index. Another process can still
    /// rename onto the name in the microseconds between the check and the unlink: Linux has no
    /// unlink-if-inode.
    package func deleteFile(
        _ name: String, digest: ImageEntityID, ifIdentity identity: FileIdentity?, in directory: Shared<FileDescriptor>,
        regularOnly: Bool = false, _ andThen: () -> Void = {}
    ) -> DeleteOutcome {
        nameLock(digest).withLock { _ in
            let st: stat
            do throws(SystemCallError) {
                st = try directory.resource.status(of: name)
            } catch {
                if error.errno == ENOENT {
                    andThen()
                    return .gone
                }
                return .failed(error)
            }
            let type = st.st_mode & S_IFMT
            if regularOnly && type != S_IFREG && type != S_IFLNK { return .foreign }
            guard let identity, FileIdentity(st) == identity else { return .replaced }
            do throws(SystemCallError) {
                try directory.resource.unlink(name)
            } catch {
                if error.errno != ENOENT { return .failed(error) }
            }
            andThen()
            return .deleted
        }
    }

    /// Deletes every variant of `digest` that the index holds: from the index, and each file
    /// while it is still the one indexed.
    package func remove(digest: ImageEntityID) {
        let (victims, directory, device) = state.withLock { s in
            let victims = s.index.removeAll(digest: digest)
            s.markDeleting(victims)
            return (victims, s.directory, s.device)
        }
        for victim in victims {
            let name = victim.name.string
            if case .failed(let error) = deleteFile(
                name, digest: digest, ifIdentity: FileIdentity(of: victim, device: device), in: directory,
                { unmarkDeleting(victim) })
            {
                logger.warning("cannot delete cache file", metadata: ["file": "\(path)/\(name)", "error": "\(error)"])
            }
        }
        state.withLock { $0.unmarkDeleting(victims) }
    }

    /// Deletes every variant of each key with operations derived from the source key whose
    /// identity is `source` (``/StrataBase/ImageEntityID/isFamily(of:)``): a scan of the index.
    package func removeFamily(of source: ImageEntityID) {
        let members = state.withLock { s in Set(s.index.entries.lazy.map(\.digest).filter { $0.isFamily(of: source) }) }
        for digest in members { remove(digest: digest) }
    }

    /// Deletes every published file listed in the directory (other processes' too), and their
    /// entries; a file published under a listed name after the listing survives, with its entry.
    package func removeAll() throws(DiskTierError) {
        let (directory, device) = state.withLock { ($0.directory, $0.device) }
        var listed: [DiskIndexEntry] = []
        do {
            try DirectoryScan.forEachName(in: directory.resource) { bytes, inode in
                if let name = DiskFileName(bytes: bytes) {
                    listed.append(DiskIndexEntry(name, inode: inode))
                }
            }
        } catch {
            throw .io(error)
        }
        for file in listed {
            let name = file.name.string
            let outcome = deleteFile(name, digest: file.digest, ifIdentity: FileIdentity(of: file, device: device), in: directory) {
                state.withLock { s in
                    if let id = s.index.slot(of: file), s.index[id].inode == file.inode || s.index[id].inode == 0 {
                        s.index.remove(file)
                    }
                }
            }
            if case .failed(let error) = outcome {
                logger.warning("cannot delete cache file", metadata: ["file": "\(path)/\(name)", "error": "\(error)"])
            }
        }
    }
}

extension DiskTier.Core.State {
    /// Records that the files of `entries` are about to be deleted (see ``deleting``).
    package mutating func markDeleting(_ entries: [DiskIndexEntry]) {
        for entry in entries where entry.inode != 0 { deleting.insert(DiskTier.Core.DeletingFile(entry)) }
    }

    /// Ends ``markDeleting(_:)`` for `entries` (deleted, or kept); a file unmarked while a
    /// rescan lists the directory is not indexed by that rescan.
    package mutating func unmarkDeleting(_ entries: some Sequence<DiskIndexEntry>) {
        for entry in entries where entry.inode != 0 {
            let file = DiskTier.Core.DeletingFile(entry)
            guard deleting.remove(file) != nil else { continue }
            if rescansRunning > 0 { deletedDuringRescan.insert(file) }
        }
    }

    /// Ends a rescan started in ``DiskTier/Core/rescan()``.
    package mutating func endRescan() {
        rescansRunning -= 1
        if rescansRunning == 0 { deletedDuringRescan.removeAll() }
    }
}
