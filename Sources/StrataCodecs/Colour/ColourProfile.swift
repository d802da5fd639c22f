import Crypto
import StrataBase

/// An ICC profile as embedded in an image: its bytes, exactly as found (so that `original`
/// answers can embed them byte for byte), their digest and the colour space its header names.
///
/// Made by the decoders when they read a header (``ImageHeader/colour``); nothing is checked
/// here beyond the header's length field and the size cap: Little CMS checks the rest when a
/// transform is first built (``ColourTransforms``). Cost: one SHA-256 of the profile's bytes
/// (a few kilobytes for a typical profile) when it is made; a copy shares the bytes.
public struct ColourProfile: Sendable, Hashable, CustomStringConvertible {
    /// The profile's bytes, as embedded.
    public let bytes: [UInt8]
    /// SHA-256 of ``bytes``, first 128 bits: the profile's identity in ``ColourTransforms``.
    public let digest: ProfileDigest
    /// The data colour space the header names (bytes 16–19).
    public let space: ColourSpace

    /// The largest profile read from an image (4 MiB): real RGB, gray and CMYK profiles are
    /// 0.5 KiB – 2 MiB (large CMYK LUT profiles); a larger one is refused as oversized, so a
    /// hostile file cannot make every render parse megabytes of tables.
    public static let maximumByteCount = 4 << 20

    /// A profile of `bytes`; throws when they are shorter than an ICC header and tag count (132
    /// bytes), longer than ``maximumByteCount``, or disagree with their own header's size field.
    public init(bytes: [UInt8]) throws(ColourProfileProblem) {
        guard bytes.count <= Self.maximumByteCount else { throw .tooLarge(bytes: bytes.count) }
        guard bytes.count >= 132 else { throw .truncated(bytes: bytes.count, declared: nil) }
        let declared = Int(bytes[0]) << 24 | Int(bytes[1]) << 16 | Int(bytes[2]) << 8 | Int(bytes[3])
        guard declared <= bytes.count else { throw .truncated(bytes: bytes.count, declared: declared) }
        self.bytes = bytes
        self.digest = ProfileDigest(bytes)
        self.space = ColourSpace(signature: Array(bytes[16..<20]))
    }

    /// Little CMS's sRGB profile (v4, a few hundred bytes).
    public static let sRGB: ColourProfile = try! ColourProfile(bytes: LittleCMS.Profile.sRGB.serialised()!)

    /// An RGB profile Little CMS makes from a white point and primaries (CIE xy) and a pure
    /// gamma (`nil`: sRGB's tone curve), e.g. Display P3 is white (0.3127, 0.3290), red (0.680,
    /// 0.320), green (0.265, 0.690), blue (0.150, 0.060) with sRGB's curve; `nil` when Little
    /// CMS cannot make it. For tagging test and benchmark images.
    public static func rgb(
        white: (Double, Double), red: (Double, Double), green: (Double, Double), blue: (Double, Double), gamma: Double?
    ) -> ColourProfile? {
        guard let made = LittleCMS.Profile.rgb(white: white, red: red, green: green, blue: blue, gamma: gamma),
            var bytes = made.serialised(), bytes.count >= 36
        else { return nil }
        // Little CMS stamps the header with the time it made the profile (bytes 24…35): zeroed,
        // so that the same primaries always give the same bytes, digest and transform (a profile
        // made from an AVIF's nclx a second later equals `displayP3`).
        for i in 24..<36 { bytes[i] = 0 }
        return try? ColourProfile(bytes: bytes)
    }

    /// Display P3 (Apple's wide gamut, every iPhone photo since 2016) as Little CMS makes it.
    public static let displayP3: ColourProfile = rgb(
        white: (0.3127, 0.3290), red: (0.680, 0.320), green: (0.265, 0.690), blue: (0.150, 0.060), gamma: nil)!

