import StrataBase
#if canImport(Glibc)
import Glibc
#endif

/// Originals read from files under a root directory; the key is a relative path.
///
/// A key can never resolve outside the root: empty keys, absolute paths, `.`/`..` components,
/// NUL bytes and over-long keys are refused before any I/O, and the path is opened one
/// component at a time with `openat(O_NOFOLLOW)`, so a symbolic link anywhere on the way — even
/// one planted after start-up — is refused rather than followed. The version string is derived
/// from the file's device, inode, size and modification time (`fstat` on the open file).
///
/// Reads are blocking: `ImageCache` makes them on its own threads, in the render's job
/// (``BlockingImageSource``); the async ``fetch(key:)`` of a source used alone runs them on the
/// given ``/StrataBase/BlockingPool``, or on a private pool (as wide as the cores) started at the first such
/// call.
public struct DirectorySource: BlockingImageSource {
    /// The root directory.
    public let root: String
    /// Originals larger than this are refused (default 256 MiB): by their `fstat` size without
    /// being read, and while reading when the file grew since (no more than this plus one
    /// byte is ever read).
    public let maxFileBytes: Int
    private let pool: LazyPool

    /// The longest key accepted (bytes of UTF-8).
    public static let maxKeyBytes = 4096

    /// Async reads run on `pool`, or on a private pool started at the first one when `nil`
    /// (an engine never starts it: it reads with ``fetchBlocking(key:)`` on its own threads).
    public init(root: String, maxFileBytes: Int = 256 << 20, pool: BlockingPool<Void>? = nil) throws(SystemCallError) {
        self.root = root
        self.maxFileBytes = maxFileBytes
        self.pool = LazyPool(given: pool)
    }

    public func fetch(key: String) async throws(SourceError) -> SourceData {
        let components = try Self.validatedComponents(of: key)
        let root = self.root, limit = maxFileBytes
        let pool = try self.pool.get(key: key)
        do {
            return try await pool.run { () throws(SourceError) -> SourceData in
                try Self.read(components: components, key: key, root: root, maxFileBytes: limit)
            }
        } catch {
            throw SourceError(error, key: key)
        }
    }

    /// The file's identity, size and modification time (an `fstat` of the opened file, no read):
    /// the same string ``fetch(key:)`` reports while the file is unchanged.
    public func version(key: String) async throws(SourceError) -> String? {
        let components = try Self.validatedComponents(of: key)
        let root = self.root
        let pool = try self.pool.get(key: key)
        do {
            return try await pool.run { () throws(SourceError) -> String in
                Self.version(of: try Self.open(components: components, key: key, root: root).status)
            }
        } catch {
            throw SourceError(error, key: key)
        }
    }

    /// ``version(key:)`` on the calling thread (an `fstat` of the opened file).
    public func versionBlocking(key: String) throws(SourceError) -> String {
        Self.version(of: try Self.open(components: try Self.validatedComponents(of: key), key: key, root: root).status)
    }

    package static func version(of st: stat) -> String {
        "\(st.st_dev):\(st.st_ino):\(st.st_size):\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"
    }

    /// Reads synchronously on the calling thread (the engine's threads, command-line tools,
    /// benchmarks).
    public func fetchBlocking(key: String) throws(SourceError) -> SourceData {
        try Self.read(
            components: try Self.validatedComponents(of: key), key: key, root: root,
            maxFileBytes: maxFileBytes)
    }

    /// The first `maxBytes` bytes of the file (all of it when shorter) and its version (the
    /// same string ``fetch(key:)`` reports), whatever the file's size: only `maxBytes` are
    /// read (the header of an original over ``maxFileBytes``, which a tile pyramid can serve).
    public func fetchPrefixBlocking(key: String, maxBytes: Int) throws(SourceError) -> SourceData {
        let part = try fetchRangeBlocking(key: key, offset: 0, maxBytes: maxBytes)
        return SourceData(bytes: part.bytes, version: part.version)
    }

    /// Up to `maxBytes` bytes from `offset` (a `pread` of the opened file), its version and
    /// size. ``maxFileBytes`` does not apply: a part is bounded by `maxBytes`, and the caller
    /// bounds the whole by ``SourceRange/totalBytes`` (a pyramid build: `iiif.maxSourceSize`).
    /// Each part opens the file again, so a file replaced between parts shows a new version.
    public func fetchRangeBlocking(key: String, offset: Int, maxBytes: Int) throws(SourceError) -> SourceRange {
        let opened = try openOriginal(key: key, maxBytes: .max)
        var bytes = [UInt8](repeating: 0, count: max(0, min(opened.size - offset, maxBytes)))
        do {
            let got = try rethrowingTyped(SystemCallError.self) {
                try bytes.withUnsafeMutableBytes { raw in try opened.file.read(into: raw, at: offset) }
            }
            bytes.removeLast(bytes.count - got)
        } catch {
            throw SourceError(key: key, reason: .io(error))
        }
        return SourceRange(bytes: bytes, version: opened.version, totalBytes: opened.size)
    }

