import Foundation
import Strata
import StrataConfiguration
import StrataService

/// The thumbor route's parsers under libFuzzer (`FuzzThumbor`): the path grammar
/// (``ThumborURL``), the filters (``ThumborFilter``), the image's key, the signature and the plan
/// over an original whose size the input picks. The oracle: a parsed URL written back
/// (``ThumborURL/options``) parses to the same URL; refusals are 400s; a plan asks for a box
/// within `http.maxDimension` and its answer has a size.
package enum ThumborFuzzing {
    /// The endpoint's settings: every full URL under one prefix is a key.
    static let settings: ThumborSettings = {
        var settings = ThumborSettings()
        settings.enabled = true
        settings.allowUnsafe = true
        settings.securityKey = "fuzz"
        settings.urlPrefixes = ["https://img.example.com/"]
        return settings
    }()

    /// The first two bytes pick the original's size (1…256 a side, times 16 with the top bit);
    /// the rest is the path.
    package static func thumbor(_ data: UnsafeRawBufferPointer) {
        guard data.count >= 2 else { return }
        let scale = data[0] & 0x80 != 0 ? 16 : 1
        let original = PixelSize(width: (Int(data[0] & 0x7F) + 1) * scale, height: (Int(data[1]) + 1) * scale)
        let path = String(decoding: UnsafeRawBufferPointer(rebasing: data.dropFirst(2)), as: UTF8.self)
        guard let url = ThumborURL(path: Substring(path)) else {
            // thumbor's route needs an image (`.+`) and takes no line feed (`.`): nothing else stops it.
            ServiceFuzzing.require(
                path.isEmpty || path.utf8.contains(UInt8(ascii: "\n")),
                "only a line feed or nothing stops thumbor's route: \(path.debugDescription)")
            return
        }
        ServiceFuzzing.require(!url.image.isEmpty && !url.image.contains("\n"), "an empty image parsed")
        if case .signature(let signature) = url.authority {
            ServiceFuzzing.require(!signature.isEmpty, "an empty signature parsed")
            ServiceFuzzing.require(
                path.utf8.elementsEqual(("/" + signature + "/" + url.signed).utf8)
                    || path.utf8.elementsEqual((signature + "/" + url.signed).utf8),
                "the signed part is not the rest of the path")
            let signer = ThumborSigner(key: "fuzz")
            ServiceFuzzing.require(signer.isValid(Substring(signer.signature(url.signed)), for: url.signed), "a signature does not check")
        }
        // Written back, the URL parses the same.
        guard var again = ThumborURL(path: Substring("unsafe/" + url.options)) else {
            fatalError("\(path.debugDescription) written back as \(url.options.debugDescription) does not parse")
        }
        var first = url
        (first.authority, first.signed, again.authority, again.signed) = (.unsafe, "", .unsafe, "")
        ServiceFuzzing.require(first == again, "\(path.debugDescription) written back as \(url.options.debugDescription) parses otherwise")
        // The filters, the key and the plan: a value or a 400.
        let endpointKey: String
        let filters: [ThumborFilter]
        do {
            filters = try ThumborFilter.parse(Substring(String(url.filters).removingPercentEncoding ?? String(url.filters)))
            var key = String(url.image).removingPercentEncoding ?? String(url.image)
            if let prefix = settings.urlPrefixes.first(where: { key.hasPrefix($0) }) { key = String(key.dropFirst(prefix.count)) }
            try ImageParameters.checkKey(key)
            endpointKey = key
        } catch {
            ServiceFuzzing.require(error.status == .badRequest, "a refusal that is not a 400: \(error)")
            return
        }
        let maxDimension = 4096
        do {
            let plan = try ThumborPlan(
                url: url, filters: filters, key: endpointKey, original: original, colour: .srgb, maxDimension: maxDimension)
            ServiceFuzzing.require(plan.request.box.width >= 1 && plan.request.box.height >= 1, "an empty box")
            ServiceFuzzing.require(
                plan.request.box.width <= maxDimension && plan.request.box.height <= maxDimension, "a box past the maximum")
            let size = plan.finalSize(from: plan.resized)
            ServiceFuzzing.require(size.width >= 1 && size.height >= 1, "an answer without a size")
            ServiceFuzzing.require(size.width <= maxDimension && size.height <= maxDimension, "an answer past the maximum: \(size)")
        } catch {
            ServiceFuzzing.require(error.status == .badRequest, "a refusal that is not a 400: \(error)")
        }
    }
}
