import StrataBase
/// The colour of an AVIF or HEIF image that carries no ICC profile but an `nclx` `colr` box
/// (ITU-T H.273 code points, "CICP"), as the colour step understands it:
/// - primaries BT.709/sRGB (1) or unspecified (2) with an SDR transfer: sRGB, nothing to convert;
/// - other known primaries (BT.470 M and B/G, BT.601, SMPTE 240M, BT.2020, DCI-P3, Display P3,
///   EBU 3213) with an SDR transfer: an RGB profile Little CMS makes from them, with sRGB's tone
///   curve (BT.709/601/2020 curves are within a few codes of it, and every decoder in browsers
///   renders them so), or a pure gamma for the BT.470 (2.2, 2.8) and linear (1.0) transfers;
/// - PQ, HLG and other HDR transfers: ``EmbeddedColour/unusable(_:)`` (no tone mapping: the
///   pixels are taken as sRGB and the problem is counted, as for a bad profile);
/// - gray images: sRGB (the `nclx` of a 4:0:0 image says nothing a gray render needs).
///
/// The profiles are made once per code point pair and kept.
package enum CICPColour {
    /// The colour for primaries `primaries` and transfer `transfer` (H.273 code points).
    package static func colour(primaries: Int, transfer: Int, gray: Bool) -> EmbeddedColour {
        if gray { return .none }
        let gamma: Double?
        switch transfer {
        case 1, 2, 6, 13, 14, 15: gamma = nil  // BT.709, unspecified, BT.601, sRGB, BT.2020
        case 4: gamma = 2.2
        case 5: gamma = 2.8
        case 8: gamma = 1.0
        default:
            return .unusable(.invalid("nclx transfer characteristics \(transfer) (HDR or unknown) are not converted"))
        }
        if primaries == 1 || primaries == 2 {
            if gamma == nil { return .none }
        }
        guard let xy = chromaticities[primaries == 2 ? 1 : primaries] else {
            return .unusable(.invalid("nclx colour primaries \(primaries) are unknown"))
        }
        let key = Key(primaries: primaries == 2 ? 1 : primaries, gamma: gamma)
        return cache.value(key) {
            guard
                let profile = ColourProfile.rgb(
                    white: xy.white, red: xy.red, green: xy.green, blue: xy.blue, gamma: gamma)
            else { return .unusable(.invalid("Little CMS cannot make a profile of nclx primaries \(primaries)")) }
            return .profile(profile)
        }
    }

    private struct Key: Hashable {
        var primaries: Int
        var gamma: Double?
    }

    private struct Chromaticities {
        var white: (Double, Double)
        var red: (Double, Double)
        var green: (Double, Double)
        var blue: (Double, Double)
    }

    private static let d65 = (0.3127, 0.3290)

    /// H.273 table 2 (CIE 1931 xy).
    private static let chromaticities: [Int: Chromaticities] = [
        1: .init(white: d65, red: (0.640, 0.330), green: (0.300, 0.600), blue: (0.150, 0.060)),
        4: .init(white: (0.310, 0.316), red: (0.67, 0.33), green: (0.21, 0.71), blue: (0.14, 0.08)),
        5: .init(white: d65, red: (0.64, 0.33), green: (0.29, 0.60), blue: (0.15, 0.06)),
        6: .init(white: d65, red: (0.630, 0.340), green: (0.310, 0.595), blue: (0.155, 0.070)),
        7: .init(white: d65, red: (0.630, 0.340), green: (0.310, 0.595), blue: (0.155, 0.070)),
        9: .init(white: d65, red: (0.708, 0.292), green: (0.170, 0.797), blue: (0.131, 0.046)),
        11: .init(white: (0.314, 0.351), red: (0.680, 0.320), green: (0.265, 0.690), blue: (0.150, 0.060)),
        12: .init(white: d65, red: (0.680, 0.320), green: (0.265, 0.690), blue: (0.150, 0.060)),
        22: .init(white: d65, red: (0.630, 0.340), green: (0.295, 0.605), blue: (0.155, 0.077)),
    ]

    private static let cache = ProfileCache()

    /// The profiles made so far, by code points (a handful at most).
    private final class ProfileCache: Sendable {
        private let made = Lock<[Key: EmbeddedColour]>([:])

        func value(_ key: Key, make: () -> EmbeddedColour) -> EmbeddedColour {
            if let known = made.withLock({ $0[key] }) { return known }
            let colour = make()
            made.withLock { $0[key] = colour }
            return colour
        }
    }
}
