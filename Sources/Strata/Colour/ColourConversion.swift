/// Applies an image's embedded profile to its decoded pixels with Little CMS: what the
/// renderer calls after its resample (RGB and gray pixels, premultiplied BGRA) and the JPEG
/// decoder calls on CMYK scanlines. Bad profiles are counted (``ColourStatistics``) and
/// logged, never thrown: the pixels are then taken as sRGB.
///
/// Cost: for an sRGB profile, a lookup; otherwise one Little CMS pass over the pixels (an
/// 8-bit precalculated transform), plus an un-premultiply and premultiply pass for images
/// with transparency. Transforms come from ``ColourTransforms/shared``.
public enum ColourConversion {
    /// Converts `image` (``PixelStyle/bgra32Premultiplied``) in place from `colour` for
    /// `output`. `gray`: the pixels are gray expanded to BGRA (a gray profile applies);
    /// `opaque`: no pixel has alpha below 255 (skips the un-premultiply). In
    /// ``ColourOutput/original`` RGB pixels are left as they are (the answers embed the profile);
    /// gray ones are converted, since answers are RGB.
    static func convert(
        _ image: inout PixelImage, from colour: EmbeddedColour, gray: Bool, output: ColourOutput, opaque: Bool,
        transforms: ColourTransforms = .shared
    ) {
        precondition(image.style == .bgra32Premultiplied, "ColourConversion: pixels must be bgra32Premultiplied")
        let profile: ColourProfile
        switch colour {
        case .none: return
        case .unusable(let problem):
            ignored(problem, transforms: transforms)
            return
        case .profile(let embedded): profile = embedded
        }
        let layout: ColourTransforms.Layout = gray ? .grayInBGRA : .bgra
        switch transforms.prepared(for: profile, layout: layout) {
        case .identity:
            ColourStatistics.count(\.identities)
        case .unusable:
            ColourStatistics.count(\.profilesIgnored)
        case .transform(let transform):
            if output == .original && layout == .bgra { return }
            ColourStatistics.count(\.conversions)
            let size = image.size, stride = image.bytesPerRow
            image.withUnsafeMutableBytes { raw in
                let base = raw.baseAddress!
                if !opaque { PixelOps.unpremultiply(base, size: size, stride: stride) }
                transform.apply(base, size: size, stride: stride)
                if !opaque { PixelOps.premultiply(base, size: size, stride: stride) }
            }
        }
    }

    /// Converts libjpeg's CMYK scanlines (`inverted`: Adobe's polarity) to opaque BGRA in
    /// place through `colour`'s CMYK profile. Returns false, having changed nothing, when there
    /// is no usable CMYK profile (the caller converts naively).
    static func convertCMYK(
        _ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int, inverted: Bool, colour: EmbeddedColour
    ) -> Bool {
        switch colour {
        case .none: return false
        case .unusable(let problem):
            ignored(problem, transforms: .shared)
            return false
        case .profile(let profile):
            guard case .transform(let transform) = ColourTransforms.shared.prepared(for: profile, layout: .cmyk(inverted: inverted))
            else {
                ColourStatistics.count(\.profilesIgnored)
                return false
            }
            ColourStatistics.count(\.conversions)
            transform.apply(base, size: size, stride: stride)
            PixelOps.setOpaque(base, size: size, stride: stride)
            return true
        }
    }

    /// The profile an answer in `output` embeds for pixels rendered from `colour`: in
    /// ``ColourOutput/original``, a usable RGB profile on RGB pixels; otherwise none (the
    /// pixels are sRGB).
    public static func profileToEmbed(for colour: EmbeddedColour, grayscale: Bool, output: ColourOutput) -> ColourProfile? {
        guard output == .original, !grayscale, let profile = colour.profile, profile.space == .rgb else { return nil }
        if case .unusable = ColourTransforms.shared.prepared(for: profile, layout: .bgra) { return nil }
        return profile
    }

    /// Counts and logs a profile the container made unusable (Little CMS's refusals are logged
    /// once per profile by ``ColourTransforms``).
    private static func ignored(_ problem: ColourProfileProblem, transforms: ColourTransforms) {
        ColourStatistics.count(\.profilesIgnored)
        transforms.logger.warning(
            "an embedded ICC profile is ignored; the image is taken as sRGB", metadata: ["problem": "\(problem)"])
    }
}
