/// Keys derived for variants that differ in more than size: colours kept in the original's
/// profile (``ColourOutput/original``) and crops placed by a ``Gravity`` other than the centre.
///
/// A derived key is the source key, then `NUL gravity=…` when the gravity is not the centre,
/// then `NUL ops=…` when the request has ``ImageOperations`` (their canonical text), then
/// `NUL colour=original` for original colours. A NUL cannot appear in a source key (the
/// service refuses it), so the parts never mix with a key's own text. Each derived key is its
/// own entity in every tier (memory, disk, tables, the service's encoded cache): a change of
/// `color.output` or another gravity never serves another variant's pixels, and the tolerance
/// rule matches sizes among the variants of one derived key only. The default (sRGB, centre)
/// is the source key itself, so caches made before these options keep their keys.
extension CacheKey {
    /// What ends the key of an `original` variant: a NUL, then a name for logs.
    package static let originalColourSuffix = "\u{0}colour=original"
    /// What starts a gravity's part of a key.
    package static let gravityMarker = "\u{0}gravity="
    /// What starts the operations' part of a key.
    package static let operationsMarker = "\u{0}ops="

    /// The key of `key`'s variants in `colour` (see the extension's discussion).
    public init(_ key: String, colour: ColourOutput) {
        self.init(key, colour: colour, gravity: .center)
    }

    /// The key of `key`'s variants in `colour`, cropped by `gravity` (see the extension's
    /// discussion).
    public init(_ key: String, colour: ColourOutput, gravity: Gravity) {
        self.init(key, colour: colour, gravity: gravity, operations: .none)
    }

    /// The key of `key`'s variants in `colour`, cropped by `gravity`, with `operations` (see the
    /// extension's discussion). A key with operations has an identity of the same family as its
    /// source key's (``ImageEntityID/init(hashing:)``), so that a purge finds its variants.
    public init(_ key: String, colour: ColourOutput, gravity: Gravity, operations: ImageOperations) {
        var string = key
        if gravity != .center { string += Self.gravityMarker + gravity.description }
        if !operations.isEmpty { string += Self.operationsMarker + operations.canonical }
        if colour == .original { string += Self.originalColourSuffix }
        self.init(string)
    }

    /// The colours this key's variants are rendered in.
    public var colourOutput: ColourOutput { string.hasSuffix(Self.originalColourSuffix) ? .original : .srgb }

    /// Where this key's `fill` variants are cropped.
    public var gravity: Gravity {
        guard let part = derivedPart(Self.gravityMarker) else { return .center }
        return Gravity(parsing: part) ?? .center
    }

    /// The text of the derived part that `marker` starts, up to the next part; `nil` without it.
    /// A key without a NUL (most keys: the centre, sRGB, no operations) is not searched: the
    /// engine and the warm paths read these parts for every request.
    private func derivedPart(_ marker: String) -> Substring? {
        guard string.utf8.contains(0), let range = string.firstRange(of: marker) else { return nil }
        return string[range.upperBound...].prefix { $0 != "\u{0}" }
    }

    /// What this key's variants are made with (``ImageOperations/none`` for most keys).
    public var operations: ImageOperations {
        guard let part = derivedPart(Self.operationsMarker) else { return .none }
        return ImageOperations(canonical: part) ?? .none
    }

    /// The key the source is asked for (this key without its derived parts).
    public var sourceKey: String {
        guard let nul = string.firstIndex(of: "\u{0}") else { return string }
        return String(string[..<nul])
    }

    /// The same source key and colours with the centre's crop: the variants a smart crop can
    /// read its saliency from.
    /// Operations that change the geometry never go with `smart` (the service refuses them), and
    /// a blur or a sharpen leaves the saliency of the plain variants: those keep none.
    package var centred: CacheKey {
        gravity == .center && operations.isEmpty ? self : CacheKey(sourceKey, colour: colourOutput)
    }

    /// Every key a purge of source key `key` must reach: each colour × each gravity a client can
    /// name (the named ones, smart, and every focal point in hundredths).
    public static func allDerived(from key: String) -> [CacheKey] {
        let gravities = Gravity.named + Gravity.allFocalPoints
        return ColourOutput.allCases.flatMap { colour in gravities.map { CacheKey(key, colour: colour, gravity: $0) } }
    }
}
