/// An image's identity where its key string is not at hand: the first 128 bits of the SHA-256
/// of the key's UTF-8 bytes. The disk tier names files by it, the image tables store it in every
/// entry (FastImageCache's entity UUID), the memory tier indexes by it, and a ``CacheKey``
/// carries it — one derivation for every tier, the same in every process.
///
/// SHA-256 so that nobody can construct colliding keys on purpose; the disk tier still
/// compares the full key stored in each file on a hit, and the memory tier the key string, so
/// even a collision never serves a wrong image.
///
/// Cost: one SHA-256 (swift-crypto) to derive; two words to hash and compare.
public struct ImageEntityID: Hashable, Sendable, CustomStringConvertible {
    /// Bytes 0..<8 of the digest, big-endian.
    public var high: UInt64
    /// Bytes 8..<16 of the digest, big-endian.
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The identity of the string key `key` (what ``CacheKey/entityID`` holds for it). (Releases
    /// before the one identity hashed table entities with XXH64: their entries are misses and
    /// leave by LRU.)
    public init(hashing key: String) {
        var key = key
        self = key.withUTF8 { ImageEntityID(hashingBytes: UnsafeRawBufferPointer($0)) }
    }

    /// The identity of `key` (computed when the key was made: no hashing here).
    public init(_ key: CacheKey) { self = key.entityID }

    /// One word: the bits are a SHA-256's, already uniform.
    public func hash(into hasher: inout Hasher) { hasher.combine(low) }

    /// The first 16 bytes of the SHA-256 of `bytes` — except for a key with operations (its
    /// source key, a NUL, …, `NUL ops=`…: ``CacheKey/init(_:colour:gravity:operations:)``), whose
    /// high word is the source key's and whose low word is its own: the *family* of the source
    /// key, which a purge finds by the high word (``isFamily(of:)``) in tiers that keep no keys.
    package init(hashingBytes bytes: UnsafeRawBufferPointer) {
        self = Self.digest(bytes)
        if let nul = bytes.firstIndex(of: 0), Self.hasOperations(bytes[nul...]) {
            high = Self.digest(UnsafeRawBufferPointer(rebasing: bytes[..<nul])).high
        }
    }

    private static func digest(_ bytes: UnsafeRawBufferPointer) -> ImageEntityID {
        KeyHash.sha256(bytes) { digest in
            ImageEntityID(
                high: UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                low: UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 8, as: UInt64.self)))
        }
    }

    /// Whether the derived parts of a key (from its first NUL) name operations.
    private static func hasOperations(_ parts: Slice<UnsafeRawBufferPointer>) -> Bool {
        let marker = CacheKey.operationsMarker.utf8
        var rest = parts[...]
        while let nul = rest.firstIndex(of: 0) {
            if rest[nul...].starts(with: marker) { return true }
            rest = rest[(nul + 1)...]
        }
        return false
    }

    /// Whether this is the identity of a key with operations derived from the source key whose
    /// identity is `source` (see ``init(hashing:)``, a key with operations): the same high word, another low one.
    /// A plain key shares a high word with another only by a 64-bit accident.
    public func isFamily(of source: ImageEntityID) -> Bool { high == source.high && low != source.low }

    /// 32 lower-case hex digits (the disk tier's file names begin with them).
    public var description: String {
        var bytes = [UInt8](repeating: 0, count: 32)
        Self.writeHex(high, into: &bytes, at: 0)
        Self.writeHex(low, into: &bytes, at: 16)
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func writeHex(_ value: UInt64, into bytes: inout [UInt8], at start: Int) {
        let digits = Array("0123456789abcdef".utf8)
        for i in 0..<16 {
            bytes[start + i] = digits[Int((value >> UInt64(60 - 4 * i)) & 0xF)]
        }
    }
}
