import StrataBase
/// The encoded image formats Strata knows.
///
/// All nine are recognised by their magic bytes (see ``ImageFormatDetector``) and decoded
/// (``ImageDecoder``); JPEG, WebP, PNG, AVIF and JPEG XL are encoded too (``ImageEncoder/formats``).
public enum ImageFormat: String, Sendable, Hashable, CaseIterable {
    case jpeg, webp, png, avif, heic, gif, tiff, jp2, jxl

    /// A human-readable name for messages ("JPEG", "WebP", "PNG", "AVIF", "HEIC", "GIF", "TIFF",
    /// "JPEG 2000", "JPEG XL").
    public var displayName: String {
        switch self {
        case .jpeg: return "JPEG"
        case .webp: return "WebP"
        case .png: return "PNG"
        case .avif: return "AVIF"
        case .heic: return "HEIC"
        case .gif: return "GIF"
        case .tiff: return "TIFF"
        case .jp2: return "JPEG 2000"
        case .jxl: return "JPEG XL"
        }
    }
}

/// Recognizes an image format from its first bytes (the magic number), never from a file name.
///
/// Cost: a comparison of at most ``bytesNeeded`` bytes.
public enum ImageFormatDetector {
    /// Bytes needed to recognize every known format (an ISO-BMFF `ftyp` box's brands included).
    public static let bytesNeeded = 64

    /// The format whose signature starts `bytes`, or `nil`.
    ///
    /// - JPEG: `FF D8 FF`
    /// - WebP: `RIFF`, a 4-byte size, `WEBP`
    /// - PNG: `89 50 4E 47 0D 0A 1A 0A`
    /// - GIF: `GIF87a` or `GIF89a`
    /// - TIFF: `II` or `MM` (the byte order) and 42 in it (classic) or 43 (BigTIFF)
    /// - JPEG 2000: a JP2 file's signature box (`00 00 00 0C 6A 50 20 20 0D 0A 87 0A`), or a raw
    ///   J2K codestream's SOC and SIZ markers (`FF 4F FF 51`)
    /// - JPEG XL: a bare codestream (`FF 0A`) or the container's signature box
    ///   (`00 00 00 0C 4A 58 4C 20 0D 0A 87 0A`)
    /// - AVIF and HEIC/HEIF: an ISO-BMFF `ftyp` box first; AVIF when its major or a compatible
    ///   brand (within the first ``bytesNeeded`` bytes) is `avif` or `avis`, else HEIC when one is
    ///   `heic`, `heix`, `heim`, `heis`, `hevc`, `hevx`, `mif1` or `msf1`.
    public static func detect(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        let n = bytes.count
        if n >= 3, bytes[0] == 0xFF, bytes[1] == 0xD8, bytes[2] == 0xFF { return .jpeg }
        if n >= 12, bytes[0] == 0x52, bytes[1] == 0x49, bytes[2] == 0x46, bytes[3] == 0x46,  // RIFF
            bytes[8] == 0x57, bytes[9] == 0x45, bytes[10] == 0x42, bytes[11] == 0x50
        {  // WEBP
            return .webp
        }
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        if n >= 8, (0..<8).allSatisfy({ bytes[$0] == png[$0] }) { return .png }
        if n >= 6, bytes[0] == 0x47, bytes[1] == 0x49, bytes[2] == 0x46, bytes[3] == 0x38,  // GIF8
            bytes[4] == 0x37 || bytes[4] == 0x39, bytes[5] == 0x61
        {  // 7a or 9a
            return .gif
        }
        if n >= 4,
            (bytes[0] == 0x49 && bytes[1] == 0x49 && (bytes[2] == 42 || bytes[2] == 43) && bytes[3] == 0)
                || (bytes[0] == 0x4D && bytes[1] == 0x4D && bytes[2] == 0 && (bytes[3] == 42 || bytes[3] == 43))
        {
            return .tiff
        }
        let jp2: [UInt8] = [0x00, 0x00, 0x00, 0x0C, 0x6A, 0x50, 0x20, 0x20, 0x0D, 0x0A, 0x87, 0x0A]
        if n >= 12, (0..<12).allSatisfy({ bytes[$0] == jp2[$0] }) { return .jp2 }
        if n >= 4, bytes[0] == 0xFF, bytes[1] == 0x4F, bytes[2] == 0xFF, bytes[3] == 0x51 { return .jp2 }
        let jxl: [UInt8] = [0x00, 0x00, 0x00, 0x0C, 0x4A, 0x58, 0x4C, 0x20, 0x0D, 0x0A, 0x87, 0x0A]
        if n >= 12, (0..<12).allSatisfy({ bytes[$0] == jxl[$0] }) { return .jxl }
        if n >= 2, bytes[0] == 0xFF, bytes[1] == 0x0A { return .jxl }
        return isoBMFF(bytes)
    }

    /// AVIF or HEIC from an `ftyp` box at offset 0: its major brand (offset 8) and compatible
    /// brands (offset 16 on, to the box's end or ``bytesNeeded``).
    private static func isoBMFF(_ bytes: UnsafeRawBufferPointer) -> ImageFormat? {
        let n = bytes.count
        guard n >= 12, bytes[4] == 0x66, bytes[5] == 0x74, bytes[6] == 0x79, bytes[7] == 0x70 else { return nil }  // ftyp
        let boxSize = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
        guard boxSize >= 16 || boxSize == 12 else { return nil }
        func brand(at offset: Int) -> UInt32 {
            UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8
                | UInt32(bytes[offset + 3])
        }
        var brands = [brand(at: 8)]
        var offset = 16
        while offset + 4 <= min(n, boxSize, bytesNeeded) {
            brands.append(brand(at: offset))
            offset += 4
        }
        if brands.contains(where: avifBrands.contains) { return .avif }
        if brands.contains(where: heifBrands.contains) { return .heic }
        return nil
    }

    private static func fourCC(_ text: StaticString) -> UInt32 {
        text.withUTF8Buffer { $0.reduce(0) { $0 << 8 | UInt32($1) } }
    }
    private static let avifBrands: Set<UInt32> = [fourCC("avif"), fourCC("avis")]
    private static let heifBrands: Set<UInt32> = Set(
        [fourCC("heic"), fourCC("heix"), fourCC("heim"), fourCC("heis"), fourCC("hevc"), fourCC("hevx"), fourCC("mif1"), fourCC("msf1")])

    /// The format of `bytes` (an array, `Data`, or any contiguous byte collection), or `nil`.
    public static func detect<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> ImageFormat? {
        if let result = bytes.withContiguousStorageIfAvailable({ detect(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        let prefix = Array(bytes.prefix(bytesNeeded))
        return prefix.withUnsafeBytes { detect($0) }
    }
}
