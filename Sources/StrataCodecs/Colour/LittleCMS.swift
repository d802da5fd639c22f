import CLCMS2
import StrataBase

/// Every Little CMS 2 call Strata makes: one context, profiles opened from bytes or made from
/// primaries, the sRGB check, transforms and their application. No colour maths happens
/// outside Little CMS; the pointers it hands out never leave this file's types.
///
/// Thread safety, as Little CMS documents it: one context made with `cmsCreateContext` (no
/// plug-ins, its error handler set once) is shared; profiles are opened and closed by whoever
/// holds them; a transform is made with `cmsFLAGS_NOCACHE`, so one transform may be applied
/// from several threads at once (each call keeps no state in the transform).
package enum LittleCMS {
    /// The context every profile and transform is made in. Errors are reported by the calls'
    /// results (a refused profile is a `nil`), not through the log handler, which is silenced.
    package nonisolated(unsafe) static let context: cmsContext? = {
        let context = cmsCreateContext(nil, nil)
        cmsSetLogErrorHandlerTHR(context) { _, _, _ in }
        return context
    }()

    /// Perceptual rendering with black-point compensation, and no 1-pixel cache (see the type).
    package static let transformFlags = UInt32(cmsFLAGS_BLACKPOINTCOMPENSATION | cmsFLAGS_NOCACHE)

    /// Little CMS pixel format words (the `TYPE_*` macros, which Swift does not import).
    package enum Format {
        package static func word(
            space: Int32, channels: UInt32, extra: UInt32, doSwap: Bool = false, swapFirst: Bool = false, flavor: Bool = false
        )
            -> UInt32
        {
            UInt32(space) << 16 | (swapFirst ? 1 << 14 : 0) | (flavor ? 1 << 13 : 0) | (doSwap ? 1 << 10 : 0) | extra << 7
                | channels << 3 | 1
        }
        /// B, G, R, A bytes (`TYPE_BGRA_8`); the alpha byte is neither read nor written.
        package static let bgra8 = word(space: PT_RGB, channels: 3, extra: 1, doSwap: true, swapFirst: true)
        /// Gray expanded to B = G = R, A: the first byte is the gray value, the other three are
        /// skipped.
        package static let grayInBGRA8 = word(space: PT_GRAY, channels: 1, extra: 3)
        /// libjpeg's CMYK bytes (`TYPE_CMYK_8`), or Adobe's inverted ones (`TYPE_CMYK_8_REV`).
        package static func cmyk8(inverted: Bool) -> UInt32 { word(space: PT_CMYK, channels: 4, extra: 0, flavor: inverted) }
    }

    /// An opened profile (closed when the last reference goes).
    package final class Profile: @unchecked Sendable {
        package let handle: cmsHPROFILE

        private init(handle: cmsHPROFILE) { self.handle = handle }

        /// Opens `bytes`; `nil` when Little CMS refuses them.
        package convenience init?(bytes: [UInt8]) {
            let opened = bytes.withUnsafeBytes { raw in
                cmsOpenProfileFromMemTHR(LittleCMS.context, raw.baseAddress, cmsUInt32Number(raw.count))
            }
            guard let opened else { return nil }
            self.init(handle: opened)
        }

        /// Little CMS's built-in sRGB.
        package static let sRGB: Profile = Profile(handle: cmsCreate_sRGBProfileTHR(LittleCMS.context)!)

        deinit { cmsCloseProfile(handle) }

        /// The data colour space from the opened header.
        package var space: ColourSpace {
            switch cmsGetColorSpace(handle) {
            case cmsSigRgbData: .rgb
            case cmsSigGrayData: .gray
            case cmsSigCmykData: .cmyk
            default: .other("\(cmsGetColorSpace(handle).rawValue)")
            }
        }

        /// Whether this is sRGB in all but name: a matrix/TRC RGB profile whose colourants equal
        /// Little CMS's sRGB to 0.002 and whose tone curves equal sRGB's to 1/1024 at 33 points.
        /// (The HP/Microsoft sRGB IEC61966-2.1 profile, Apple's and Google's compact sRGB ones
        /// all are.) Reads the tags Little CMS parsed; costs microseconds, once per profile.
        package var isSRGB: Bool {
            guard space == .rgb, cmsIsMatrixShaper(handle) != 0, cmsIsMatrixShaper(Profile.sRGB.handle) != 0 else { return false }
            let colourants = [cmsSigRedColorantTag, cmsSigGreenColorantTag, cmsSigBlueColorantTag]
            for tag in colourants {
                guard let mine = xyz(tag), let theirs = Profile.sRGB.xyz(tag) else { return false }
                if abs(mine.X - theirs.X) > 0.002 || abs(mine.Y - theirs.Y) > 0.002 || abs(mine.Z - theirs.Z) > 0.002 { return false }
            }
            for tag in [cmsSigRedTRCTag, cmsSigGreenTRCTag, cmsSigBlueTRCTag] {
                guard let mine = curve(tag), let theirs = Profile.sRGB.curve(tag) else { return false }
                for step in 0...32 {
                    let v = Float(step) / 32
                    if abs(cmsEvalToneCurveFloat(mine, v) - cmsEvalToneCurveFloat(theirs, v)) > 1.0 / 1024 { return false }
                }
            }
            return true
        }

        private func xyz(_ tag: cmsTagSignature) -> cmsCIEXYZ? {
            cmsReadTag(handle, tag)?.assumingMemoryBound(to: cmsCIEXYZ.self).pointee
        }

        private func curve(_ tag: cmsTagSignature) -> OpaquePointer? {
            cmsReadTag(handle, tag).map { OpaquePointer($0) }
        }

        /// The profile serialised (`cmsSaveProfileToMem`); `nil` if Little CMS cannot write it.
        package func serialised() -> [UInt8]? {
            var count: cmsUInt32Number = 0
            guard cmsSaveProfileToMem(handle, nil, &count) != 0, count > 0 else { return nil }
            var bytes = [UInt8](repeating: 0, count: Int(count))
            let saved = bytes.withUnsafeMutableBytes { cmsSaveProfileToMem(handle, $0.baseAddress, &count) }
            return saved != 0 ? bytes : nil
        }

        /// An RGB profile made by Little CMS from a white point and primaries (CIE xy) and a
        /// tone curve: a pure gamma, or sRGB's curve when `gamma` is nil (a PNG's `cHRM` and
        /// `gAMA`, `cmsCreateRGBProfileTHR`).
        package static func rgb(
            white: (Double, Double), red: (Double, Double), green: (Double, Double), blue: (Double, Double), gamma: Double?
        )
            -> Profile?
        {
            var whitePoint = cmsCIExyY(x: white.0, y: white.1, Y: 1)
            var primaries = cmsCIExyYTRIPLE(
                Red: cmsCIExyY(x: red.0, y: red.1, Y: 1), Green: cmsCIExyY(x: green.0, y: green.1, Y: 1),
                Blue: cmsCIExyY(x: blue.0, y: blue.1, Y: 1))
            let curve: OpaquePointer?
            if let gamma {
                curve = cmsBuildGamma(LittleCMS.context, gamma)
            } else {
                // IEC 61966-2.1: Y = ((aX + b)^g for X ≥ d, else cX), Little CMS's type 4.
                let parameters: [Double] = [2.4, 1 / 1.055, 0.055 / 1.055, 1 / 12.92, 0.04045]
                curve = parameters.withUnsafeBufferPointer { cmsBuildParametricToneCurve(LittleCMS.context, 4, $0.baseAddress) }
            }
            guard let curve else { return nil }
            defer { cmsFreeToneCurve(curve) }
            var curves: [OpaquePointer?] = [curve, curve, curve]
            let made = curves.withUnsafeMutableBufferPointer { buffer in
                cmsCreateRGBProfileTHR(LittleCMS.context, &whitePoint, &primaries, buffer.baseAddress)
            }
            return made.map { Profile(handle: $0) }
        }
    }

    /// A transform from one profile to sRGB between two pixel formats (deleted when the last
    /// reference goes). Safe to apply from several threads at once (made with `cmsFLAGS_NOCACHE`).
    package final class Transform: @unchecked Sendable {
        private let handle: cmsHTRANSFORM

        /// Perceptual, black-point compensated, from `profile` in `input` to sRGB in `output`;
        /// `nil` when Little CMS cannot build it (a profile without the needed tags …).
        package init?(from profile: Profile, input: UInt32, output: UInt32) {
            guard
                let made = cmsCreateTransformTHR(
                    LittleCMS.context, profile.handle, input, Profile.sRGB.handle, output, UInt32(INTENT_PERCEPTUAL),
                    LittleCMS.transformFlags)
            else { return nil }
            handle = made
        }

        deinit { cmsDeleteTransform(handle) }

        /// Transforms `size` pixels in place, rows `stride` bytes apart (input and output
        /// formats of 4 bytes a pixel; bytes either format skips stay as they are).
        package func apply(_ base: UnsafeMutableRawPointer, size: PixelSize, stride: Int) {
            cmsDoTransformLineStride(
                handle, base, base, cmsUInt32Number(size.width), cmsUInt32Number(size.height), cmsUInt32Number(stride),
                cmsUInt32Number(stride), 0, 0)
        }
    }
}
