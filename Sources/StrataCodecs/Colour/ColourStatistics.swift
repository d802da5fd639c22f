import Synchronization
import StrataBase

/// Process-wide counts of Strata's colour management (every engine and renderer in the
/// process adds to them): profiles ignored, conversions, identities, transforms built.
/// `strata serve` reports them in `/stats` and `/metrics`. Cost: a relaxed atomic add per event.
public struct ColourStatistics: Sendable, Hashable, Codable {
    /// Renders whose embedded profile was ignored (truncated, oversized, invalid, or of another
    /// colour space than the pixels): each one was taken as sRGB, and a warning logged.
    public var profilesIgnored = 0
    /// Renders (and CMYK decodes) converted through a profile.
    public var conversions = 0
    /// Renders whose profile is sRGB: no conversion.
    public var identities = 0
    /// Transforms built (``ColourTransforms``: once per distinct profile and layout while kept).
    public var transformsBuilt = 0

    public init() {}

    /// The counts now.
    public static var current: ColourStatistics {
        var s = ColourStatistics()
        s.profilesIgnored = counters.profilesIgnored.load(ordering: .relaxed)
        s.conversions = counters.conversions.load(ordering: .relaxed)
        s.identities = counters.identities.load(ordering: .relaxed)
        s.transformsBuilt = counters.transformsBuilt.load(ordering: .relaxed)
        return s
    }

    private final class Counters: Sendable {
        let profilesIgnored = Atomic<Int>(0)
        let conversions = Atomic<Int>(0)
        let identities = Atomic<Int>(0)
        let transformsBuilt = Atomic<Int>(0)
    }

    private static let counters = Counters()

    package static func count(_ counter: KeyPath<ColourStatistics, Int>) {
        switch counter {
        case \.profilesIgnored: counters.profilesIgnored.add(1, ordering: .relaxed)
        case \.conversions: counters.conversions.add(1, ordering: .relaxed)
        case \.identities: counters.identities.add(1, ordering: .relaxed)
        default: counters.transformsBuilt.add(1, ordering: .relaxed)
        }
    }
}
