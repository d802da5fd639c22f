import CXXHash
import Crypto

/// A 128-bit digest of a cache key: the first 16 bytes of the key's SHA-256 (UTF-8 bytes).
///
/// SHA-256 so that nobody can construct colliding keys on purpose (two keys with one digest
/// would share a file name and evict each other); the disk tier still compares the full key
/// stored in the file on every hit, so even a collision can never serve a wrong image.
/// The SHA-256 is swift-crypto's (BoringSSL, which uses the CPU's SHA extensions).
package struct KeyDigest: Hashable, Sendable, CustomStringConvertible {
    /// Bytes 0..<8 of the digest, big-endian.
    package var high: UInt64
    /// Bytes 8..<16 of the digest, big-endian.
    package var low: UInt64

    package init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The digest of `key`.
    package init(key: String) {
        var key = key
        self = key.withUTF8 { KeyDigest(hashing: UnsafeRawBufferPointer($0)) }
    }

    /// The digest of `bytes`: the first 16 bytes of their SHA-256.
    package init(hashing bytes: UnsafeRawBufferPointer) {
        (high, low) = KeyHash.sha256(bytes) { digest in
            (
                UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                UInt64(bigEndian: digest.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            )
        }
    }

    /// 32 lower-case hex digits.
    package var description: String {
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

/// SHA-256 of keys, through swift-crypto.
package enum KeyHash {
    /// Calls `body` with the 32 bytes of the SHA-256 of `bytes` (valid only inside `body`).
    package static func sha256<R>(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        var hasher = SHA256()
        hasher.update(bufferPointer: bytes)
        return hasher.finalize().withUnsafeBytes(body)
    }

    /// The 64 lower-case hex digits of the SHA-256 of `bytes`.
    package static func sha256Hex(_ bytes: UnsafeRawBufferPointer) -> String {
        sha256(bytes) { digest in
            let digits = Array("0123456789abcdef".utf8)
            var hex = [UInt8]()
            hex.reserveCapacity(64)
            for byte in digest {
                hex.append(digits[Int(byte >> 4)])
                hex.append(digits[Int(byte & 0xF)])
            }
            return String(decoding: hex, as: UTF8.self)
        }
    }
}

/// Non-cryptographic 64-bit hashes from Debian's libxxhash: they detect torn, truncated and
/// bit-rotted files at memory speed. Not a defence against a deliberate forger (the full-key
/// comparison and the directory's permissions are).
package enum XXHash {
    /// XXH3-64 of `bytes` with `seed`: the header and pixel checksums of disk-tier files and
    /// image tables.
    @inline(__always)
    package static func xxh3(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        XXH3_64bits_withSeed(bytes.baseAddress, bytes.count, seed)
    }

    /// XXH64 of `bytes` with `seed`: what earlier formats stored (tests write such files to
    /// check they are refused or read as before).
    @inline(__always)
    package static func xxh64(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        XXH64(bytes.baseAddress, bytes.count, seed)
    }
}
