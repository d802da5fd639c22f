/// The key of an image, as every tier sees it: the caller's string and its 128-bit digest,
/// computed once when the key is made (the disk tier names files by it, the image tables
/// identify entities by it, the engine hashes by it).
///
/// Cost: one SHA-256 of the key's UTF-8 bytes at construction; hashing and comparing a
/// `CacheKey` afterwards costs two words, plus a string comparison on equal digests.
public struct CacheKey: Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// The key as the caller gave it (a path, a URL path, an id).
    public let string: String
    /// Its identity in every tier: the first 128 bits of the SHA-256 of `string`.
    public let entityID: ImageEntityID

    public init(_ string: String) {
        self.string = string
        self.entityID = ImageEntityID(hashing: string)
    }

    public init(stringLiteral value: String) { self.init(value) }

    /// A key with a given identity, for tests that need two keys with one identity (a SHA-256
    /// prefix collision, which nobody can produce on purpose).
    package init(_ string: String, forgedEntityID: ImageEntityID) {
        self.string = string
        self.entityID = forgedEntityID
    }

    public static func == (a: CacheKey, b: CacheKey) -> Bool { a.entityID == b.entityID && a.string == b.string }
    public func hash(into hasher: inout Hasher) { hasher.combine(entityID.low) }

    public var description: String { string }
}
