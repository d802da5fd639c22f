import Foundation
import Testing
@testable import Strata

@Suite("Disk file format")
struct DiskFormatTests {
    private func sha256Hex(_ text: String) -> String {
        Array(text.utf8).withUnsafeBytes { KeyHash.sha256Hex($0) }
    }

    @Test("SHA-256 matches the FIPS 180-2 test vectors, across block boundaries")
    func sha256Vectors() {
        #expect(sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(
            sha256Hex(String(repeating: "a", count: 1_000_000))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test("The key digest is the first 128 bits of SHA-256, as 32 hex digits")
    func digest() {
        let digest = ImageEntityID(hashing: "abc")
        #expect(digest.description == "ba7816bf8f01cfea414140de5dae2223")
        #expect(ImageEntityID(hashing: "abd") != digest)
    }

    @Test("XXH64 and XXH3-64 match reference values (xxhsum 0.8.1)")
    func xxhash() {
        func bytes(_ s: String) -> [UInt8] { Array(s.utf8) }
        func xxh64(_ b: [UInt8], seed: UInt64 = 0) -> UInt64 { b.withUnsafeBytes { XXHash.xxh64($0, seed: seed) } }
        func xxh3(_ b: [UInt8], seed: UInt64 = 0) -> UInt64 { b.withUnsafeBytes { XXHash.xxh3($0, seed: seed) } }
        #expect(xxh64(bytes("")) == 0xEF46_DB37_51D8_E999)
        #expect(xxh64(bytes("abc")) == 0x44BC_2CF5_AD77_0999)
        // ≥ 32 bytes exercises the four-lane loop.
        #expect(xxh64(bytes("Nobody inspects the spammish repetition")) == 0xFBCE_A83C_8A37_8BF1)
        // XXH3 has separate paths for 0, 1–3, 17–128 and > 240 bytes.
        #expect(xxh3(bytes("")) == 0x2D06_8005_38D3_94C2)
        #expect(xxh3(bytes("abc")) == 0x78AF_5F94_892F_3950)
        #expect(xxh3(bytes("Nobody inspects the spammish repetition")) == 0x6CB0_0603_B5CC_47E9)
        #expect(xxh3([UInt8](repeating: 0, count: 1000)) == 0x24C1_EA60_74DD_588C)
        #expect(xxh3(bytes("abc"), seed: 1) != xxh3(bytes("abc")))
    }

    @Test("Names round-trip and only canonical names parse")
    func names() {
        let digest = ImageEntityID(hashing: "photo/1")
        for mode in ContentMode.allCases {
            for style in PixelStyle.allCases {
                let name = DiskFileName(
                    digest: digest, variant: VariantDescriptor(size: PixelSize(width: 640, height: 427), mode: mode, style: style))
                #expect(DiskFileName(name.string) == name)
                #expect(name.withCString { String(cString: $0) } == name.string)
            }
        }
        let good = DiskFileName(digest: digest, variant: VariantDescriptor(size: PixelSize(width: 640, height: 427))).string
        #expect(DiskFileName(good) != nil)
        let rejected = [
            good.uppercased(),
            good.replacingOccurrences(of: "-640x", with: "-0640x"),
            good.replacingOccurrences(of: "-640x", with: "-0x"),
            good + ".tmp",
            DiskFileName.temporaryPrefix + good,
            good.replacingOccurrences(of: ".px", with: ".pz"),
            good.replacingOccurrences(of: "-fa", with: "-za"),
            good.replacingOccurrences(of: "-fa", with: "-fq"),
            String(good.dropFirst()),
            "..", ".", "", "x",
        ]
        for name in rejected { #expect(DiskFileName(name) == nil, "\(name)") }
    }

    @Test("A whole original's name says so (mode o), its header agrees, and a disagreement is refused")
    func wholeOriginals() throws {
        let digest = ImageEntityID(hashing: "photo/1")
        let size = PixelSize(width: 320, height: 200)
        let whole = DiskFileName(digest: digest, variant: VariantDescriptor(size: size), isWholeOriginal: true)
        #expect(whole.string.hasSuffix("-320x200-oa.px"))
        #expect(DiskFileName(whole.string) == whole && DiskFileName(whole.string)?.isWholeOriginal == true)
        #expect(whole.withCString { String(cString: $0) } == whole.string)
        let plain = DiskFileName(digest: digest, variant: VariantDescriptor(size: size))
        #expect(plain != whole && DiskFileName(plain.string)?.isWholeOriginal == false)
        #expect(DiskIndexEntry(whole).name == whole && DiskIndexEntry(plain).name == plain)
        #expect(!DiskIndexEntry(whole).sameFile(DiskIndexEntry(plain)), "two names, two files")

        let image = PixelImage(width: 320, height: 200)
        let file = DiskFileEncoder.encode(image, key: "photo/1", mode: .fit, isWholeOriginal: true, sourceVersion: 7)
        let header = try file.withUnsafeBytes { try DiskFileHeader(validating: $0) }
        #expect(header.isWholeOriginal && header.mode == .fit)
        let key = Array("photo/1".utf8)
        func outcome(_ bytes: [UInt8], whole: Bool) -> String {
            bytes.withUnsafeBytes { raw in
                key.withUnsafeBytes { k in
                    switch DiskFileValidation.validate(
                        raw, variant: VariantDescriptor(size: size), isWholeOriginal: whole, key: k, verifyPixels: true)
                    {
                    case .valid: "valid"
                    case .invalid: "invalid"
                    case .otherKey: "otherKey"
                    }
                }
            }
        }
        #expect(outcome(file, whole: true) == "valid")
        #expect(outcome(file, whole: false) == "invalid", "a whole original's bytes under a plain name")
        let plainFile = DiskFileEncoder.encode(image, key: "photo/1", mode: .fit, sourceVersion: 7)
        #expect(outcome(plainFile, whole: true) == "invalid")
        // Files written before the flag existed (byte 30 was reserved, 0) read as plain.
        #expect(outcome(plainFile, whole: false) == "valid")
    }

    @Test("Headers round-trip; any flipped header or key byte is refused")
    func headers() throws {
        var image = PixelImage(width: 5, height: 3, style: .bgra32Premultiplied)
        image.withUnsafeMutableBytes { raw in for i in raw.indices { raw[i] = UInt8(truncatingIfNeeded: i &* 7) } }
        let key = "key/ü/\u{0}/end"
        let file = DiskFileEncoder.encode(image, key: key, mode: .fill, sourceVersion: 42)
        let header = try file.withUnsafeBytes { try DiskFileHeader(validating: $0) }
        #expect(header.width == 5 && header.height == 3 && header.mode == .fill && header.sourceVersion == 42)
        #expect(header.pixelOffset % 64 == 0)
        #expect(header.fileLength == file.count)
        #expect(header.keyLength == key.utf8.count)
        file.withUnsafeBytes { raw in
            #expect(Array(DiskFileHeader.keyBytes(in: raw, keyLength: header.keyLength)) == Array(key.utf8))
            #expect(XXHash.xxh3(UnsafeRawBufferPointer(rebasing: raw[header.pixelOffset...])) == header.pixelChecksum)
        }
        for position in 0..<header.pixelOffset where position < 64 + header.keyLength {
            var damaged = file
            damaged[position] ^= 0x01
            #expect(throws: DiskFileHeader.Problem.self) {
                try damaged.withUnsafeBytes { try DiskFileHeader(validating: $0) }
            }
        }
        #expect(throws: DiskFileHeader.Problem.self) {
            try Array(file.prefix(40)).withUnsafeBytes { try DiskFileHeader(validating: $0) }
        }
    }
}

