/// The key of an image, as every tier sees it: the caller's string and its 128-bit digest,
/// computed once when the key is made (the disk tier names files by it, the image tables
/// identify entities by it, the engine hashes by it).
///
/// Cost: one SHA-256 of the key's UTF-8 bytes at construction; hashing and comparing a
/// `CacheKey` afterwards costs two words, plus a string comparison on equal digests.
public struct CacheKey: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The key as the caller gave it (a path, a URL path, an id).
    public let string: String
    /// SHA-256 of `string`, first 128 bits (``DiskTier`` file names, ``ImageEntityID``).
    package let digest: KeyDigest

    public init(_ string: String) {
        self.string = string
        self.digest = KeyDigest(key: string)
    }

    public init(stringLiteral value: String) { self.init(value) }

    /// The image tables' identity of this key (``ImageEntityID/init(_:)``).
    public var entityID: ImageEntityID { ImageEntityID(self) }

    public static func == (a: CacheKey, b: CacheKey) -> Bool { a.digest == b.digest && a.string == b.string }
    public func hash(into hasher: inout Hasher) { hasher.combine(digest.low) }

    public var description: String { string }
}
