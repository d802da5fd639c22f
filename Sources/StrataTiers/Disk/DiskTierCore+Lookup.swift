import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging

/// Lookups: the index decides hit or miss without a syscall; a hit opens, checks and reads or
/// maps one file. Files that fail validation are discarded here.
extension DiskTier.Core {
    package func contains(digest: ImageEntityID, query: SizeQuery) -> Bool {
        state.withLock { $0.index.bestMatch(for: digest, query: query) != nil }
    }

    package func lookup(key: String, query: SizeQuery) throws(DiskTierError) -> DiskTier.Hit? {
        try lookup(key: key, digest: ImageEntityID(hashing: key), query: query)
    }

    /// ``lookup(key:query:)`` with the key's digest already computed (a ``CacheKey``'s).
    package func lookup(key: String, digest: ImageEntityID, query: SizeQuery) throws(DiskTierError) -> DiskTier.Hit? {
        switch try lookup(key: key, digest: digest, query: query, waiting: true) {
        case .hit(let hit): return hit
        case .miss, .wouldWait: return nil
        }
    }

    /// ``lookup(key:digest:query:)`` that never waits for the disk: the file is opened only if
    /// its name resolves from the dentry cache, and read or checked only from the page cache;
    /// anything else (a cold file, a first hit to verify, a file to discard, an error) is
    /// `.wouldWait`, for the caller to repeat with ``lookup(key:digest:query:)`` on a thread
    /// that may block. A few syscalls, no disk I/O: safe on Swift's cooperative pool.
    package func lookupWithoutWaiting(key: String, digest: ImageEntityID, query: SizeQuery) -> DiskTier.CachedLookup {
        (try? lookup(key: key, digest: digest, query: query, waiting: false)) ?? .wouldWait
    }

    private func lookup(key: String, digest: ImageEntityID, query: SizeQuery, waiting: Bool) throws(DiskTierError) -> DiskTier.CachedLookup
    {
        let found: (DiskIndexEntry, Shared<FileDescriptor>)? = state.withLock { s in
            guard !s.closed, let id = s.index.bestMatch(for: digest, query: query) else { return nil }
            s.index.touch(id)
            return (s.index[id], s.directory)
        }
        guard let (entry, directory) = found else {
            misses.add(1, ordering: .relaxed)
            return .miss
        }
        var stored = StoredKey.string(for: key)
        let outcome = stored.withUTF8 { load(entry, key: UnsafeRawBufferPointer($0), directory: directory.resource, waiting: waiting) }
        switch outcome {
        case .hit(let hit):
            hits.add(1, ordering: .relaxed)
            if !waiting { hitsWithoutWaiting.add(1, ordering: .relaxed) }
            return .hit(hit)
        case .wouldWait:
            return .wouldWait
        case _ where !waiting && !outcome.isMiss:
            // Discarding a file, or reporting an error, is for the blocking path.
            return .wouldWait
        case .vanished:
            // The index is left alone: the IN_DELETE/IN_MOVED_FROM event (or, without inotify,
            // the next rescan) removes the entry. Removing it here could drop the entry of a
            // newer file published under the same name after our openat failed.
            misses.add(1, ordering: .relaxed)
            return .miss
        case .otherKey:
            misses.add(1, ordering: .relaxed)
            return .miss
        case .invalid(let problem, let identity):
            discardInvalid(entry, directory: directory, identity: identity, reason: "\(problem)")
            misses.add(1, ordering: .relaxed)
            return .miss
        case .foreign(let reason):
            dropForeign(entry, reason: reason)
            misses.add(1, ordering: .relaxed)
            return .miss
        case .failed(let error):
            throw .io(Self.naming(error, file: entry.name, in: path))
        }
    }

    package enum LoadOutcome {
        case hit(DiskTier.Hit)
        case vanished
        case otherKey
        case invalid(DiskFileHeader.Problem, identity: FileIdentity?)
        /// Not a readable regular file (FIFO, directory, device, no permission): dropped from
        /// the index but left on disk, since it may belong to someone else.
        case foreign(String)
        case failed(SystemCallError)
        /// Serving it would wait for the disk (or verify every pixel): for a blocking thread.
        case wouldWait

        /// A miss that needs no cleanup (the name vanished, or holds another key's file).
        package var isMiss: Bool {
            switch self {
            case .vanished, .otherKey: true
            default: false
            }
        }
    }