    public func fetchRange(key: String, offset: Int, maxBytes: Int) async throws(SourceError) -> SourceRange? {
        let pool = try self.pool.get(key: key)
        do {
            return try await pool.run { () throws(SourceError) -> SourceRange in
                try fetchRangeBlocking(key: key, offset: offset, maxBytes: maxBytes)
            }
        } catch {
            throw SourceError(error, key: key)
        }
    }

    /// An original opened for a copy in the kernel (a pyramid build's spool file): its file,
    /// its `fstat` size (within the caller's limit) and its version.
    package struct OpenedOriginal: ~Copyable {
        package let file: FileDescriptor
        package let size: Int
        package let version: String
    }

    /// Opens `key`'s original as ``fetch(key:)`` would read it, refusing one over `maxBytes`
    /// (a pyramid build's limit, not ``maxFileBytes``: the file is copied, never held) by its
    /// `fstat` size.
    package func openOriginal(key: String, maxBytes: Int) throws(SourceError) -> OpenedOriginal {
        let opened = try Self.open(components: try Self.validatedComponents(of: key), key: key, root: root)
        let size = Int(opened.status.st_size)
        guard size <= maxBytes else { throw SourceError(key: key, reason: .tooLarge(bytes: size, limit: maxBytes)) }
        return OpenedOriginal(file: opened.file, size: size, version: Self.version(of: opened.status))
    }

    /// The opened original's version now (an `fstat`): a copy that ends with another version
    /// than ``OpenedOriginal/version`` read a file that changed meanwhile.
    package func currentVersion(of opened: borrowing OpenedOriginal, key: String) throws(SourceError) -> String {
        do {
            return Self.version(of: try opened.file.status())
        } catch {
            throw SourceError(key: key, reason: .io(error))
        }
    }

    /// The refusal of an original over `maxFileBytes` (`size`: `nil` when it grew past it).
    package static func tooLarge(_ size: Int?, key: String, maxFileBytes: Int) -> SourceError {
        SourceError(key: key, reason: .tooLarge(bytes: size, limit: maxFileBytes))
    }

    /// Splits `key` into path components, refusing anything that could leave the root.
    package static func validatedComponents(of key: String) throws(SourceError) -> [String] {
        func refuse(_ why: String) -> SourceError { SourceError(key: key, reason: .invalidKey(why)) }
        if key.isEmpty { throw refuse("empty key") }
        if key.utf8.count > maxKeyBytes { throw refuse("longer than \(maxKeyBytes) bytes") }
        if key.utf8.contains(0) { throw refuse("contains a NUL byte") }
        if key.hasPrefix("/") { throw refuse("absolute paths are not allowed; give a path relative to the source root") }
        let parts = key.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if parts.isEmpty { throw refuse("no file name") }
        for part in parts where part == "." || part == ".." {
            throw refuse("'\(part)' path components are not allowed")
        }
        return parts
    }

    /// Whether `name` in `directory` is a symbolic link (`fstatat` without following; only on
    /// the error path).
    private static func isSymbolicLink(_ name: String, inDirectory dirFD: Int32) -> Bool {
        var st = stat()
        guard (try? Syscall.retrying("fstatat", path: name) { fstatat(dirFD, name, &st, AT_SYMLINK_NOFOLLOW) }) != nil else { return false }
        return (st.st_mode & S_IFMT) == S_IFLNK
    }