@Suite("Disk index")
struct DiskIndexTests {
    struct Model: Hashable {
        var digest: ImageEntityID
        var variant: VariantDescriptor
    }

    @Test("Random inserts and removals agree with a set, and matching agrees with VariantMatcher")
    func randomAgainstModel() {
        var rng = SystemRandomNumberGenerator()
        let digests = (0..<200).map { ImageEntityID(hashing: "k\($0)") }
        // Force collisions of the probe start: same low bits for some digests.
        let colliding = (0..<20).map { ImageEntityID(high: UInt64($0), low: 7) }
        let allDigests = digests + colliding
        var index = DiskIndex()
        var model = Set<Model>()
        for _ in 0..<20_000 {
            let digest = allDigests.randomElement(using: &rng)!
            let variant = VariantDescriptor(
                size: PixelSize(width: Int.random(in: 1...8, using: &rng) * 50, height: Int.random(in: 1...8, using: &rng) * 50),
                mode: Bool.random(using: &rng) ? .fit : .fill, style: PixelStyle.allCases.randomElement(using: &rng)!)
            let entry = DiskIndexEntry(digest: digest, variant: variant)
            if Bool.random(using: &rng) {
                #expect(index.insert(entry) == model.insert(Model(digest: digest, variant: variant)).inserted)
            } else {
                #expect(index.remove(entry) == (model.remove(Model(digest: digest, variant: variant)) != nil))
            }
        }
        #expect(index.count == model.count)
        #expect(Set(index.entries.map { Model(digest: $0.digest, variant: $0.variant) }) == model)
        #expect(index.chargedBytes == index.entries.reduce(0) { $0 + $1.chargedBytes })
        for digest in allDigests {
            let query = SizeQuery(box: PixelSize(width: 200, height: 200), mode: .fit, style: .bgra32Premultiplied)
            let expected = VariantMatcher.bestMatch(in: model.filter { $0.digest == digest }.map(\.variant), for: query)
            let found = index.bestMatch(for: digest, query: query).map { index[$0].variant }
            if let expected, let found {
                // Equal quality (ties between equal-q variants of different shape are allowed).
                #expect(VariantMatcher.fillRatio(of: expected, for: query) == VariantMatcher.fillRatio(of: found, for: query))
            } else {
                #expect(expected == nil && found == nil)
            }
        }
    }

