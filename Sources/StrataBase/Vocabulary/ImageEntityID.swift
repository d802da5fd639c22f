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

    /// The first 16 bytes of the SHA-256 of `bytes`.
    package init(hashingBytes bytes: UnsafeRawBufferPointer) {
        (high, low) = KeyHash.sha256(bytes) { digest in
            (
                UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            )
        }
    }

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
