/// A fast, non-cryptographic 64-bit checksum for table entries, trailers and metadata records.
///
/// Four independent multiply-rotate lanes over 32-byte blocks (so the loop runs at memory speed
/// in release builds), folded and finished with an avalanche step. It detects torn writes,
/// flipped bits and zeroed pages; it is not a defence against a deliberate forger.
enum TableChecksum {
    @usableFromInline static let prime1: UInt64 = 0x9E37_79B1_85EB_CA87
    @usableFromInline static let prime2: UInt64 = 0xC2B2_AE3D_27D4_EB4F
    @usableFromInline static let prime3: UInt64 = 0x1656_67B1_9E37_79F9

    @inline(__always) @usableFromInline
    static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 { (x << r) | (x >> (64 - r)) }

    @inline(__always) @usableFromInline
    static func round(_ acc: UInt64, _ word: UInt64) -> UInt64 {
        rotl(acc &+ word &* prime2, 31) &* prime1
    }

    /// The checksum of `bytes` with `seed` (different seeds give unrelated checksums).
    static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        let count = bytes.count
        var h: UInt64
        var i = 0
        if let base = bytes.baseAddress, count >= 32 {
            var a0 = seed &+ prime1 &+ prime2, a1 = seed &+ prime2, a2 = seed, a3 = seed &- prime1
            while i + 32 <= count {
                a0 = round(a0, base.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                a1 = round(a1, base.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self))
                a2 = round(a2, base.loadUnaligned(fromByteOffset: i + 16, as: UInt64.self))
                a3 = round(a3, base.loadUnaligned(fromByteOffset: i + 24, as: UInt64.self))
                i += 32
            }
            h = rotl(a0, 1) &+ rotl(a1, 7) &+ rotl(a2, 12) &+ rotl(a3, 18)
            h = (h ^ round(0, a0)) &* prime1 &+ prime3
            h = (h ^ round(0, a1)) &* prime1 &+ prime3
            h = (h ^ round(0, a2)) &* prime1 &+ prime3
            h = (h ^ round(0, a3)) &* prime1 &+ prime3
        } else {
            h = seed &+ prime3
        }
        h = h &+ UInt64(count)
        if let base = bytes.baseAddress {
            while i + 8 <= count {
                h ^= round(0, base.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                h = rotl(h, 27) &* prime1 &+ prime3
                i += 8
            }
            while i < count {
                h ^= UInt64(base.load(fromByteOffset: i, as: UInt8.self)) &* prime3
                h = rotl(h, 11) &* prime1
                i += 1
            }
        }
        h ^= h >> 33
        h = h &* prime2
        h ^= h >> 29
        h = h &* prime3
        h ^= h >> 32
        return h
    }
}
