import Logging
import StrataBase

/// The Little CMS transforms Strata has built, one per distinct profile and pixel layout,
/// keyed by the profile's digest: a render of an image whose profile was seen before costs a
/// hash of its bytes and a lookup, no profile parse.
///
/// Bounded (``capacity`` entries, the oldest dropped first) and thread-safe (the project's
/// ``/StrataBase/Lock``; a transform is built outside it, so two first renders of one profile may both
/// build, and one result is kept). A profile Little CMS refuses is remembered as such, and
/// logged once; every render that meets it counts in ``ColourStatistics``.
public final class ColourTransforms: Sendable {
    /// What a profile means for pixels of one layout.
    package enum Prepared: Sendable {
        /// sRGB (or sRGB in all but name): the pixels need nothing.
        case identity
        /// Convert with this transform.
        case transform(LittleCMS.Transform)
        /// The profile cannot be used: the pixels are taken as sRGB.
        case unusable(ColourProfileProblem)
    }

    /// The pixel layouts a transform is built for.
    package enum Layout: Hashable, Sendable {
        /// Decoded BGRA (alpha left as it is).
        case bgra
        /// Gray expanded to BGRA (B = G = R).
        case grayInBGRA
        /// libjpeg's CMYK, straight or Adobe-inverted, to opaque-to-be BGRA.
        case cmyk(inverted: Bool)

        package var input: UInt32 {
            switch self {
            case .bgra: LittleCMS.Format.bgra8
            case .grayInBGRA: LittleCMS.Format.grayInBGRA8
            case .cmyk(let inverted): LittleCMS.Format.cmyk8(inverted: inverted)
            }
        }

        package var space: ColourSpace {
            switch self {
            case .bgra: .rgb
            case .grayInBGRA: .gray
            case .cmyk: .cmyk
            }
        }
    }

    private struct Key: Hashable {
        let digest: ProfileDigest
        let layout: Layout
    }

    private struct State {
        var entries: [Key: Prepared] = [:]
        var order = RingBuffer<Key>()
    }

    /// The most transforms kept (default 64: an RGB matrix/TRC transform is tens of kilobytes,
    /// a CMYK one a few hundred).
    public let capacity: Int
    private let state = Lock(State())
    /// Where ignored profiles are reported (a warning with the profile's digest and the problem).
    public let logger: Logger

    /// The one set of transforms renders use.
    public static let shared = ColourTransforms()

    public init(capacity: Int = 64, logger: Logger = Logger(label: "strata.colour")) {
        precondition(capacity > 0, "ColourTransforms: capacity must be ≥ 1")
        self.capacity = capacity
        self.logger = logger
    }

    /// Transforms held now.
    public var count: Int { state.withLock { $0.entries.count } }

    /// What `profile` means for pixels in `layout`: built on the first call for that pair.
    package func prepared(for profile: ColourProfile, layout: Layout) -> Prepared {
        let key = Key(digest: profile.digest, layout: layout)
        if let known = state.withLock({ $0.entries[key] }) { return known }
        let made = Self.build(profile, layout: layout)
        switch made {
        case .transform: ColourStatistics.count(\.transformsBuilt)
        case .unusable(let problem):
            logger.warning(
                "an embedded ICC profile is ignored; the image is taken as sRGB",
                metadata: ["profile": "\(profile.digest)", "problem": "\(problem)"])
        case .identity: break
        }
        return state.withLock { state in
            if let raced = state.entries[key] { return raced }
            if state.entries.count >= capacity, let oldest = state.order.popFirst() {
                state.entries[oldest] = nil
            }
            state.entries[key] = made
            state.order.append(key)
            return made
        }
    }

    private static func build(_ profile: ColourProfile, layout: Layout) -> Prepared {
        guard let opened = LittleCMS.Profile(bytes: profile.bytes) else {
            return .unusable(.invalid("not a readable ICC profile"))
        }
        let space = opened.space
        guard space == layout.space else { return .unusable(.mismatched(profile: space, pixels: layout.space)) }
        if layout == .bgra && opened.isSRGB { return .identity }
        guard let transform = LittleCMS.Transform(from: opened, input: layout.input, output: LittleCMS.Format.bgra8) else {
            return .unusable(.invalid("no transform to sRGB can be built from it"))
        }
        return .transform(transform)
    }
}