    /// Reads the whole of `file`, whose `fstat` size was `expectedSize`, refusing originals of
    /// more than `maxFileBytes` bytes: first by `expectedSize`, then while reading, so that a
    /// file that grew after the `fstat` (or one whose size `fstat` does not know) is never read
    /// past `maxFileBytes + 1` bytes. Both refusals are the same error.
    package static func readContents(
        of file: borrowing FileDescriptor, expectedSize: Int, key: String,
        maxFileBytes: Int
    ) throws(SourceError) -> [UInt8] {
        func tooLarge(_ size: Int?) -> SourceError { Self.tooLarge(size, key: key, maxFileBytes: maxFileBytes) }
        guard expectedSize <= maxFileBytes else { throw tooLarge(expectedSize) }
        // Reading one byte more than the limit proves the file is over it.
        let cap = maxFileBytes == .max ? maxFileBytes : maxFileBytes + 1
        var bytes: [UInt8] = []
        // One byte more than expected: the usual file is read with one call that also sees its end.
        var chunk = Swift.max(expectedSize, 0) + 1
        while true {
            let old = bytes.count
            let wanted = Swift.min(chunk, cap - old)
            bytes.append(contentsOf: repeatElement(0, count: wanted))
            let got: Int
            do {
                got = try rethrowingTyped(SystemCallError.self) {
                    try bytes.withUnsafeMutableBytes { raw in
                        try file.read(into: UnsafeMutableRawBufferPointer(rebasing: raw[old...]), at: old)
                    }
                }
            } catch {
                throw SourceError(key: key, reason: .io(error))
            }
            bytes.removeLast(wanted - got)
            if bytes.count > maxFileBytes { throw tooLarge(nil) }
            if got < wanted { return bytes }
            chunk = Swift.min(Swift.max(chunk * 2, 1 << 16), 1 << 24)
        }
    }

    private static func read(components: [String], key: String, root: String, maxFileBytes: Int) throws(SourceError) -> SourceData {
        let opened = try open(components: components, key: key, root: root)
        let bytes = try readContents(of: opened.file, expectedSize: Int(opened.status.st_size), key: key, maxFileBytes: maxFileBytes)
        return SourceData(bytes: bytes, version: version(of: opened.status))
    }

    /// Opens the regular file at `components` under `root` (component by component, refusing
    /// symbolic links) and `fstat`s it.
    private struct OpenedFile: ~Copyable {
        let file: FileDescriptor
        let status: stat
    }

    private static func open(components: [String], key: String, root: String) throws(SourceError) -> OpenedFile {
        func fail(_ error: SystemCallError) -> SourceError {
            switch error.errno {
            case ENOENT, ENOTDIR: return SourceError(key: key, reason: .notFound)
            case ELOOP: return SourceError(key: key, reason: .invalidKey("a path component is a symbolic link"))
            default: return SourceError(key: key, reason: .io(error))
            }
        }
        let opened: OpenedFile
        do throws(SystemCallError) {
            var directory = try FileDescriptor(open: root, flags: O_RDONLY | O_DIRECTORY)
            for name in components.dropLast() {
                let parent = directory.rawValue
                do {
                    directory = try FileDescriptor(openAt: directory, name: name, flags: O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
                } catch {
                    // O_DIRECTORY|O_NOFOLLOW on a symlink reports ENOTDIR; say what it really is.
                    if error.errno == ENOTDIR && isSymbolicLink(name, inDirectory: parent) {
                        throw SystemCallError(call: error.call, path: error.path, errno: ELOOP)
                    }
                    throw error
                }
            }
            let file = try FileDescriptor(openAt: directory, name: components.last!, flags: O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
            let status = try file.status()
            opened = OpenedFile(file: file, status: status)
        } catch {
            throw fail(error)
        }
        guard (opened.status.st_mode & S_IFMT) == S_IFREG else {
            throw SourceError(key: key, reason: .invalidKey("not a regular file"))
        }
        return opened
    }
}

extension DirectorySource {
    /// The pool of a source's async reads: the one given, or a private one started at the first
    /// async read (as wide as the cores: reads run concurrently) and shut down when the last copy
    /// of the source goes away.
    package final class LazyPool: Sendable {
        private let given: BlockingPool<Void>?
        private let owned = Lock<BlockingPoolOwner<Void>?>(nil)

        package init(given: BlockingPool<Void>?) { self.given = given }

        package func get(key: String) throws(SourceError) -> BlockingPool<Void> {
            if let given { return given }
            return try owned.withLock { owner throws(SourceError) -> BlockingPool<Void> in
                if let owner { return owner.pool }
                do throws(SystemCallError) {
                    let pool = try BlockingPool<Void>(width: Processors.online, name: "strata-src-io", makeContext: {})
                    owner = BlockingPoolOwner(pool)
                    return pool
                } catch {
                    throw SourceError(key: key, reason: .io(error))
                }
            }
        }
    }
}

extension SourceError {
    /// A source's blocking-pool failure: its own error, a cancellation, or a pool shut down.
    package init(_ error: BlockingPoolError<SourceError>, key: String) {
        self = error.resolved(
            cancelled: SourceError(key: key, reason: .cancelled),
            shutDown: SourceError(key: key, reason: .failed("the source's I/O pool is shut down")))
    }
}
