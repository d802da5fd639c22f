import StrataBase
/// The 64-bit checksum of table entries, trailers and metadata records: XXH3-64 from libxxhash
/// (the same hash the disk tier uses, `Disk/Hashing.swift`), seeded per use so that a record
/// copied to another slot or field does not verify there.
///
/// It detects torn writes, flipped bits and zeroed pages; it is not a defence against a
/// deliberate forger.
package enum TableChecksum {
    /// A 64-bit odd constant for mixing seeds (XXH64's third prime).
    @usableFromInline package static let prime3: UInt64 = 0x1656_67B1_9E37_79F9

    /// The checksum of `bytes` with `seed` (different seeds give unrelated checksums).
    @inline(__always)
    package static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
        XXHash.xxh3(bytes, seed: seed)
    }
}
