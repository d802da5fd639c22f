import HTTPTypes
import Hummingbird
import NIOCore
import Strata
import StrataConfiguration

/// `GET /iiif/{3|2}/…`: the IIIF Image API (3.0 and 2.1, level 2) over the engine.
///
/// The base URI redirects (303) to its `info.json`; `info.json` describes the original (its
/// size read once per source version, ``IIIFOriginals``); an image request resolves its
/// region and size against the original, asks the engine for a whole-image variant near its
/// scale (``IIIFRendering``), and crops, resamples, turns and encodes on the engine's threads.
/// Every answer, errors included, carries `Access-Control-Allow-Origin: *`; images carry the
/// canonical and profile `Link` headers and `X-Strata-Tier`.
///
/// The encoded tile is kept in the service's ``EncodedCache``, keyed by the variant it was cut
/// from, its source version and the canonical request, so a warm tile costs a memo lookup, the
/// engine's memory hit, one encoded lookup and a write; a tile whose level is cached but which
/// was never asked for costs a resample of the tile's size and an encode.
struct IIIFEndpoint: Sendable {
    let cache: ImageCache
    let encoded: EncodedCache
    let settings: IIIFSettings
    let http: HTTPServiceSettings
    let originals: IIIFOriginals

    static let cors: HTTPFields = [.accessControlAllowOrigin: "*"]
    static let link = HTTPField.Name("Link")!

    /// The answer and the tier label for metrics (`nil` when no image was served).
    func respond(to request: Request) async -> (Response, tier: String?) {
        do {
            return try await answer(request)
        } catch {
            return (error.response(headers: Self.cors), nil)
        }
    }

