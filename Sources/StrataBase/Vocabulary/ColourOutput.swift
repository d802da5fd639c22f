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