    /// A file's device and inode numbers.
    package struct FileIdentity: Equatable {
        package var device: UInt64
        package var inode: UInt64

        package init(device: UInt64, inode: UInt64) {
            self.device = device
            self.inode = inode
        }

        package init(_ st: stat) { self.init(device: UInt64(st.st_dev), inode: UInt64(st.st_ino)) }

        /// The identity of the file `entry` describes in a directory on `device`; `nil` when
        /// the index does not know its inode.
        package init?(of entry: DiskIndexEntry, device: UInt64) {
            guard entry.inode != 0 else { return nil }
            self.init(device: device, inode: entry.inode)
        }
    }

    /// Opens, checks and reads (or maps) the file of `entry`. Builds no string on a hit: the
    /// name is formatted on the stack and the descriptor carries the directory's path;
    /// ``lookup(key:query:)`` names the file in an error (``naming(_:file:in:)``).
    ///
    /// Without `waiting`, nothing waits for the disk: the open resolves from the dentry cache
    /// only, reads come from the page cache only (the header of a mapped file is read that way
    /// first, so that checking it through the mapping cannot fault to the disk), and a hit that
    /// must verify its pixels' checksum is `.wouldWait` (reading every pixel is for a thread
    /// that may block).
    private func load(
        _ entry: DiskIndexEntry, key: UnsafeRawBufferPointer, directory: borrowing FileDescriptor, waiting: Bool
    ) -> LoadOutcome {
        var opened: FileDescriptor?
        let openError: SystemCallError? = entry.name.withCString { name in
            do throws(SystemCallError) {
                // O_NONBLOCK: opening a FIFO (or a tty) planted under a cache name must not block.
                let flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK
                opened =
                    waiting
                    ? try FileDescriptor(openAt: directory, cName: name, flags: flags)
                    : try FileDescriptor(openCachedAt: directory, cName: name, flags: flags)
                return nil
            } catch {
                return error
            }
        }
        if let openError {
            if openError.errno == ENOENT { return .vanished }
            if !waiting { return .wouldWait }
            if openError.errno == ELOOP { return .invalid(.badMagic, identity: nil) }  // a planted symlink
            if let reason = Self.foreignOpenErrors[openError.errno] { return .foreign(reason) }
            return .failed(openError)
        }
        let file = opened.take()!
        let variant = entry.variant
        let expected = DiskFileHeader.fileLength(of: variant, keyLength: key.count)
        let storage: PixelStorage
        if expected < configuration.mapThreshold {
            // One pread of one byte more than expected: reading exactly `expected` proves the length.
            let buffer = PixelStorage(uninitializedByteCount: expected + 1)
            var done = 0
            while done <= expected {
                let n: Int
                do {
                    let into = UnsafeMutableRawBufferPointer(start: buffer.base + done, count: expected + 1 - done)
                    n = waiting ? try file.readOnce(into: into, at: done) : try file.readCachedOnce(into: into, at: done)
                } catch {
                    if !waiting { return .wouldWait }
                    // pread of a FIFO is ESPIPE, of a directory EISDIR: not a cache file.
                    if let reason = Self.foreignReadErrors[error.errno] { return .foreign(reason) }
                    return .failed(error)
                }
                if n == 0 { break }
                done += n
                if done == expected { break }  // asked for one byte more and got none: exact length
            }
            guard done == expected else {
                return .invalid(.lengthMismatch(expected: expected, actual: done), identity: identity(of: file))
            }
            storage = buffer
        } else {
            let length: Int
            do { length = try file.size() } catch { return .failed(error) }
            guard length == expected else {
                return .invalid(.lengthMismatch(expected: expected, actual: length), identity: identity(of: file))
            }
            if !waiting {
                // The header and key pages must be in the page cache before the checks below
                // read them through the mapping.
                let head = min(expected, DiskIndex.headerAllowance)
                let cached = withUnsafeTemporaryAllocation(byteCount: head, alignment: 16) { buffer in
                    (try? file.readCachedOnce(into: buffer, at: 0)) ?? 0
                }
                if cached < head { return .wouldWait }
            }
            do {
                storage = try MappedRegion(file: file, length: expected, populate: configuration.populateMappings)
                    .intoPixelStorage(kind: .fileMapping)
            } catch {
                return .failed(error)
            }
        }
        let bytes = UnsafeRawBufferPointer(start: storage.base, count: expected)
        let verify: Bool
        switch configuration.checksumPolicy {
        case .everyHit: verify = true
        case .firstHit: verify = !entry.isVerified
        case .never: verify = false
        }
        if verify && !waiting { return .wouldWait }
        let header: DiskFileHeader
        switch DiskFileValidation.validate(
            bytes, variant: variant, isWholeOriginal: entry.isWholeOriginal, key: key, verifyPixels: verify)
        {
        case .valid(let valid): header = valid
        case .invalid(let problem): return .invalid(problem, identity: identity(of: file))
        case .otherKey: return .otherKey
        }
        if verify && configuration.checksumPolicy == .firstHit {
            state.withLock { $0.index.setVerified(entry) }
        }
        let image = PixelImage(
            width: header.width, height: header.height, bytesPerRow: header.bytesPerRow, style: header.style,
            storage: storage, offset: header.pixelOffset)
        return .hit(
            DiskTier.Hit(
                image: image, variant: variant, isWholeOriginal: entry.isWholeOriginal, sourceVersion: header.sourceVersion))
    }

