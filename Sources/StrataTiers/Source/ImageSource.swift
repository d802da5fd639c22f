import StrataBase
import StrataCodecs
/// The encoded bytes of an original image and a version string that changes whenever the
/// original changes (used to tell a cached variant from a stale one).
public struct SourceData: Sendable {
    public var bytes: [UInt8]
    public var version: String

    public init(bytes: [UInt8], version: String) {
        self.bytes = bytes
        self.version = version
    }
}

/// A part of an original (``ImageSource/fetchRange(key:offset:maxBytes:)``).
public struct SourceRange: Sendable {
    /// The part: `maxBytes` bytes from the offset asked for, fewer only at the original's end.
    public var bytes: [UInt8]
    /// The original's version (the string a whole fetch reports), the same for every part
    /// while the original is unchanged.
    public var version: String
    /// The original's whole length.
    public var totalBytes: Int

    public init(bytes: [UInt8], version: String, totalBytes: Int) {
        self.bytes = bytes
        self.version = version
        self.totalBytes = totalBytes
    }
}

/// Where originals come from: a directory, an HTTP origin, a closure.
///
/// Implementations must be safe to call from many tasks at once. `fetch` may block on I/O only
/// if it hops off Swift's cooperative pool itself (``DirectorySource`` runs its reads on the
/// ``/StrataBase/BlockingPool``).
public protocol ImageSource: Sendable {
    /// Returns the original for `key`, or throws a ``SourceError``.
    func fetch(key: String) async throws(SourceError) -> SourceData

    /// The current version of `key`'s original (the same string ``fetch(key:)`` would report),
    /// found cheaply — a `stat`, a `HEAD` — for revalidating cached variants; `nil` when this
    /// source has no cheaper way than fetching. Throws ``SourceError/Reason/notFound`` when the
    /// original is gone. The default returns `nil`.
    func version(key: String) async throws(SourceError) -> String?

    /// The first `maxBytes` bytes of the original (all of it when it is shorter) and its
    /// version: enough to read a header without transferring the image (a ranged GET). The
    /// default fetches the whole original.
    func fetchPrefix(key: String, maxBytes: Int) async throws(SourceError) -> SourceData

    /// Up to `maxBytes` bytes of the original from `offset` (a ranged GET), with its version
    /// and whole length; `nil` when this source cannot read part of an original (a closure, an
    /// origin that ignores `Range`): the caller fetches it whole then. For a pass over a large
    /// original that must not be held whole in memory (a pyramid build copies it to a file in
    /// parts). A source's limit on what it holds in memory bounds a part, not the whole length:
    /// the caller bounds that (``SourceRange/totalBytes``). The default returns `nil`.
    func fetchRange(key: String, offset: Int, maxBytes: Int) async throws(SourceError) -> SourceRange?
}

extension ImageSource {
    public func version(key: String) async throws(SourceError) -> String? { nil }

    public func fetchPrefix(key: String, maxBytes: Int) async throws(SourceError) -> SourceData {
        try await fetch(key: key)
    }

    public func fetchRange(key: String, offset: Int, maxBytes: Int) async throws(SourceError) -> SourceRange? { nil }
}

/// A source that can prove it is usable without fetching an original (its credentials accepted,
/// its bucket there): `/healthz?deep=1` asks it, and names the origin when it fails.
public protocol SourceHealthProbe: ImageSource {
    /// Returns when the source is usable; throws what a fetch would throw otherwise.
    func checkHealth() async throws(SourceError)
}

/// A source whose reads are blocking calls (files): `ImageCache` reads it on its own threads, in
/// the same job as the decode and resample — one hop for a cold render — instead of awaiting
/// ``ImageSource/fetch(key:)``, which would hop to the source's threads first. Reads are then
/// bounded by the engine's lanes, not by a thread of the source's.
public protocol BlockingImageSource: ImageSource {
    /// ``ImageSource/fetch(key:)`` on the calling thread (which may block).
    func fetchBlocking(key: String) throws(SourceError) -> SourceData
    /// ``ImageSource/version(key:)`` on the calling thread (which may block).
    func versionBlocking(key: String) throws(SourceError) -> String
    /// The first `maxBytes` bytes of the original (all of it when it is shorter) and its
    /// version, on the calling thread: enough to read a header without reading the image.
    func fetchPrefixBlocking(key: String, maxBytes: Int) throws(SourceError) -> SourceData
}

