/// The pixel formats Strata stores (FastImageCache's four styles).
///
/// Byte order is the in-memory order of one pixel:
/// - ``bgra32Premultiplied``: B, G, R, A with colour premultiplied by alpha (the default).
/// - ``bgrx32``: B, G, R, then one ignored byte written as 0xFF (opaque images).
/// - ``rgb565``: one little-endian `UInt16`, red in the top 5 bits, blue in the low 5 bits.
/// - ``gray8``: one luminance byte.
public enum PixelStyle: UInt8, Sendable, Hashable, CaseIterable, Codable, CustomStringConvertible {
    case bgra32Premultiplied = 0
    case bgrx32 = 1
    case rgb565 = 2
    case gray8 = 3

    /// The style Strata uses when a request does not name one.
    public static let `default`: PixelStyle = .bgra32Premultiplied

    /// Bytes one pixel occupies.
    @inlinable
    public var bytesPerPixel: Int {
        switch self {
        case .bgra32Premultiplied, .bgrx32: return 4
        case .rgb565: return 2
        case .gray8: return 1
        }
    }

    /// Whether the style carries an alpha channel.
    public var hasAlpha: Bool { self == .bgra32Premultiplied }

    /// A one-letter code used in file names and on the command line (`a`, `x`, `r`, `g`).
    public var code: Character {
        switch self {
        case .bgra32Premultiplied: return "a"
        case .bgrx32: return "x"
        case .rgb565: return "r"
        case .gray8: return "g"
        }
    }

    /// The style whose ``code`` is `code`, or `nil`.
    public init?(code: Character) {
        guard let style = PixelStyle.allCases.first(where: { $0.code == code }) else { return nil }
        self = style
    }

    public var description: String {
        switch self {
        case .bgra32Premultiplied: return "bgra32-premultiplied"
        case .bgrx32: return "bgrx32"
        case .rgb565: return "rgb565"
        case .gray8: return "gray8"
        }
    }
}

/// Row layout rules shared by every tier.
public enum PixelLayout {
    /// Every row starts at a multiple of this many bytes (8 pixels × 8 bytes, the strictest
    /// consumer we know of; SIMD loads and GPU uploads like it too).
    public static let rowAlignment = 64

    /// The padded row length for `width` pixels of `style`: `width × bytesPerPixel` rounded up
    /// to a multiple of ``rowAlignment``.
    @inlinable
    public static func bytesPerRow(width: Int, style: PixelStyle) -> Int {
        let raw = width * style.bytesPerPixel
        return (raw + rowAlignment - 1) & ~(rowAlignment - 1)
    }
}