    @Test("Eviction takes the least recently used entries first, frees enough, and looks at nothing else")
    func lru() {
        var index = DiskIndex()
        let variant = VariantDescriptor(size: PixelSize(width: 16, height: 16))
        let entries = (0..<300).map { DiskIndexEntry(digest: ImageEntityID(hashing: "\($0)"), variant: variant) }
        for entry in entries { index.insert(entry) }
        // Use them in a scrambled order: that order is the recency order.
        let order = (0..<300).map { ($0 * 7919) % 300 }
        for i in order { index.touch(index.slot(of: entries[i])!) }
        // A late refresh of an existing name does not count as a use; a `use` does.
        index.insert(entries[order[0]])
        #expect(index.entries.first == index[index.slot(of: entries[order[0]])!])
        let each = entries[0].chargedBytes
        var examined = 0
        let excluded = entries[order[1]]
        let victims = index.takeLeastRecentlyUsed(atLeast: each * 100 + 1, maximumCount: 1000, excluding: excluded, examined: &examined)
        #expect(victims.map(\.digest) == ([order[0]] + order[2..<102]).map { entries[$0].digest })
        #expect(examined == 102)
        #expect(index.count == 199 && index.slot(of: excluded) != nil)
        #expect(index.chargedBytes == 199 * each)
        let batch = index.takeLeastRecentlyUsed(atLeast: .max, maximumCount: 10, examined: &examined)
        #expect(batch.map(\.digest) == ([order[1]] + order[102..<111]).map { entries[$0].digest })
        #expect(index.count == 189)
    }

    @Test("The index stays under 100 bytes per entry")
    func compact() {
        #expect(MemoryLayout<DiskIndexEntry>.stride == 32)
        var index = DiskIndex()
        let variant = VariantDescriptor(size: PixelSize(width: 16, height: 16))
        for i in 0..<100_000 {
            index.insert(DiskIndexEntry(digest: ImageEntityID(high: UInt64(i), low: UInt64(i) &* 0x9E37_79B9_7F4A_7C15), variant: variant))
        }
        #expect(index.memoryBytes / index.count < 100)
    }

    @Test("Sides from 1 to 2^20, every mode and style survive the packed entry")
    func packedVariants() {
        for side in [1, 2, 255, 4096, DiskFileName.maximumSide] {
            for mode in [ContentMode.fit, .fill] {
                for style in PixelStyle.allCases {
                    let variant = VariantDescriptor(
                        size: PixelSize(width: side, height: DiskFileName.maximumSide + 1 - side), mode: mode, style: style)
                    var entry = DiskIndexEntry(digest: ImageEntityID(hashing: "k"), variant: variant)
                    entry.generation = 0xFFFF
                    entry.isVerified = true
                    #expect(entry.variant == variant && entry.generation == 0xFFFF && entry.isVerified)
                }
            }
        }
    }
}

@Suite struct StoredKeyTests {
    @Test(arguments: [
        "short", "", String(repeating: "k", count: DiskTier.maximumKeyLength),
        String(repeating: "k", count: DiskTier.maximumKeyLength + 1), String(repeating: "é", count: 6_000),
    ])
    func storedKeysLeadBackToTheirNames(key: String) {
        var stored = StoredKey.string(for: key)
        #expect(stored.utf8.count <= DiskTier.maximumKeyLength)
        #expect((stored == key) == (key.utf8.count <= DiskTier.maximumKeyLength))
        let digest = stored.withUTF8 { StoredKey.nameDigest(ofStored: UnsafeRawBufferPointer($0)) }
        #expect(digest == ImageEntityID(hashing: key))
    }

    @Test func aMalformedDigestFormMatchesNoName() {
        let long = String(repeating: "q", count: 5_000)
        let stored = StoredKey.string(for: long)
        // A non-hex digit inside the 128 bits the name carries.
        let forged = String(stored.prefix(9)) + "z" + String(stored.dropFirst(10))
        var bytes = forged
        let digest = bytes.withUTF8 { StoredKey.nameDigest(ofStored: UnsafeRawBufferPointer($0)) }
        #expect(forged.utf8.count == stored.utf8.count && digest != ImageEntityID(hashing: long))
    }

    /// Row padding an image never wrote (``PixelImage/init(uninitializedWidth:height:style:)``)
    /// is written as zeros: no heap bytes reach a file (or the shared tier), and the same pixels
    /// always make the same file.
    @Test func rowPaddingIsWrittenAsZeros() throws {
        var image = PixelImage(uninitializedWidth: 5, height: 3)
        #expect(image.bytesPerRow > 5 * 4)
        image.withUnsafeMutableBytes { bytes in
            for i in bytes.indices { bytes[i] = 0xAA }
        }
        let file = DiskFileEncoder.encode(image, key: "padded", mode: .fit, sourceVersion: 1)
        let header = file.withUnsafeBytes { try? DiskFileHeader(validating: $0) }
        let parsed = try #require(header)
        for y in 0..<3 {
            let row = file[(parsed.pixelOffset + y * parsed.bytesPerRow)...].prefix(parsed.bytesPerRow)
            #expect(row.prefix(20).allSatisfy { $0 == 0xAA } && row.dropFirst(20).allSatisfy { $0 == 0 })
        }
    }
}