    public static func == (a: ColourProfile, b: ColourProfile) -> Bool { a.digest == b.digest && a.bytes == b.bytes }
    public func hash(into hasher: inout Hasher) { hasher.combine(digest) }

    public var description: String { "ICC profile (\(space), \(bytes.count) bytes, \(digest))" }
}

/// The 128-bit identity of a profile's bytes (SHA-256, first 16 bytes).
public struct ProfileDigest: Sendable, Hashable, CustomStringConvertible {
    public let high: UInt64
    public let low: UInt64

    package init(_ bytes: [UInt8]) {
        var hash = SHA256()
        hash.update(data: bytes)
        let digest = Array(hash.finalize())
        high = digest[0..<8].reduce(0) { $0 << 8 | UInt64($1) }
        low = digest[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
    }

    public var description: String {
        let hex = String(high, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}

/// The data colour space of a profile (or of an image's pixels).
public enum ColourSpace: Sendable, Hashable, CustomStringConvertible {
    case rgb
    case gray
    case cmyk
    /// Another space (Lab, XYZ, n-colour …): Strata converts none of them.
    case other(String)

    package init(signature: [UInt8]) {
        switch signature {
        case Array("RGB ".utf8): self = .rgb
        case Array("GRAY".utf8): self = .gray
        case Array("CMYK".utf8): self = .cmyk
        default: self = .other(String(decoding: signature, as: UTF8.self))
        }
    }

    public var description: String {
        switch self {
        case .rgb: "RGB"
        case .gray: "gray"
        case .cmyk: "CMYK"
        case .other(let name): "'\(name)'"
        }
    }
}

/// What an image says about its colours, read with its header (``ImageHeader/colour``).
public enum EmbeddedColour: Sendable, Hashable {
    /// No profile and no colour chunks: the pixels are taken as sRGB.
    case none
    /// An embedded profile (or, for a PNG without one, a profile Little CMS made from its
    /// `cHRM` primaries; `sRGB` and `gAMA` alone need none).
    case profile(ColourProfile)
    /// A profile was embedded but cannot be used (truncated chunks, oversized, not inflatable):
    /// the pixels are taken as sRGB and the problem is counted and logged when rendered.
    case unusable(ColourProfileProblem)

    /// The profile, when there is a usable one.
    public var profile: ColourProfile? {
        if case .profile(let profile) = self { return profile }
        return nil
    }
}

/// Why an embedded profile was ignored (the image is then taken as sRGB). Never fails a
/// request: the renders count it (``ColourStatistics``) and log it; to fix it, re-save the
/// image with a valid profile.
public enum ColourProfileProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// Fewer bytes than the ICC header needs, or than its own size field says.
    case truncated(bytes: Int, declared: Int?)
    /// More than ``ColourProfile/maximumByteCount`` bytes.
    case tooLarge(bytes: Int)
    /// The container's chunks are malformed (a JPEG's `ICC_PROFILE` segments incomplete or
    /// numbered wrongly, a PNG's `iCCP` not inflatable).
    case malformedContainer(String)
    /// Little CMS refused the profile or could not build a transform from it.
    case invalid(String)
    /// The profile's colour space does not fit the pixels (an RGB profile on a CMYK JPEG …).
    case mismatched(profile: ColourSpace, pixels: ColourSpace)

    public var description: String {
        switch self {
        case .truncated(let bytes, let declared):
            "the ICC profile is truncated (\(bytes) bytes\(declared.map { ", its header says \($0)" } ?? ""))"
        case .tooLarge(let bytes):
            "the ICC profile has \(bytes) bytes, more than the \(ColourProfile.maximumByteCount) accepted"
        case .malformedContainer(let what): "the ICC profile's chunks are malformed (\(what))"
        case .invalid(let why): "Little CMS refused the ICC profile (\(why))"
        case .mismatched(let profile, let pixels): "the ICC profile is \(profile) but the pixels are \(pixels)"
        }
    }
}