    private func answer(_ request: Request) async throws(ServiceError) -> (Response, tier: String?) {
        let target = Substring(request.uri.string)
        let path = target[..<(target.firstIndex(of: "?") ?? target.endIndex)]
        let route = try IIIFRoute(path: path)
        let host = request.head.authority ?? "\(http.host):\(http.port)"
        func base(_ version: IIIFVersion, _ identifier: IIIFIdentifier) -> String {
            "http://\(host)\(version.prefix)\(identifier.raw)"
        }
        switch route {
        case .base(let version, let identifier):
            var headers = Self.cors
            headers[.location] = base(version, identifier) + "/info.json"
            return (Response(status: .seeOther, headers: headers), nil)
        case .info(let version, let identifier):
            let original = try await originals.original(for: identifier.key, cache: cache)
            let json = IIIFInfo.json(version: version, id: base(version, identifier), size: original.size, settings: settings)
            var headers = Self.cors
            headers[.contentType] = version.infoContentType(accept: request.headers[values: .accept])
            headers[Self.link] = "<\(version.levelProfile)>;rel=\"profile\""
            if !http.cacheControl.isEmpty { headers[.cacheControl] = http.cacheControl }
            return (Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: json))), nil)
        case .image(let image):
            return try await render(image, base: base(image.version, image.identifier), ifNoneMatch: request.headers[values: .ifNoneMatch])
        }
    }

    /// An image request; retried once when the served variant shows the original changed
    /// since its size was memoized. A strong `ETag` names the source version, the variant the
    /// tile is cut from and the canonical derivation; a matching `If-None-Match` gets a 304
    /// before any crop or encode.
    private func render(
        _ request: IIIFImageRequest, base: String, ifNoneMatch: [String]
    ) async throws(ServiceError) -> (Response, tier: String?) {
        var attempt = 0
        while true {
            attempt += 1
            let key = request.identifier.key
            let original = try await originals.original(for: key, cache: cache)
            let region = try request.region.resolve(in: original.size)
            let output = try request.size.resolve(region: region.size, limits: settings, version: request.version)
            let box = IIIFRendering.engineBox(original: original.size, region: region, output: output)
            let served: CachedImage
            do {
                served = try await cache.image(for: ImageRequest(key: CacheKey(key), box: box, mode: .fit))
            } catch {
                throw ServiceError(error)
            }
            if served.sourceVersion != .unknown, originals.forget(key, unless: served.sourceVersion), attempt < 2 { continue }
            let variant = served.image
            let quality = request.quality, rotation = request.rotation, format = request.format
            let encodeQuality = http.quality
            let originalSize = original.size
            let canonical = Self.canonical(request, base: base, region: region, original: originalSize, output: output)
            let tileKey = EncodedKey(
                key: key, variant: served.variant.descriptor, version: served.sourceVersion.stamp, format: format.responseFormat,
                quality: format == .png ? 0 : encodeQuality, derivation: canonical.dropFirst(base.count).description)
            let etag = Self.etag(api: request.version, key: tileKey)
            // What a 304 and a 200 share.
            var headers = Self.cors
            headers[.eTag] = etag
            headers[Self.link] = "<\(canonical)>;rel=\"canonical\", <\(request.version.levelProfile)>;rel=\"profile\""
            if !http.cacheControl.isEmpty { headers[.cacheControl] = http.cacheControl }
            if FormatNegotiation.matches(etag: etag, ifNoneMatch: ifNoneMatch) {
                headers[ImageEndpoint.tier] = served.tier.rawValue
                return (Response(status: .notModified, headers: headers), served.tier.rawValue)
            }
            let body: ByteBuffer
            let size: (width: String, height: String)
            var tier = served.tier.rawValue
            if let hit = encoded.value(for: tileKey) {
                body = hit.body
                size = (hit.width, hit.height)
                tier = "encoded"
            } else {
                let result: Result<(bytes: [UInt8], size: PixelSize), ImageEncodingError>
                do {
                    result = try await cache.runOnEngineThreads { () throws(ImageEncodingError) -> (bytes: [UInt8], size: PixelSize) in
                        let pixels = IIIFRendering.compose(
                            variant, region: region, original: originalSize, output: output, rotation: rotation, quality: quality)
                        return (try ImageEncoder.encode(pixels, as: format.imageFormat, quality: encodeQuality), pixels.size)
                    }
                } catch {
                    throw ServiceError(error)
                }
                switch result {
                case .success(let value):
                    body = ByteBuffer(bytes: value.bytes)
                    size = (String(value.size.width), String(value.size.height))
                    encoded.insert(
                        EncodedImage(body: body, format: format.responseFormat, etag: "", width: size.width, height: size.height),
                        for: tileKey)
                case .failure(let error):
                    throw ServiceError(.internalServerError, "encode_failed", "\(key.debugDescription): \(error)")
                }
            }
            headers[.contentType] = format.contentType
            headers[ImageEndpoint.tier] = tier
            headers[ImageEndpoint.width] = size.width
            headers[ImageEndpoint.height] = size.height
            return (Response(status: .ok, headers: headers, body: .init(byteBuffer: body)), tier)
        }
    }

    /// A tile's strong validator: source version, the variant it is cut from, the API version,
    /// the canonical region/size/rotation/quality.format (its commas as `;`, which canonical
    /// forms never contain: clients and ``FormatNegotiation`` split `If-None-Match` on commas)
    /// and the encoder quality.
    static func etag(api: IIIFVersion, key: EncodedKey) -> String {
        let derivation = String(key.derivation.map { $0 == "," ? ";" : $0 })
        return "\"\(String(key.version, radix: 16))-\(key.variant)-\(api.prefix.filter(\.isNumber))\(derivation)-q\(key.quality)\""
    }

    /// The canonical URI of an image request (Image API 3.0 §4.7, 2.1 §4.7): the region as
    /// `full` or `x,y,w,h`; the size as `max` (3.0) / `full` (2.1) when it is the region's own,
    /// else `w,h` (3.0, `^` when larger than the region) or `w,` (2.1, `w,h` when distorted);
    /// the rotation as a whole number with `!` when mirrored.
    static func canonical(
        _ request: IIIFImageRequest, base: String, region: IIIFRect, original: PixelSize, output: PixelSize
    )
        -> String
    {
        let regionText = region == IIIFRect(x: 0, y: 0, width: original.width, height: original.height) ? "full" : region.description
        let sizeText: String
        if output == region.size {
            sizeText = request.version == .v3 ? "max" : "full"
        } else if request.version == .v3 {
            let up = output.width > region.width || output.height > region.height
            sizeText = (up ? "^" : "") + "\(output.width),\(output.height)"
        } else {
            let keepsAspect = Int((Double(region.height) * Double(output.width) / Double(region.width)).rounded()) == output.height
            sizeText = keepsAspect ? "\(output.width)," : "\(output.width),\(output.height)"
        }
        return "\(base)/\(regionText)/\(sizeText)/\(request.rotation.canonical)/\(request.quality.rawValue).\(request.format.rawValue)"
    }
}
