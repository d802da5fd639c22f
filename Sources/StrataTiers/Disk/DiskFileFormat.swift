import StrataBase
/// The name of a published disk-tier file: `<32 hex digest>-<w>x<h>-<mode><style>.px`, where
/// mode is `f` (fit), `c` (fill) or `o` (fit, and the whole original: the source at full size,
/// which ``VariantMatcher`` lets serve every `fit` box that contains it).
///
/// Everything the index needs — the match rule's inputs included — is in the name, so the
/// index is built from directory entries alone. The name is canonical (lower-case hex, no leading zeros), so one variant has exactly
/// one name; anything else in the directory (temporary files start with `.`) is ignored.
package struct DiskFileName: Equatable, Sendable {
    package var digest: ImageEntityID
    package var variant: VariantDescriptor
    /// The file holds the whole original (`fit` only).
    package var isWholeOriginal: Bool

    /// Extension of published files.
    package static let fileExtension = "px"
    /// Prefix of temporary files (never parsed as a published name).
    package static let temporaryPrefix = ".strata-tmp-"
    /// Largest side accepted in a name (keeps every size inside `UInt32` and the
    /// file-size arithmetic far from overflow).
    package static let maximumSide = 1 << 20
    /// Largest width × height accepted in a name or header (2^28 pixels: 1 GiB at 4 bytes per
    /// pixel). Without it a crafted name such as `…-1048576x1048576-fa.px` would be charged
    /// about 4 TiB against the byte limit (evicting everything else), and a few million such
    /// names would overflow the index's byte count; with it a name is charged at most ~1 GiB,
    /// so the count cannot overflow before the index runs out of memory.
    package static let maximumPixelCount = 1 << 28

    package init(digest: ImageEntityID, variant: VariantDescriptor, isWholeOriginal: Bool = false) {
        precondition(!isWholeOriginal || variant.mode == .fit, "only a fit variant can be the whole original")
        self.digest = digest
        self.variant = variant
        self.isWholeOriginal = isWholeOriginal
    }

    /// The mode letter: `f`, `c`, or `o` for a whole original.
    private var modeCode: Character { isWholeOriginal ? "o" : variant.mode.code }

    /// The file name.
    package var string: String {
        "\(digest)-\(variant.size.width)x\(variant.size.height)-\(modeCode)\(variant.style.code).\(Self.fileExtension)"
    }

    /// Calls `body` with the name as a NUL-terminated C string built on the stack (the hit
    /// path opens files by name without allocating a `String`).
    package func withCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 64) { buffer in
            let hex: StaticString = "0123456789abcdef"
            let digits = hex.utf8Start
            var n = 0
            for i in 0..<32 {
                let word = i < 16 ? digest.high : digest.low
                buffer[n] = digits[Int((word >> UInt64(60 - 4 * (i & 15))) & 0xF)]
                n += 1
            }
            func put(_ byte: UInt8) {
                buffer[n] = byte
                n += 1
            }
            func putNumber(_ value: Int) {
                var divisor = 1
                while divisor * 10 <= value { divisor *= 10 }
                var rest = value
                while divisor > 0 {
                    put(UInt8(48 + rest / divisor))
                    rest %= divisor
                    divisor /= 10
                }
            }
            put(45)
            putNumber(variant.size.width)
            put(120)
            putNumber(variant.size.height)
            put(45)
            put(modeCode.asciiValue!)
            put(variant.style.code.asciiValue!)
            put(46)
            put(112)
            put(120)
            put(0)
            return UnsafeRawPointer(buffer.baseAddress!).withMemoryRebound(to: CChar.self, capacity: n) { body($0) }
        }
    }

    /// Parses a directory entry's name (raw bytes, no terminator); `nil` unless it is exactly a
    /// canonical published name. No allocation (start-up parses a million of these).
    package init?(bytes: UnsafeBufferPointer<UInt8>) {
        let n = bytes.count
        // 32 hex + "-" + ≥1 + "x" + ≥1 + "-" + 2 + ".px"
        guard n >= 32 + 1 + 3 + 1 + 2 + 3, n <= 32 + 1 + 15 + 1 + 2 + 3, let p = bytes.baseAddress else { return nil }
        var high: UInt64 = 0, low: UInt64 = 0
        for i in 0..<32 {
            let c = p[i]
            var v = c &- 48  // "0"
            if v > 9 {
                v = c &- 97  // "a"
                guard v < 6 else { return nil }
                v += 10
            }
            if i < 16 { high = high << 4 | UInt64(v) } else { low = low << 4 | UInt64(v) }
        }
        guard p[32] == 45 else { return nil }  // "-"
        // Width: digits up to "x"; height: digits up to "-"; no leading zeros, at most 7 digits.
        var i = 33
        var w = 0
        let wStart = i
        while i < n, p[i] &- 48 < 10, i - wStart < 7 {
            w = w * 10 + Int(p[i] &- 48)
            i += 1
        }
        guard i > wStart, p[wStart] != 48, i < n, p[i] == 120 else { return nil }  // "x"
        i += 1
        var h = 0
        let hStart = i
        while i < n, p[i] &- 48 < 10, i - hStart < 7 {
            h = h * 10 + Int(p[i] &- 48)
            i += 1
        }
        guard i > hStart, p[hStart] != 48, i < n, p[i] == 45 else { return nil }  // "-"
        i += 1
        guard n - i == 5, p[i + 2] == 46, p[i + 3] == 112, p[i + 4] == 120,  // ".px"
            w <= Self.maximumSide, h <= Self.maximumSide, w * h <= Self.maximumPixelCount
        else { return nil }
        let mode: ContentMode
        var whole = false
        switch p[i] {
        case 102: mode = .fit  // "f"
        case 99: mode = .fill  // "c"
        case 111:  // "o"
            mode = .fit
            whole = true
        default: return nil
        }
        let style: PixelStyle
        switch p[i + 1] {
        case 97: style = .bgra32Premultiplied  // "a"
        case 120: style = .bgrx32  // "x"
        case 114: style = .rgb565  // "r"
        case 103: style = .gray8  // "g"
        default: return nil
        }
        self.digest = ImageEntityID(high: high, low: low)
        self.variant = VariantDescriptor(size: PixelSize(width: w, height: h), mode: mode, style: style)
        self.isWholeOriginal = whole
    }

    /// Parses a name given as a `String`.
    package init?(_ name: String) {
        var name = name
        guard let parsed = name.withUTF8({ DiskFileName(bytes: $0) }) else { return nil }
        self = parsed
    }
}