    /// `error` with its path set to the file `name` in `directory` (a hit's descriptor
    /// carries the directory's path, to build no string per hit).
    package static func naming(_ error: SystemCallError, file name: DiskFileName, in directory: String) -> SystemCallError {
        SystemCallError(call: error.call, path: directory + "/" + name.string, errno: error.errno)
    }

    /// `openat` failures that mean the name is not a file this tier can use (rather than a
    /// transient problem such as EMFILE, which is thrown).
    package static let foreignOpenErrors: [Int32: String] = [
        EACCES: "no permission to read it", EPERM: "no permission to read it",
        ENXIO: "not a regular file (socket or device)", ENODEV: "not a regular file (device)",
        EISDIR: "a directory",
    ]
    /// `pread` failures that mean the open name is not a regular file.
    package static let foreignReadErrors: [Int32: String] = [
        ESPIPE: "not a regular file (FIFO)", EISDIR: "a directory",
        EINVAL: "not a regular file", ENXIO: "not a regular file (device)",
    ]

    private func identity(of file: borrowing FileDescriptor) -> FileIdentity? {
        (try? file.status()).map(FileIdentity.init)
    }

    /// Drops a file that failed validation: from the index, and from disk unless the name
    /// meanwhile holds another file (a newer publish). Only regular files and symlinks are
    /// deleted; anything else under the name (a FIFO, a directory, a device) is only dropped
    /// from the index, since it is not ours to remove. `identity` is the file that failed
    /// (`nil` when it could not be opened: then the one the index knows).
    private func discardInvalid(_ entry: DiskIndexEntry, directory: Shared<FileDescriptor>, identity: FileIdentity?, reason: String) {
        let name = entry.name.string
        let device = state.withLock { $0.device }
        let outcome = deleteFile(
            name, digest: entry.digest, ifIdentity: identity ?? FileIdentity(of: entry, device: device),
            in: directory, regularOnly: true
        ) {
            _ = state.withLock { $0.index.remove(entry) }
        }
        switch outcome {
        case .foreign:
            dropForeign(entry, reason: reason)
            return
        case .deleted, .gone, .replaced:
            break
        case .failed(let error):
            logger.warning("cannot delete invalid cache file", metadata: ["file": "\(path)/\(name)", "error": "\(error)"])
            _ = state.withLock { $0.index.remove(entry) }
        }
        invalidFiles.add(1, ordering: .relaxed)
        logger.warning("removed invalid cache file", metadata: ["file": "\(path)/\(name)", "reason": "\(reason)"])
    }

    /// Drops from the index (not from disk) a name that is not a readable regular file. A
    /// rescan indexes it again, and the next lookup drops it again.
    private func dropForeign(_ entry: DiskIndexEntry, reason: String) {
        invalidFiles.add(1, ordering: .relaxed)
        _ = state.withLock { $0.index.remove(entry) }
        logger.warning(
            "ignored a cache-named entry that is not a readable regular file; left it on disk",
            metadata: ["file": "\(path)/\(entry.name.string)", "reason": "\(reason)"])
    }
}
