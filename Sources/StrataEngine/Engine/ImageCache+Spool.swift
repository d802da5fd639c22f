import StrataBase
import StrataTiers
#if canImport(Glibc)
import Glibc
#endif

/// A large original copied into a private file, for a pass that reads it in order (a pyramid
/// build): the process holds at most the part being copied and the pages being read, never the
/// whole file.
extension ImageCache {
    /// The bytes of one part (one ranged GET, one `pread`).
    package static let spoolPartBytes = 8 << 20

    /// `key`'s original copied into a ``/StrataBase/SpoolFile`` in `directory` (made if
    /// missing) and mapped, with its version. A ``DirectorySource``'s file is copied in the
    /// kernel in one job; another source's in parts (``ImageSource/fetchRange(key:offset:maxBytes:)``:
    /// ranged GETs), each written on the engine's threads in `lane`. A source that cannot read
    /// parts is fetched whole and written at once.
    /// An original whose version or length changes between parts is
    /// ``SourceError/Reason/changed(_:)``; one over `maxBytes` is
    /// ``SourceError/Reason/tooLarge(bytes:limit:)`` before anything is written (the source's
    /// own memory limit bounds each part, not the file); a failure to write the file (`ENOSPC`)
    /// is the table tier's.
    package func spoolOriginal(
        _ key: CacheKey, lane: FlightLane, into directory: String, maxBytes: Int
    ) async throws(ImageCacheError) -> (file: MappedFile, version: String) {
        guard let source else { throw .noSource(key: key.string) }
        let start = ContinuousClock.now
        let spool = try await onPool(key, lane: lane) { () throws(ImageCacheError) -> SpoolFile in
            try Self.spoolFailure(key) { () throws(SystemCallError) in
                try FileDescriptor.makeDirectories(directory)
                return try SpoolFile(directory: directory)
            }
        }
        if let directory = blockingSource as? DirectorySource {
            // One copy in the kernel, on the engine's threads.
            let (count, version) = try await onPool(key, lane: lane) { [self] () throws(ImageCacheError) -> (Int, String) in
                try copy(key, from: directory, into: spool, maxBytes: maxBytes)
            }
            countFetch()
            metrics.sourceFetch.recordInterval(since: start)
            return (try Self.spoolFailure(key) { () throws(SystemCallError) in try spool.mapped(count: count) }, version)
        }
        var progress = SpoolProgress(maxBytes: maxBytes)
        while !progress.isDone {
            let offset = progress.offset
            let fetched: SourceRange?
            do throws(SourceError) {
                fetched = try await source.fetchRange(key: key.sourceKey, offset: offset, maxBytes: Self.spoolPartBytes)
            } catch {
                throw sourceFailed(error, key: key)
            }
            guard let part = fetched else { return try await spoolWhole(key, lane: lane, into: spool, maxBytes: maxBytes) }
            try progress.take(part, key: key)
            if offset == 0 { countFetch() }
            try await onPool(key, lane: lane) { () throws(ImageCacheError) in
                try Self.write(part.bytes, at: offset, to: spool, key: key)
            }
            if Task.isCancelled { throw .cancelled(key: key.string) }
        }
        metrics.sourceFetch.recordInterval(since: start)
        let file = try Self.spoolFailure(key) { () throws(SystemCallError) in try spool.mapped(count: progress.offset) }
        return (file, progress.version ?? "")
    }

    /// A directory's original copied whole into `spool` (`copy_file_range`), with its length
    /// and version: a file that changed during the copy is ``SourceError/Reason/changed(_:)``,
    /// a spool that has no room the table tier's failure.
    private func copy(
        _ key: CacheKey, from directory: DirectorySource, into spool: SpoolFile, maxBytes: Int
    ) throws(ImageCacheError) -> (Int, String) {
        let opened: DirectorySource.OpenedOriginal
        do throws(SourceError) {
            opened = try directory.openOriginal(key: key.sourceKey, maxBytes: maxBytes)
        } catch {
            throw sourceFailed(error, key: key)
        }
        guard opened.size > 0 else { throw Self.empty(key) }
        let copied: Int
        do throws(SystemCallError) {
            copied = try spool.copy(from: opened.file, offset: 0, count: opened.size)
        } catch {
            if [ENOSPC, EDQUOT, EFBIG].contains(error.errno) { throw Self.spoolFailure(error, key: key) }
            throw .source(SourceError(key: key.sourceKey, reason: .io(error)))
        }
        let now: String
        do throws(SourceError) {
            now = try directory.currentVersion(of: opened, key: key.sourceKey)
        } catch {
            throw ImageCacheError(error)
        }
        guard copied == opened.size, now == opened.version else {
            throw .source(
                SourceError(
                    key: key.sourceKey,
                    reason: .changed("it was rewritten while it was being copied (\(copied) of \(opened.size) bytes); ask again")))
        }
        return (copied, opened.version)
    }