/// The fixed header of a disk-tier file (all integers little-endian):
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 8 | magic `89 53 54 52 44 0D 0A 1A` ("\x89STRD\r\n\x1A") |
/// | 8 | 4 | format version (2; version 1 had XXH64 checksums and is refused) |
/// | 12 | 4 | pixel offset = header length, a multiple of 64 |
/// | 16 | 4 | width |
/// | 20 | 4 | height |
/// | 24 | 4 | bytesPerRow |
/// | 28 | 1 | style (`PixelStyle.rawValue`) |
/// | 29 | 1 | mode (`ContentMode.rawValue`) |
/// | 30 | 1 | flags: bit 0, the whole original (its name's mode is `o`); other bits 0 |
/// | 31 | 1 | reserved (0) |
/// | 32 | 8 | source version |
/// | 40 | 4 | key length in bytes (UTF-8) |
/// | 44 | 4 | reserved (0) |
/// | 48 | 8 | pixel checksum: XXH3-64 of the `bytesPerRow × height` pixel bytes |
/// | 56 | 8 | header checksum: XXH3-64 of bytes 0..<56, seeded with the XXH3-64 of the key area |
/// | 64 | n | the full key, then zero padding to the pixel offset |
///
/// The file is exactly `pixelOffset + bytesPerRow × height` bytes long. The flags byte was
/// reserved (0) before whole originals were kept: older files read as not whole, and older
/// readers never index an `o` name, so the version stays 2 and both read each other's files.
package struct DiskFileHeader: Hashable, Sendable {
    package static let magic: [UInt8] = [0x89, 0x53, 0x54, 0x52, 0x44, 0x0D, 0x0A, 0x1A]
    package static let version: UInt32 = 2
    package static let fixedLength = 64

    package var width: Int
    package var height: Int
    package var bytesPerRow: Int
    package var style: PixelStyle
    package var mode: ContentMode
    /// The whole original (flags bit 0).
    package var isWholeOriginal: Bool
    package var sourceVersion: UInt64
    package var keyLength: Int
    package var pixelChecksum: UInt64

    /// Where the pixel rows start for a key of `keyLength` bytes.
    package static func pixelOffset(keyLength: Int) -> Int {
        (fixedLength + keyLength + PixelLayout.rowAlignment - 1) & ~(PixelLayout.rowAlignment - 1)
    }

    package var pixelOffset: Int { Self.pixelOffset(keyLength: keyLength) }
    package var pixelByteCount: Int { bytesPerRow * height }
    package var fileLength: Int { pixelOffset + pixelByteCount }

    /// The exact file length of `variant` stored under a key of `keyLength` UTF-8 bytes.
    package static func fileLength(of variant: VariantDescriptor, keyLength: Int) -> Int {
        pixelOffset(keyLength: keyLength)
            + PixelLayout.bytesPerRow(width: variant.size.width, style: variant.style) * variant.size.height
    }

    /// Writes the header and the key into `buffer` (at least `pixelOffset` bytes, zeroed
    /// padding included).
    package func write(key: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) {
        precondition(key.count == keyLength && buffer.count >= pixelOffset)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        for i in 0..<8 { buffer[i] = Self.magic[i] }
        func put32(_ v: Int, _ at: Int) { buffer.storeBytes(of: UInt32(v).littleEndian, toByteOffset: at, as: UInt32.self) }
        put32(Int(Self.version), 8)
        put32(pixelOffset, 12)
        put32(width, 16)
        put32(height, 20)
        put32(bytesPerRow, 24)
        buffer[28] = style.rawValue
        buffer[29] = mode.rawValue
        buffer[30] = isWholeOriginal ? 1 : 0
        buffer.storeBytes(of: sourceVersion.littleEndian, toByteOffset: 32, as: UInt64.self)
        put32(keyLength, 40)
        buffer.storeBytes(of: pixelChecksum.littleEndian, toByteOffset: 48, as: UInt64.self)
        if keyLength > 0 {
            UnsafeMutableRawBufferPointer(rebasing: buffer[64..<(64 + keyLength)]).copyMemory(from: key)
        }
        let sum = Self.headerChecksum(UnsafeRawBufferPointer(buffer), pixelOffset: pixelOffset)
        buffer.storeBytes(of: sum.littleEndian, toByteOffset: 56, as: UInt64.self)
    }

    package static func headerChecksum(_ bytes: UnsafeRawBufferPointer, pixelOffset: Int) -> UInt64 {
        let keyArea = XXHash.xxh3(UnsafeRawBufferPointer(rebasing: bytes[64..<pixelOffset]))
        return XXHash.xxh3(UnsafeRawBufferPointer(rebasing: bytes[0..<56]), seed: keyArea)
    }

    /// Why a file's header was refused.
    package enum Problem: Error, Hashable, Sendable, CustomStringConvertible {
        case tooShort(Int)
        case badMagic
        case unsupportedVersion(UInt32)
        case badHeaderChecksum
        case badField(String)
        case lengthMismatch(expected: Int, actual: Int)
        case badPixelChecksum

        package var description: String {
            switch self {
            case .tooShort(let n): return "file too short for a header (\(n) bytes)"
            case .badMagic: return "not a Strata disk-tier file (bad magic)"
            case .unsupportedVersion(let v): return "unsupported format version \(v)"
            case .badHeaderChecksum: return "header checksum mismatch"
            case .badField(let f): return "inconsistent header field: \(f)"
            case .lengthMismatch(let e, let a): return "file length \(a), header says \(e)"
            case .badPixelChecksum: return "pixel checksum mismatch"
            }
        }
    }

    /// Parses and checks the header at the start of `bytes` (which must hold at least the whole
    /// header area: the fixed part and the key). Does not check the file length or the pixels.
    package init(validating bytes: UnsafeRawBufferPointer) throws(Problem) {
        guard bytes.count >= Self.fixedLength else { throw .tooShort(bytes.count) }
        for i in 0..<8 where bytes[i] != Self.magic[i] { throw .badMagic }
        func get32(_ at: Int) -> Int { Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt32.self))) }
        let version = UInt32(get32(8))
        guard version == Self.version else { throw .unsupportedVersion(version) }
        let offset = get32(12)
        let keyLength = get32(40)
        guard offset == Self.pixelOffset(keyLength: keyLength), offset <= bytes.count else {
            throw offset > bytes.count && offset == Self.pixelOffset(keyLength: keyLength)
                ? .tooShort(bytes.count) : .badField("pixel offset")
        }
        let stored = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 56, as: UInt64.self))
        guard Self.headerChecksum(bytes, pixelOffset: offset) == stored else { throw .badHeaderChecksum }
        guard let style = PixelStyle(rawValue: bytes[28]) else { throw .badField("style") }
        guard let mode = ContentMode(rawValue: bytes[29]) else { throw .badField("mode") }
        guard bytes[30] & ~1 == 0, bytes[30] == 0 || mode == .fit else { throw .badField("flags") }
        let width = get32(16), height = get32(20), stride = get32(24)
        guard width > 0, height > 0, width <= DiskFileName.maximumSide, height <= DiskFileName.maximumSide,
            width * height <= DiskFileName.maximumPixelCount
        else {
            throw .badField("size")
        }
        guard stride == PixelLayout.bytesPerRow(width: width, style: style) else { throw .badField("bytesPerRow") }
        self.width = width
        self.height = height
        self.bytesPerRow = stride
        self.style = style
        self.mode = mode
        self.isWholeOriginal = bytes[30] == 1
        self.sourceVersion = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 32, as: UInt64.self))
        self.keyLength = keyLength
        self.pixelChecksum = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 48, as: UInt64.self))
    }

    package init(
        width: Int, height: Int, bytesPerRow: Int, style: PixelStyle, mode: ContentMode, isWholeOriginal: Bool = false,
        sourceVersion: UInt64, keyLength: Int, pixelChecksum: UInt64
    ) {
        self.width = width
        self.height = height
        self.bytesPerRow = bytesPerRow
        self.style = style
        self.mode = mode
        self.isWholeOriginal = isWholeOriginal
        self.sourceVersion = sourceVersion
        self.keyLength = keyLength
        self.pixelChecksum = pixelChecksum
    }

    /// The variant this header describes.
    package var variant: VariantDescriptor {
        VariantDescriptor(size: PixelSize(width: width, height: height), mode: mode, style: style)
    }

    /// The key bytes stored after the fixed header.
    package static func keyBytes(in bytes: UnsafeRawBufferPointer, keyLength: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[64..<(64 + keyLength)])
    }
}

