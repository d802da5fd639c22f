import Strata
import StrataConfiguration

/// The size parameter of an IIIF image request, and the arithmetic that turns it into an
/// output size for a region.
///
/// 3.0: `max`, `w,`, `,h`, `pct:n`, `w,h`, `!w,h`, each optionally prefixed with `^` (allow
/// upscaling; without it a size larger than the region is a 400). 2.1: `full`, `max`, `w,`,
/// `,h`, `pct:n`, `w,h`, `!w,h`, no `^`, and upscaling is always allowed. Pure.
public struct IIIFSize: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// The region's own size (`max`, 2.1's `full`), limited by maxWidth/maxHeight/maxArea;
        /// with `^`, as large as those limits allow.
        case max
        case width(Int)
        case height(Int)
        case percent(Double)
        /// Exactly `w×h` (the aspect may change).
        case exact(width: Int, height: Int)
        /// The largest size that keeps the aspect and fits inside `w×h` (`!w,h`).
        case fit(width: Int, height: Int)
    }

    public var kind: Kind
    /// `^`: the request allows an output larger than the region.
    public var upscale: Bool

    public init(_ kind: Kind, upscale: Bool = false) {
        self.kind = kind
        self.upscale = upscale
    }

    /// Parses the size segment for `version`; a malformed one is a 400 naming the size.
    public init(parsing text: Substring, version: IIIFVersion) throws(ServiceError) {
        var body = text
        upscale = false
        if body.hasPrefix("^") {
            guard version == .v3 else { throw Self.malformed(text, version) }
            upscale = true
            body = body.dropFirst()
        }
        if body == "max" {
            kind = .max
        } else if body == "full", version == .v2 {
            kind = .max
        } else if body.hasPrefix("pct:") {
            guard let n = IIIFNumbers.decimal(body.dropFirst(4)) else { throw Self.malformed(text, version) }
            guard n > 0 else { throw ServiceError(.badRequest, "bad_size", "size \(String(text).debugDescription): pct must be above 0") }
            kind = .percent(n)
        } else {
            let fit = body.hasPrefix("!")
            if fit { body = body.dropFirst() }
            guard let fields = IIIFNumbers.fields(body, count: 2) else { throw Self.malformed(text, version) }
            let w = fields[0].isEmpty ? nil : IIIFNumbers.whole(fields[0])
            let h = fields[1].isEmpty ? nil : IIIFNumbers.whole(fields[1])
            guard fields[0].isEmpty || w != nil, fields[1].isEmpty || h != nil else { throw Self.malformed(text, version) }
            switch (w, h, fit) {
            case (let w?, let h?, false): kind = .exact(width: w, height: h)
            case (let w?, let h?, true): kind = .fit(width: w, height: h)
            case (let w?, nil, false): kind = .width(w)
            case (nil, let h?, false): kind = .height(h)
            default: throw Self.malformed(text, version)
            }
        }
    }

    /// The output size for a region of `region` pixels, within `limits`; 400 when it would
    /// upscale without `^` (3.0), be empty, or exceed the limits (other than `max`, which is
    /// scaled down to them).
    public func resolve(region: PixelSize, limits: IIIFSettings, version: IIIFVersion) throws(ServiceError) -> PixelSize {
        let rw = Double(region.width), rh = Double(region.height)
        let mayUpscale = upscale || version == .v2
        func rounded(_ value: Double) -> Int { max(1, Int(value.rounded())) }
        var out: PixelSize
        switch kind {
        case .max:
            // The largest scale the limits allow; without `^` never above the region's own.
            var scale = min(Double(limits.maxWidth) / rw, Double(limits.maxHeight) / rh, (Double(limits.maxArea) / (rw * rh)).squareRoot())
            if !upscale { scale = min(scale, 1) }
            out = scale == 1 ? region : PixelSize(width: rounded(rw * scale), height: rounded(rh * scale))
            // Rounding up must not cross a limit.
            out.width = min(out.width, limits.maxWidth)
            out.height = min(out.height, limits.maxHeight)
            while out.width * out.height > limits.maxArea {
                if out.width >= out.height { out.width -= 1 } else { out.height -= 1 }
            }
            return out
        case .width(let w):
            guard w > 0 else { throw Self.empty() }
            out = PixelSize(width: w, height: rounded(rh * Double(w) / rw))
        case .height(let h):
            guard h > 0 else { throw Self.empty() }
            out = PixelSize(width: rounded(rw * Double(h) / rh), height: h)
        case .percent(let n):
            guard mayUpscale || n <= 100 else {
                throw ServiceError(.badRequest, "bad_size", "size pct:\(n) enlarges the region: use ^pct:\(n) to allow upscaling")
            }
            out = PixelSize(width: rounded(rw * n / 100), height: rounded(rh * n / 100))
        case .exact(let w, let h):
            guard w > 0, h > 0 else { throw Self.empty() }
            out = PixelSize(width: w, height: h)
        case .fit(let w, let h):
            guard w > 0, h > 0 else { throw Self.empty() }
            // Without ^ (3.0), a box that would enlarge the region is a 400 below, as the IIIF
            // validator reads the rule (not a silent clamp to the region).
            let scale = min(Double(w) / rw, Double(h) / rh)
            out = PixelSize(width: min(w, rounded(rw * scale)), height: min(h, rounded(rh * scale)))
        }
        if !mayUpscale, out.width > region.width || out.height > region.height {
            throw ServiceError(
                .badRequest, "bad_size",
                "size \(out) is larger than the \(region) region: prefix the size with ^ to allow upscaling")
        }
        if out.width > limits.maxWidth || out.height > limits.maxHeight || out.width * out.height > limits.maxArea {
            throw ServiceError(
                .badRequest, "bad_size",
                "size \(out) is over the limits (maxWidth \(limits.maxWidth), maxHeight \(limits.maxHeight), maxArea \(limits.maxArea))")
        }
        return out
    }

    package static func malformed(_ text: Substring, _ version: IIIFVersion) -> ServiceError {
        let forms =
            version == .v3
            ? "max, w,, ,h, pct:n, w,h or !w,h, each optionally prefixed with ^"
            : "full, max, w,, ,h, pct:n, w,h or !w,h"
        return ServiceError(.badRequest, "bad_size", "size \(String(text).debugDescription): expected \(forms)")
    }

    package static func empty() -> ServiceError {
        ServiceError(.badRequest, "bad_size", "the size must be at least one pixel wide and high")
    }
}
