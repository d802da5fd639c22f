import CXXHash
import Crypto

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
