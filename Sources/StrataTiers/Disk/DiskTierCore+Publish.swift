import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging

/// Stores: the atomic publish of one file (the write-behind queue that calls it is in
/// `DiskTierCore+WriteQueue`).
extension DiskTier.Core {
    /// Writes `bytes` to the new file `name` (`O_EXCL | O_NOFOLLOW`), `fsync`s it when durable,
    /// and closes it before it is renamed: so its `IN_CLOSE_WRITE` names the temporary file,
    /// which the watcher ignores, instead of the published name, which the watcher would open
    /// and validate again (and mark unverified). Returns its inode.
    private func writeTemporary(
        _ bytes: [UInt8], named name: String, in directory: borrowing FileDescriptor
    ) throws(SystemCallError) -> UInt64 {
        let file = try FileDescriptor(openAt: directory, name: name, flags: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o644)
        try rethrowingTyped(SystemCallError.self) { try bytes.withUnsafeBytes { raw in try file.write(raw, at: 0) } }
        if configuration.durable { try file.sync() }
        return UInt64(try file.status().st_ino)
    }

    /// Proves the directory takes a store now: writes one page to a new temporary file (which the
    /// index and the watcher ignore), `fsync`s it when durable, and deletes it.
    package func probeWrite() throws(DiskTierError) {
        guard let directory = state.withLock({ $0.closed ? nil : $0.directory }) else { throw .closed }
        let name = DiskTemporaryName.next(
            for: ImageEntityID(high: 0, low: 0), counter: temporaryCounter.add(1, ordering: .relaxed).newValue
        ).string
        do throws(SystemCallError) {
            defer { try? directory.resource.unlink(name) }
            _ = try writeTemporary([UInt8](repeating: 0, count: 4096), named: name, in: directory.resource)
        } catch {
            throw .io(error)
        }
    }

    /// Writes `image` to a temporary file (`O_EXCL | O_NOFOLLOW`), `fsync`s it, renames it over
    /// its name and indexes it (one step under the name's lock), then `fsync`s the directory.
    /// Evicts first, so that the byte limit holds before the file becomes visible. On failure
    /// the temporary file is deleted and the index is unchanged (except for the evictions).
    package func publish(
        image: PixelImage, key: String, digest: ImageEntityID? = nil, mode: ContentMode, isWholeOriginal: Bool = false,
        sourceVersion: UInt64
    ) throws(DiskTierError) {
        let digest = digest ?? ImageEntityID(hashing: key)
        let variant = VariantDescriptor(size: image.size, mode: mode, style: image.style)
        guard image.width <= DiskFileName.maximumSide, image.height <= DiskFileName.maximumSide else {
            throw .invalidImage(key: key, reason: "sides above \(DiskFileName.maximumSide) pixels cannot be stored on disk")
        }
        guard image.width * image.height <= DiskFileName.maximumPixelCount else {
            throw .invalidImage(key: key, reason: "images above \(DiskFileName.maximumPixelCount) pixels cannot be stored on disk")
        }
        guard !isWholeOriginal || mode == .fit else {
            throw .invalidImage(key: key, reason: "only a fit variant can be the whole original")
        }
        let name = DiskFileName(digest: digest, variant: variant, isWholeOriginal: isWholeOriginal)
        let newEntry = DiskIndexEntry(name)
        let charge = newEntry.chargedBytes
        let limit = byteLimit.load(ordering: .relaxed)
        guard charge <= limit else { throw .imageLargerThanLimit(key: key, bytes: charge, limit: limit) }

        // Reserve the bytes, evicting least-recently-used files first: the limit holds
        // before the new file becomes visible.
        let reserved: Shared<FileDescriptor>? = state.withLock { s in
            guard !s.closed else { return nil }
            s.reserved += charge
            return s.directory
        }
        guard let directory = reserved else { throw .closed }
        // The reservation ends in the step that indexes the file: counted twice in between,
        // the watcher (woken by this very rename) would see the index over the limit and evict
        // one more file than needed.
        var reservationHeld = true
        defer { if reservationHeld { state.withLock { $0.reserved -= charge } } }
        evict(toFit: newEntry, limit: limit, directory: directory)

        // The byte limit charges each file its pixels plus a fixed allowance for header and
        // key (the index knows names only): long keys are stored by digest to fit it.
        let bytes = DiskFileEncoder.encode(
            image, key: StoredKey.string(for: key), mode: mode, isWholeOriginal: isWholeOriginal, sourceVersion: sourceVersion)
        let finalName = name.string
        let temporary = DiskTemporaryName.next(for: digest, counter: temporaryCounter.add(1, ordering: .relaxed).newValue).string
        do throws(SystemCallError) {
            do throws(SystemCallError) {
                var entry = newEntry
                entry.inode = try writeTemporary(bytes, named: temporary, in: directory.resource)
                entry.isVerified = true  // written from these very bytes
                // Rename and index as one step for evictions and removals of the name.
                try nameLock(digest).withLock { _ throws(SystemCallError) in
                    try directory.resource.rename(temporary, to: finalName)
                    state.withLock { s in
                        _ = s.index.insert(entry, replacedFile: true, use: true)
                        s.reserved -= charge
                    }
                    reservationHeld = false
                }
                testHooks.withLock { $0.storePublished }?(finalName)
            } catch {
                do throws(SystemCallError) {
                    try directory.resource.unlink(temporary)
                } catch  where error.errno != ENOENT {
                    logger.warning("cannot delete the temporary file of a failed store", metadata: ["error": "\(error)"])
                } catch {}
                throw error
            }
            if configuration.durable { try directory.resource.sync() }
        } catch {
            throw .io(error)
        }
        stores.add(1, ordering: .relaxed)
    }
}