/// Encodes whole disk-tier files (used by the tier's writer, and by tests and benchmarks that
/// play "another process").
package enum DiskFileEncoder {
    /// The complete bytes of the file for `image` stored under `key`.
    package static func encode(
        _ image: PixelImage, key: String, mode: ContentMode, isWholeOriginal: Bool = false, sourceVersion: UInt64
    ) -> [UInt8] {
        var key = key
        return key.withUTF8 { keyBytes in
            let stride = PixelLayout.bytesPerRow(width: image.width, style: image.style)
            let header = DiskFileHeader(
                width: image.width, height: image.height, bytesPerRow: stride, style: image.style, mode: mode,
                isWholeOriginal: isWholeOriginal, sourceVersion: sourceVersion, keyLength: keyBytes.count, pixelChecksum: 0)
            var file = [UInt8](repeating: 0, count: header.fileLength)
            file.withUnsafeMutableBytes { raw in
                let pixels = UnsafeMutableRawBufferPointer(rebasing: raw[header.pixelOffset...])
                copyRows(of: image, into: pixels, stride: stride)
                var h = header
                h.pixelChecksum = XXHash.xxh3(UnsafeRawBufferPointer(pixels))
                h.write(key: UnsafeRawBufferPointer(keyBytes), into: UnsafeMutableRawBufferPointer(rebasing: raw[0..<header.pixelOffset]))
            }
            return file
        }
    }

    /// Copies the image's rows into `destination` (`stride × height` bytes), each row's padding
    /// zeroed: an image made with ``/StrataBase/PixelImage/init(uninitializedWidth:height:style:)``
    /// never wrote its padding, and what the heap held there must not reach a file or a shared
    /// bucket (and the same pixels must make the same bytes, checksum included).
    package static func copyRows(of image: PixelImage, into destination: UnsafeMutableRawBufferPointer, stride: Int) {
        image.withUnsafeBytes { src in
            let rowBytes = image.width * image.style.bytesPerPixel
            if image.bytesPerRow == stride, src.count == stride * image.height {
                destination.copyMemory(from: src)
                if stride > rowBytes {
                    for y in 0..<image.height {
                        UnsafeMutableRawBufferPointer(rebasing: destination[(y * stride + rowBytes)..<((y + 1) * stride)])
                            .initializeMemory(as: UInt8.self, repeating: 0)
                    }
                }
                return
            }
            for y in 0..<image.height {
                let dst = UnsafeMutableRawBufferPointer(rebasing: destination[(y * stride)..<((y + 1) * stride)])
                dst.copyMemory(from: UnsafeRawBufferPointer(rebasing: src[(y * image.bytesPerRow)..<(y * image.bytesPerRow + rowBytes)]))
                if stride > rowBytes {
                    UnsafeMutableRawBufferPointer(rebasing: dst[rowBytes...]).initializeMemory(as: UInt8.self, repeating: 0)
                }
            }
        }
    }
}

