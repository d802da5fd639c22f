import StrataBase
/// Applies an image's embedded profile to its decoded pixels with Little CMS: what the
/// renderer calls after its resample (RGB and gray pixels, premultiplied BGRA) and the JPEG
/// decoder calls on CMYK scanlines. Bad profiles are counted (``ColourStatistics``) and
/// logged, never thrown: the pixels are then taken as sRGB.
///
/// Cost: for an sRGB profile, a lookup; otherwise one Little CMS pass over the pixels (an
/// 8-bit precalculated transform), plus an un-premultiply and premultiply pass for images
/// with transparency. Transforms come from ``ColourTransforms/shared``. A large image is
/// converted in bands of rows on up to `threads` threads (through a ``/StrataBase/ForkJoin``, as the
/// resampler's bands): a transform serves several threads at once.
public enum ColourConversion {
    /// Pixels a band must have at least (a 1024×640 output splits in two).
    package static let pixelsPerBand = 1 << 17
    /// Converts `image` (``PixelStyle/bgra32Premultiplied``) in place from `colour` for
    /// `output`. `gray`: the pixels are gray expanded to BGRA (a gray profile applies);
    /// `opaque`: no pixel has alpha below 255 (skips the un-premultiply). In
    /// ``ColourOutput/original`` RGB pixels are left as they are (the answers embed the profile);
    /// gray ones are converted, since answers are RGB.
    package static func convert(
        _ image: inout PixelImage, from colour: EmbeddedColour, gray: Bool, output: ColourOutput, opaque: Bool,
        threads: Int = 1, forkJoin: ForkJoin = .dispatch, transforms: ColourTransforms = .shared
    ) {
        precondition(image.style == .bgra32Premultiplied, "ColourConversion: pixels must be bgra32Premultiplied")
        guard let converter = converter(from: colour, gray: gray, output: output, opaque: opaque, transforms: transforms)
        else { return }
        let size = image.size, stride = image.bytesPerRow
        let bands = max(1, min(threads, size.height, size.pixelCount / pixelsPerBand))
        image.withUnsafeMutableBytes { raw in
            let rows = Rows(base: raw.baseAddress!, stride: stride)
            let convert: @Sendable (Int) -> Void = { band in
                let first = size.height * band / bands, end = size.height * (band + 1) / bands
                converter.convert(rows.base + first * stride, size: PixelSize(width: size.width, height: end - first), stride: stride)
            }
            if bands == 1 {
                convert(0)
            } else {
                forkJoin.forEach(bands, convert)
            }
        }
    }

    /// What converts rows of premultiplied BGRA from `colour` for `output` (see
    /// ``convert(_:from:gray:output:opaque:threads:forkJoin:transforms:)``), or `nil` when nothing is to
    /// be done: no profile, sRGB, an ignored profile (counted and logged here, once per call),
    /// or RGB pixels in `original`. The renderer hands it to the resampler, which runs it on
    /// each band or chunk of output rows as they are written.
    package static func converter(
        from colour: EmbeddedColour, gray: Bool, output: ColourOutput, opaque: Bool, transforms: ColourTransforms = .shared
    ) -> RowConverter? {
        let profile: ColourProfile
        switch colour {
        case .none: return nil
        case .unusable(let problem):
            ignored(problem, transforms: transforms)
            return nil
        case .profile(let embedded): profile = embedded
        }
        let layout: ColourTransforms.Layout = gray ? .grayInBGRA : .bgra
        switch transforms.prepared(for: profile, layout: layout) {
        case .identity:
            ColourStatistics.count(\.identities)
            return nil
        case .unusable:
            ColourStatistics.count(\.profilesIgnored)
            return nil
        case .transform(let transform):
            if output == .original && layout == .bgra { return nil }
            ColourStatistics.count(\.conversions)
            return RowConverter(transform: transform, opaque: opaque)
        }
    }

    /// Converts blocks of premultiplied BGRA rows in place through one transform; safe to use
    /// from several threads at once on disjoint rows.
    package struct RowConverter: Sendable {
        package let transform: LittleCMS.Transform
        /// No pixel has alpha below 255: no un-premultiply.
        package let opaque: Bool

        package func convert(_ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int) {
            if !opaque { PixelOps.unpremultiply(base, size: size, stride: stride) }
            transform.apply(base, size: size, stride: stride)
            if !opaque { PixelOps.premultiply(base, size: size, stride: stride) }
        }

        /// ``convert(_:size:stride:)`` as the resampler's work on finished rows.
        package var rowsFinish: Resampler.RowsFinish {
            let converter = self
            return { (rows: UnsafeMutablePointer<UInt8>, size: PixelSize, stride: Int) in
                converter.convert(UnsafeMutableRawPointer(rows), size: size, stride: stride)
            }
        }
    }

    /// Converts libjpeg's CMYK scanlines (`inverted`: Adobe's polarity) to opaque BGRA in
    /// place through `colour`'s CMYK profile. Returns false, having changed nothing, when there
    /// is no usable CMYK profile (the caller converts naively).
    package static func convertCMYK(
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

    /// The rows the bands share. Unchecked: `ForkJoin.forEach` returns only when every band
    /// has finished, and the bands write disjoint rows.
    private struct Rows: @unchecked Sendable {
        let base: UnsafeMutableRawPointer
        let stride: Int
    }

    /// The profile an answer in `output` embeds for pixels rendered from `colour`: in
    /// ``/StrataBase/ColourOutput/original``, a usable RGB profile on RGB pixels; otherwise none (the
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
