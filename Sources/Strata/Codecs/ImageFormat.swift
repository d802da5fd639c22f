/// The encoded image formats Strata knows.
///
/// JPEG and WebP are decoded and encoded; PNG is detected, decoded (full size, through
/// libpng's simplified API) and encoded.
public enum ImageFormat: String, Sendable, Hashable, CaseIterable {
    case jpeg, webp, png

    /// A human-readable name for messages ("JPEG", "WebP", "PNG").
    public var displayName: String {
        switch self {
        case .jpeg: return "JPEG"
        case .webp: return "WebP"
        case .png: return "PNG"
        }
    }
}

/// Recognizes an image format from its first bytes (the magic number), never from a file name.
///
/// Cost: a comparison of at most 12 bytes.
public enum ImageFormatDetector {
    /// Bytes needed to recognize every known format.
    public static let bytesNeeded = 12

    /// The format whose signature starts `bytes`, or `nil`.
    ///
    /// - JPEG: `FF D8 FF`
    /// - WebP: `RIFF`, a 4-byte size, `WEBP`
    /// - PNG: `89 50 4E 47 0D 0A 1A 0A`
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
        return nil
    }

    /// The format of `bytes` (an array, `Data`, or any contiguous byte collection), or `nil`.
    public static func detect<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> ImageFormat? {
        if let result = bytes.withContiguousStorageIfAvailable({ detect(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        let prefix = Array(bytes.prefix(bytesNeeded))
        return prefix.withUnsafeBytes { detect($0) }
    }
}
