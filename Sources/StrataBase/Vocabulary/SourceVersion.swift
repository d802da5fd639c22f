/// Which version of an original a cached variant was made from.
///
/// Sources speak in strings (an ETag, `mtime-size-inode`, a content hash); the disk files and
/// table entries store 64 bits. This is the one mapping between them, the same in every process:
/// ``stamp`` is the first 8 bytes of the SHA-256 of the token (0 is reserved for "unknown", as
/// written by callers that did not give a version). Two versions are equal when their stamps are.
public struct SourceVersion: Hashable, Sendable, CustomStringConvertible {
    /// The 64-bit form stored in disk-tier headers and table trailers.
    public let stamp: UInt64
    /// The source's own token, when this value was made from one (not when read back from a
    /// disk file or a table entry, which keep the stamp only).
    public let token: String?

    /// The version a source reported.
    public init(token: String) {
        let digest = ImageEntityID(hashing: token)
        self.stamp = digest.high == 0 ? 1 : digest.high
        self.token = token
    }

    /// A version read back from a file or table entry.
    public init(stamp: UInt64) {
        self.stamp = stamp
        self.token = nil
    }

    /// No version known (0).
    public static let unknown = SourceVersion(stamp: 0)

    public static func == (a: SourceVersion, b: SourceVersion) -> Bool { a.stamp == b.stamp }
    public func hash(into hasher: inout Hasher) { hasher.combine(stamp) }

    public var description: String { token ?? String(stamp, radix: 16) }
}