    /// A source that cannot read parts: the original fetched whole, written and mapped.
    private func spoolWhole(
        _ key: CacheKey, lane: FlightLane, into spool: SpoolFile, maxBytes: Int
    ) async throws(ImageCacheError) -> (file: MappedFile, version: String) {
        let data = try await fetchOriginal(key, lane: lane)
        guard !data.bytes.isEmpty else { throw Self.empty(key) }
        guard data.bytes.count <= maxBytes else {
            throw .source(SourceError(key: key.string, reason: .tooLarge(bytes: data.bytes.count, limit: maxBytes)))
        }
        let bytes = data.bytes
        return try await onPool(key, lane: lane) { () throws(ImageCacheError) -> (file: MappedFile, version: String) in
            try Self.write(bytes, at: 0, to: spool, key: key)
            return (try Self.spoolFailure(key) { () throws(SystemCallError) in try spool.mapped(count: bytes.count) }, data.version)
        }
    }

    /// The engine's error for a source's, a missing original remembered for the negative TTL.
    private func sourceFailed(_ error: SourceError, key: CacheKey) -> ImageCacheError {
        if case .notFound = error.reason { rememberMissing(key) }
        return ImageCacheError(error)
    }

    private static func write(_ bytes: [UInt8], at offset: Int, to spool: SpoolFile, key: CacheKey) throws(ImageCacheError) {
        try spoolFailure(key) { () throws(SystemCallError) in
            try rethrowingTyped(SystemCallError.self) { try bytes.withUnsafeBytes { try spool.write($0, at: offset) } }
        }
    }

    /// `body`'s system-call failure as the table tier's (the spool lives beside its tables).
    private static func spoolFailure<T>(_ key: CacheKey, _ body: () throws(SystemCallError) -> T) throws(ImageCacheError) -> T {
        do {
            return try body()
        } catch {
            throw spoolFailure(error, key: key)
        }
    }

    private static func spoolFailure(_ error: SystemCallError, key: CacheKey) -> ImageCacheError {
        .tier(TierFailure(tier: .table, key: key.string, reason: "the original's spool file: \(error)"))
    }

    fileprivate static func empty(_ key: CacheKey) -> ImageCacheError {
        .source(SourceError(key: key.string, reason: .failed("the original is empty")))
    }
}

/// How far a spool has come, and the version and length its first part set.
private struct SpoolProgress {
    /// The most bytes the original may have.
    let maxBytes: Int
    var offset = 0
    var version: String?
    var total: Int?

    var isDone: Bool { total.map { offset >= $0 } ?? false }

    /// Takes the part read at ``offset``; throws when it is not of the first part's version
    /// and length, or brings nothing before the end.
    mutating func take(_ part: SourceRange, key: CacheKey) throws(ImageCacheError) {
        func changed(_ why: String) -> ImageCacheError { .source(SourceError(key: key.string, reason: .changed(why))) }
        if let version, let total {
            guard part.version == version, part.totalBytes == total else {
                throw changed("it was replaced while it was being copied (version \(version), now \(part.version)); ask again")
            }
        } else {
            guard part.totalBytes > 0 else { throw ImageCache.empty(key) }
            guard part.totalBytes <= maxBytes else {
                throw .source(SourceError(key: key.string, reason: .tooLarge(bytes: part.totalBytes, limit: maxBytes)))
            }
            version = part.version
            total = part.totalBytes
        }
        guard !part.bytes.isEmpty, offset + part.bytes.count <= part.totalBytes else {
            throw changed("a part at byte \(offset) of \(part.totalBytes) brought \(part.bytes.count) bytes")
        }
        offset += part.bytes.count
    }
}
