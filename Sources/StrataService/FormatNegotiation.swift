import Strata

/// The small HTTP rules of an image response: `Accept` negotiation, `If-None-Match`
/// matching, and whether an image needs an alpha channel. Pure functions.
package enum FormatNegotiation {
    /// What `Accept` and `http.formats` choose before the pixels are looked at.
    package enum Outcome: Equatable {
        case format(ResponseFormat)
        /// JPEG for opaque pixels, PNG for translucent ones: a scan of the pixels (or a cached
        /// encoding of them) tells which.
        case byAlpha
    }

    /// The answer's format for a request without `format=`: the first of `formats`
    /// (`http.formats`, most preferred first) that applies — AVIF, JPEG XL and WebP when `Accept`
    /// names `image/avif`, `image/jxl`, `image/webp` (``accepts(_:in:)``); JPEG, unless PNG comes
    /// later in the list (then ``Outcome/byAlpha``); PNG. JPEG when none applies (the
    /// configuration lists JPEG or PNG, so only a list built in code gets there). Cost: a scan
    /// of `Accept` per listed AVIF, JPEG XL or WebP before the one chosen.
    package static func negotiate(_ formats: [ImageFormat], accept: [String]) -> Outcome {
        for (index, format) in formats.enumerated() {
            switch format {
            case .avif: if accepts("image/avif", in: accept) { return .format(.avif) }
            case .webp: if accepts("image/webp", in: accept) { return .format(.webp) }
            case .jxl: if accepts("image/jxl", in: accept) { return .format(.jxl) }
            case .jpeg: return formats[(index + 1)...].contains(.png) ? .byAlpha : .format(.jpeg)
            case .png: return .format(.png)
            case .heic, .gif, .tiff, .jp2: continue
            }
        }
        return .format(.jpeg)
    }

    /// Whether `Accept` names `type` (lower case) explicitly with a non-zero q-value
    /// (`image/*` does not count: a browser that says only that may not decode WebP).
    package static func accepts(_ type: String, in accept: [String]) -> Bool {
        for field in accept {
            for item in field.split(separator: ",") {
                let parts = item.split(separator: ";")
                guard let media = parts.first, trimmed(media).lowercased() == type else { continue }
                let q = parts.dropFirst().map(trimmed).first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
                if q > 0 { return true }
            }
        }
        return false
    }

    /// `If-None-Match` (weak comparison, RFC 9110 §13.1.2): `*`, or any listed tag equal to
    /// `etag` once `W/` is ignored.
    package static func matches(etag: String, ifNoneMatch: [String]) -> Bool {
        for field in ifNoneMatch {
            for item in field.split(separator: ",") {
                var tag = trimmed(item)
                if tag == "*" { return true }
                if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
                if tag == etag { return true }
            }
        }
        return false
    }

    /// `text` without surrounding spaces and tabs.
    package static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while let first = text.first, first == " " || first == "\t" { text.removeFirst() }
        while let last = text.last, last == " " || last == "\t" { text.removeLast() }
        return text
    }

    /// Whether any pixel of `image` is not opaque (only premultiplied BGRA can have alpha).
    /// Cost: one pass over the alpha bytes, stopping at the first translucent one — never on an
    /// event loop: the service calls it through ``EncodedResponder/hasTransparency(_:)``, on the
    /// engine's threads.
    package static func hasTransparency(_ image: PixelImage) -> Bool {
        guard image.style == .bgra32Premultiplied else { return false }
        return image.withUnsafeBytes { raw in
            for y in 0..<image.height {
                let row = raw.baseAddress! + y * image.bytesPerRow
                for x in 0..<image.width where row.load(fromByteOffset: x * 4 + 3, as: UInt8.self) != 255 {
                    return true
                }
            }
            return false
        }
    }
}
