import Foundation
import Strata
import StrataConfiguration

/// The `info.json` of an image, for IIIF Image API 3.0 (`ImageService3`, level 2) or 2.1 (the
/// level-2 profile with its formats, qualities and supported features).
///
/// Lists the whole-image sizes that are power-of-two reductions of the original (each a
/// cheap request: the engine's shrink-on-load), square tiles of `iiif.tileSize` at
/// power-of-two scale factors up to the one whose tile covers the image, and the
/// `iiif.max*` limits. Pure; cost: a small dictionary and one JSON serialization.
package enum IIIFInfo {
    /// Features beyond those level 2 already names, and those it does (harmless to repeat).
    package static let features3 = [
        "baseUriRedirect", "canonicalLinkHeader", "cors", "jsonldMediaType", "mirroring", "profileLinkHeader", "regionByPct",
        "regionByPx", "regionSquare", "rotationBy90s", "sizeByConfinedWh", "sizeByH", "sizeByPct", "sizeByW", "sizeByWh",
        "sizeUpscaling",
    ]
    package static let features2 = [
        "baseUriRedirect", "canonicalLinkHeader", "cors", "jsonldMediaType", "mirroring", "profileLinkHeader", "regionByPct",
        "regionByPx", "regionSquare", "rotationBy90s", "sizeAboveFull", "sizeByConfinedWh", "sizeByDistortedWh", "sizeByForcedWh",
        "sizeByH", "sizeByPct", "sizeByW", "sizeByWh",
    ]

    /// The JSON document for an original of `size` whose base URI is `id`; `services`: its
    /// `service` entries (a restricted image's probe service, ``IIIFAuthEndpoint``).
    package static func json(
        version: IIIFVersion, id: String, size: PixelSize, settings: IIIFSettings, services: [[String: Any]] = []
    ) -> [UInt8] {
        let sizes = reductions(of: size, settings: settings).map { ["width": $0.width, "height": $0.height] }
        let tiles: [[String: Any]] = [
            ["width": settings.tileSize, "height": settings.tileSize, "scaleFactors": scaleFactors(for: size, tile: settings.tileSize)]
        ]
        var document: [String: Any] = [
            "@context": version.context, "protocol": "http://iiif.io/api/image", "width": size.width, "height": size.height,
            "sizes": sizes, "tiles": tiles,
        ]
        switch version {
        case .v3:
            document["id"] = id
            document["type"] = "ImageService3"
            document["profile"] = "level2"
            document["maxWidth"] = settings.maxWidth
            document["maxHeight"] = settings.maxHeight
            document["maxArea"] = settings.maxArea
            document["extraFormats"] = ["png", "webp", "avif"]
            document["extraQualities"] = ["color", "gray", "bitonal"]
            document["extraFeatures"] = features3
        case .v2:
            document["@id"] = id
            let profile: [String: Any] = [
                "formats": IIIFFormat.allCases.map(\.rawValue), "qualities": IIIFQuality.allCases.map(\.rawValue),
                "supports": features2, "maxWidth": settings.maxWidth, "maxHeight": settings.maxHeight, "maxArea": settings.maxArea,
            ]
            document["profile"] = [version.levelProfile, profile]
        }
        if !services.isEmpty { document["service"] = services }
        let data = (try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return Array(data)
    }

    /// Whole-image sizes at 1/2, 1/4, … of the original (and the original itself when it is
    /// within the limits), smallest first, down to about 64 pixels on the long side.
    package static func reductions(of size: PixelSize, settings: IIIFSettings) -> [PixelSize] {
        var result: [PixelSize] = []
        var factor = 1
        while true {
            let w = max(1, Int((Double(size.width) / Double(factor)).rounded()))
            let h = max(1, Int((Double(size.height) / Double(factor)).rounded()))
            if w <= settings.maxWidth, h <= settings.maxHeight, w * h <= settings.maxArea {
                result.append(PixelSize(width: w, height: h))
            }
            if max(w, h) <= 128 || factor >= 1 << 20 { break }
            factor *= 2
        }
        return result.reversed()
    }

    /// 1, 2, 4, … up to the first factor whose one tile covers the whole image.
    package static func scaleFactors(for size: PixelSize, tile: Int) -> [Int] {
        var factors = [1]
        while tile * factors[factors.count - 1] < max(size.width, size.height) { factors.append(factors[factors.count - 1] * 2) }
        return factors
    }
}