extension BlockingImageSource {
    /// The whole original (``fetchBlocking(key:)``): for sources that cannot read less.
    public func fetchPrefixBlocking(key: String, maxBytes: Int) throws(SourceError) -> SourceData {
        try fetchBlocking(key: key)
    }

}

/// Why the source tier could not produce an image; every case names the key.
public struct SourceError: Error, Sendable, CustomStringConvertible {
    public enum Reason: Sendable {
        /// The key is refused before any I/O (`..`, absolute path, NUL byte, symlink, empty).
        case invalidKey(String)
        /// No original exists for the key.
        case notFound
        /// The original exists but could not be read.
        case io(SystemCallError)
        /// The bytes are not a decodable image (corrupt, truncated, too large, unsupported).
        case decoding(ImageDecodingError)
        /// The source closure failed.
        case failed(String)
        /// An HTTP origin failed: an unexpected status (5xx after one retry), a broken
        /// connection, a timeout, a body over the size limit, a redirect loop (`HTTPSource`, in StrataHTTPOrigin).
        case origin(HTTPOriginError)
        /// The requesting task was cancelled before the work finished.
        case cancelled
        /// The original changed between two reads of one request (its version or size is not
        /// the one the request was planned for): asking again reads the new one.
        case changed(String)
        /// The original is over a size limit in bytes: `bytes` its size (`nil`: it grew past the
        /// limit while it was read). Nothing of it is kept.
        case tooLarge(bytes: Int?, limit: Int)
    }

    public var key: String
    public var reason: Reason

    public init(key: String, reason: Reason) {
        self.key = key
        self.reason = reason
    }

    public var description: String {
        let shownKey = key.count > 200 ? String(key.prefix(200)) + "…" : key
        switch reason {
        case .invalidKey(let why): return "\(shownKey.debugDescription): invalid key: \(why)"
        case .notFound: return "\(shownKey.debugDescription): no such image in the source"
        case .io(let error): return "\(shownKey.debugDescription): cannot read the original: \(error)"
        case .decoding(let error): return "\(shownKey.debugDescription): \(error)"
        case .failed(let why): return "\(shownKey.debugDescription): source failed: \(why)"
        case .origin(let error): return "\(shownKey.debugDescription): \(error)"
        case .cancelled: return "\(shownKey.debugDescription): cancelled"
        case .changed(let why): return "\(shownKey.debugDescription): the original changed: \(why)"
        case .tooLarge(let bytes, let limit):
            let size = bytes.map { "is \($0) bytes" } ?? "grew"
            return "\(shownKey.debugDescription): the original \(size), over the \(limit)-byte limit"
        }
    }
}

/// A source backed by a closure, for originals that live elsewhere (a database, an object
/// store client, a test).
public struct ClosureSource: ImageSource {
    private let body: @Sendable (String) async throws -> SourceData
    private let versionBody: (@Sendable (String) async throws -> String?)?

    /// `body` returns the original for a key; any error it throws is reported as
    /// ``SourceError/Reason/failed(_:)`` (or passed through when it already is a ``SourceError``).
    /// `version`, when given, answers ``version(key:)`` cheaply.
    public init(
        version: (@Sendable (String) async throws -> String?)? = nil, _ body: @escaping @Sendable (String) async throws -> SourceData
    ) {
        self.body = body
        self.versionBody = version
    }

    public func version(key: String) async throws(SourceError) -> String? {
        guard let versionBody else { return nil }
        do {
            return try await versionBody(key)
        } catch let error as SourceError {
            throw error
        } catch {
            throw SourceError(key: key, reason: .failed(String(describing: error)))
        }
    }

    public func fetch(key: String) async throws(SourceError) -> SourceData {
        do {
            return try await body(key)
        } catch let error as SourceError {
            throw error
        } catch {
            throw SourceError(key: key, reason: .failed(String(describing: error)))
        }
    }
}
