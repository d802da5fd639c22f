/// Which colours a render produces (`color.output`).
///
/// - ``srgb`` (default): pixels are converted from their embedded profile to sRGB, what
///   browsers assume of untagged images; answers carry no profile.
/// - ``original``: RGB pixels stay in their profile's space (a wide gamut is kept) and every
///   encoded answer embeds that profile byte for byte, for colour-managed viewers. Gray
///   profiles and CMYK are still converted to sRGB (answers are RGB), without a profile.
///
/// The choice is part of a variant's identity: ``CacheKey/init(_:colour:)`` derives the key
/// every tier stores it under.
public enum ColourOutput: String, Sendable, Hashable, CaseIterable {
    case srgb
    case original
}

extension CacheKey {
    /// What ends the key of an `original` variant: a NUL, which no source key can hold (the
    /// service refuses NUL in keys), then a name for logs.
    static let originalColourSuffix = "\u{0}colour=original"

    /// The key of `key`'s variants in `colour`: `key` itself for sRGB (the default, so caches
    /// made before colour management keep their keys), `key` + a NUL-led suffix for
    /// `original`, so that memory, disk, tables and the service's encoded cache keep the two
    /// apart and a change of `color.output` never serves the other's pixels.
    public init(_ key: String, colour: ColourOutput) {
        self.init(colour == .srgb ? key : key + Self.originalColourSuffix)
    }

    /// The colours this key's variants are rendered in.
    public var colourOutput: ColourOutput { string.hasSuffix(Self.originalColourSuffix) ? .original : .srgb }

    /// The key the source is asked for (this key without its colour suffix).
    public var sourceKey: String {
        guard colourOutput == .original else { return string }
        return String(string.dropLast(Self.originalColourSuffix.count))
    }
}