/// What a file's header stores as "the full key".
///
/// Keys up to ``DiskTier/maximumKeyLength`` UTF-8 bytes are stored verbatim. A longer key is
/// stored as `"\0sha256:"` followed by the 64 hex digits of its SHA-256 (72 bytes), so every
/// file's header fits the 4 KiB the byte limit charges for it, and a hit still compares 256 bits
/// of the key — a wrong image would take a SHA-256 collision (the file name carries only 128).
/// A verbatim key can never be mistaken for a digest of another key: the name digests differ.
package enum StoredKey {
    package static let digestPrefix = "\u{0}sha256:"
    package static let digestLength = 8 + 64

    /// The stored form of `key` (the key itself when short enough: no copy).
    package static func string(for key: String) -> String {
        guard key.utf8.count > DiskTier.maximumKeyLength else { return key }
        var key = key
        return digestPrefix + key.withUTF8 { KeyHash.sha256Hex(UnsafeRawBufferPointer($0)) }
    }

    /// The file-name digest a stored key belongs to: the first 128 bits of the SHA-256 of the
    /// verbatim key, or of the digest form's hex (for a malformed digest form, a digest that
    /// matches no name of it).
    package static func nameDigest(ofStored stored: UnsafeRawBufferPointer) -> ImageEntityID {
        let prefix = Array(digestPrefix.utf8)
        if stored.count == digestLength, stored.prefix(8).elementsEqual(prefix) {
            var high: UInt64 = 0, low: UInt64 = 0
            for (i, byte) in stored[8..<40].enumerated() {
                let nibble: UInt64
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): nibble = UInt64(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): nibble = UInt64(byte - UInt8(ascii: "a") + 10)
                default: return ImageEntityID(high: ~0, low: ~0) ^ ImageEntityID(hashingBytes: stored)
                }
                if i < 16 { high = high << 4 | nibble } else { low = low << 4 | nibble }
            }
            return ImageEntityID(high: high, low: low)
        }
        return ImageEntityID(hashingBytes: stored)
    }
}

extension ImageEntityID {
    package static func ^ (a: ImageEntityID, b: ImageEntityID) -> ImageEntityID { ImageEntityID(high: a.high ^ b.high, low: a.low ^ b.low) }
}
