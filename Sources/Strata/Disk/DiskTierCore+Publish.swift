#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Logging

/// Stores: the write-behind queue and its writer thread, and the atomic publish of one file.
extension DiskTier.Core {
    struct Job: Sendable {
        var image: PixelImage
        var key: String
        var mode: ContentMode
        var isWholeOriginal: Bool
        var sourceVersion: UInt64
        /// The file the job publishes (its key's digest is computed once, by the caller).
        var name: DiskFileName

        init(image: PixelImage, key: String, mode: ContentMode, isWholeOriginal: Bool, sourceVersion: UInt64) {
            self.image = image
            self.key = key
            self.mode = mode
            self.isWholeOriginal = isWholeOriginal
            self.sourceVersion = sourceVersion
            name = DiskFileName(
                digest: ImageEntityID(hashing: key), variant: VariantDescriptor(size: image.size, mode: mode, style: image.style),
                isWholeOriginal: isWholeOriginal)
        }
    }

    enum QueueItem: Sendable {
        case job(Job)
        /// ``flush()``'s marker: when the writer reaches it, `barriersPassed` becomes its number.
        case barrier(Int)
        case stop
    }

    /// The write-behind queue. The writer sleeps on the lock until an item is queued; flushes
    /// sleep on it until their barrier is passed (so every change is followed by a broadcast).
    struct Queue {
        var items: [QueueItem] = []
        var head = 0
        var jobs = 0
        var bytes = 0
        var closed = false
        var barriersQueued = 0
        var barriersPassed = 0
        /// The file the writer is publishing now, if any.
        var inFlight: DiskFileName?
    }

    /// Makes way for a synchronous store of `name`: queued write-behind stores of the same file
    /// are dropped (they are older, and would otherwise land over it after it returned), and a
    /// store of it that the writer is publishing now is waited for.
    func supersedeQueued(_ name: DiskFileName) {
        queue.withLock(waitingUntil: { $0.inFlight != name }) { q in
            var kept: [QueueItem] = []
            var dropped = false
            for item in q.items[q.head...] {
                if case .job(let job) = item, job.name == name {
                    q.jobs -= 1
                    q.bytes -= job.image.byteCount
                    dropped = true
                } else {
                    kept.append(item)
                }
            }
            if dropped {
                q.items = kept
                q.head = 0
            }
        }
    }

    func enqueue(_ job: Job) -> Bool {
        let bytes = job.image.byteCount
        let accepted = queue.withLock { q -> Bool in
            guard !q.closed, q.jobs < configuration.writeQueueCapacity,
                q.bytes + bytes <= configuration.writeQueueByteLimit || q.jobs == 0
            else { return false }
            q.items.append(.job(job))
            q.jobs += 1
            q.bytes += bytes
            return true
        }
        if accepted {
            queue.broadcast()
        } else {
            droppedStores.add(1, ordering: .relaxed)
        }
        return accepted
    }

    /// Queues the writer's stop after everything queued so far, and refuses later stores.
    func stopWriter() {
        queue.withLock { q in
            q.items.append(.stop)
            q.closed = true
        }
        queue.broadcast()
    }

    func writerLoop() {
        while true {
            let item = queue.withLock(waitingUntil: { $0.head < $0.items.count }) { q in
                let item = q.items[q.head]
                q.head += 1
                if q.head > 64 && q.head * 2 > q.items.count {
                    q.items.removeFirst(q.head)
                    q.head = 0
                }
                if case .job(let job) = item { q.inFlight = job.name }
                return item
            }
            switch item {
            case .job(let job):
                do {
                    try publish(
                        image: job.image, key: job.key, digest: job.name.digest, mode: job.mode,
                        isWholeOriginal: job.isWholeOriginal, sourceVersion: job.sourceVersion)
                } catch {
                    failedStores.add(1, ordering: .relaxed)
                    logger.warning("write-behind store failed", metadata: ["error": "\(error)"])
                }
                queue.withLock { q in
                    q.jobs -= 1
                    q.bytes -= job.image.byteCount
                    q.inFlight = nil
                }
                queue.broadcast()
            case .barrier(let number):
                queue.withLock { $0.barriersPassed = number }
                queue.broadcast()
            case .stop:
                return
            }
        }
    }

    /// Waits until every store queued before the call has been written (or failed).
    func flush() {
        let ticket: Int? = queue.withLock { q in
            guard !q.closed else { return nil }
            q.barriersQueued += 1
            q.items.append(.barrier(q.barriersQueued))
            return q.barriersQueued
        }
        guard let ticket else { return }
        queue.broadcast()
        queue.withLock(waitingUntil: { $0.barriersPassed >= ticket }) { _ in }
    }

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

    /// Writes `image` to a temporary file (`O_EXCL | O_NOFOLLOW`), `fsync`s it, renames it over
    /// its name and indexes it (one step under the name's lock), then `fsync`s the directory.
    /// Evicts first, so that the byte limit holds before the file becomes visible. On failure
    /// the temporary file is deleted and the index is unchanged (except for the evictions).
    func publish(
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
        defer { state.withLock { $0.reserved -= charge } }
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
                    _ = state.withLock { $0.index.insert(entry, replacedFile: true, use: true) }
                }
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
