/// A 128-bit digest of a cache key: the first 16 bytes of the key's SHA-256 (UTF-8 bytes).
///
/// SHA-256 so that nobody can construct colliding keys on purpose (two keys with one digest
/// would share a file name and evict each other); the disk tier still compares the full key
/// stored in the file on every hit, so even a collision can never serve a wrong image.
/// Cost: one SHA-256 compression per 64 bytes of key (≈0.3 µs for a typical URL-sized key).
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
        let words = key.withUTF8 { SHA256.hash(UnsafeRawBufferPointer($0)) }
        self.high = UInt64(words.0) << 32 | UInt64(words.1)
        self.low = UInt64(words.2) << 32 | UInt64(words.3)
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

/// SHA-256 (FIPS 180-4), just enough for ``KeyDigest``: one-shot over a buffer.
package enum SHA256 {
    private static let roundConstants: [UInt32] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
    ]

    /// The eight 32-bit words of the SHA-256 of `message`.
    package static func hash(
        _ message: UnsafeRawBufferPointer
    )
        -> (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32)
    {
        var h: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (
            0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19
        )
        let length = message.count
        // Full blocks straight from the message, then one or two padded blocks.
        let fullBlocks = length / 64
        roundConstants.withUnsafeBufferPointer { k in
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                for block in 0..<fullBlocks {
                    compress(&h, UnsafeRawBufferPointer(rebasing: message[(block * 64)..<(block * 64 + 64)]), w, k)
                }
                withUnsafeTemporaryAllocation(byteCount: 128, alignment: 8) { tail in
                    tail.initializeMemory(as: UInt8.self, repeating: 0)
                    let rest = length - fullBlocks * 64
                    if rest > 0 {
                        tail.copyMemory(from: UnsafeRawBufferPointer(rebasing: message[(fullBlocks * 64)...]))
                    }
                    tail[rest] = 0x80
                    let tailBlocks = rest + 9 <= 64 ? 1 : 2
                    let bitLength = UInt64(length) &* 8
                    for i in 0..<8 {
                        tail[tailBlocks * 64 - 1 - i] = UInt8(truncatingIfNeeded: bitLength >> UInt64(8 * i))
                    }
                    for block in 0..<tailBlocks {
                        compress(&h, UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(tail)[(block * 64)..<(block * 64 + 64)]), w, k)
                    }
                }
            }
        }
        return h
    }

    @inline(__always)
    private static func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }

    private static func compress(
        _ h: inout (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32),
        _ block: UnsafeRawBufferPointer, _ w: UnsafeMutableBufferPointer<UInt32>, _ k: UnsafeBufferPointer<UInt32>
    ) {
        for i in 0..<16 {
            w[i] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self))
        }
        for i in 16..<64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, hh) = h
        for i in 0..<64 {
            let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
            let ch = (e & f) ^ (~e & g)
            let t1 = hh &+ s1 &+ ch &+ k[i] &+ w[i]
            let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
            let maj = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ maj
            hh = g
            g = f
            f = e
            e = d &+ t1
            d = c
            c = b
            b = a
            a = t1 &+ t2
        }
        h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e, h.5 &+ f, h.6 &+ g, h.7 &+ hh)
    }
}

/// XXH64 (Yann Collet's 64-bit non-cryptographic hash), used for the header and pixel
/// checksums of disk-tier files: it detects torn, truncated and bit-rotted files at several
/// GB/s. Not a defence against a deliberate forger (the full-key comparison and the directory's
/// permissions are).
package enum XXH64 {
    static let p1: UInt64 = 0x9E37_79B1_85EB_CA87
    static let p2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    static let p3: UInt64 = 0x1656_67B1_9E37_79F9
    static let p4: UInt64 = 0x85EB_CA77_C2B2_AE63
    static let p5: UInt64 = 0x27D4_EB2F_1656_67C5

    @inline(__always) static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }
    @inline(__always) static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
        rotl(acc &+ input &* p2, 31) &* p1
    }
    @inline(__always) static func merge(_ acc: UInt64, _ value: UInt64) -> UInt64 {
        (acc ^ round(0, value)) &* p1 &+ p4
    }

    /// The XXH64 of `bytes` with `seed`.
    package static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64 = 0) -> UInt64 {
        let count = bytes.count
        guard let base = bytes.baseAddress else { return finish(seed &+ p5, tail: bytes) }
        var offset = 0
        var h: UInt64
        if count >= 32 {
            var v1 = seed &+ p1 &+ p2, v2 = seed &+ p2, v3 = seed, v4 = seed &- p1
            let limit = count - 32
            while offset <= limit {
                v1 = round(v1, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt64.self)))
                v2 = round(v2, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)))
                v3 = round(v3, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)))
                v4 = round(v4, UInt64(littleEndian: base.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self)))
                offset += 32
            }
            h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
            h = merge(h, v1)
            h = merge(h, v2)
            h = merge(h, v3)
            h = merge(h, v4)
        } else {
            h = seed &+ p5
        }
        return finish(h, tail: UnsafeRawBufferPointer(rebasing: bytes[offset...]), total: count)
    }

    private static func finish(_ start: UInt64, tail: UnsafeRawBufferPointer, total: Int? = nil) -> UInt64 {
        var h = start &+ UInt64(total ?? tail.count)
        var i = 0
        let n = tail.count
        while i + 8 <= n {
            h ^= round(0, UInt64(littleEndian: tail.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
            h = rotl(h, 27) &* p1 &+ p4
            i += 8
        }
        if i + 4 <= n {
            h ^= UInt64(UInt32(littleEndian: tail.loadUnaligned(fromByteOffset: i, as: UInt32.self))) &* p1
            h = rotl(h, 23) &* p2 &+ p3
            i += 4
        }
        while i < n {
            h ^= UInt64(tail[i]) &* p5
            h = rotl(h, 11) &* p1
            i += 1
        }
        h ^= h >> 33
        h = h &* p2
        h ^= h >> 29
        h = h &* p3
        h ^= h >> 32
        return h
    }
}
