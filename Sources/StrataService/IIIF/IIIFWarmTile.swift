import HTTPTypes
import NIOCore
import Strata

extension IIIFEndpoint {
    /// A IIIF image answer ready for the warm path: the encoded cache's entry with its
    /// ready-made head, and the route's own `Link` value.
    package struct WarmTile {
        package let image: EncodedImage
        package let head: ByteBuffer
        /// `Link`: the canonical URI and the compliance level's profile.
        package let link: String
        /// Whether the variant was a memory hit (a pyramid's tiles are not looked up at all).
        package let memoryHit: Bool
    }

    /// What the warm path does with a IIIF request.
    package enum WarmOutcome {
        /// Answered from the encoded cache.
        case answer(WarmTile)
        /// Passed on, with the memory lookup when one was made (for the route to go on from).
        case passOn(PreparedHandOff.IIIFLookup?)
    }

    /// The answer to the IIIF image request at `path` when everything it needs is at hand
    /// without waiting — the original's size in the memo, the variant in memory (for an original
    /// cut from a tile pyramid, its level: the encoding names it, and its tiles are not needed),
    /// and the encoding, with a ready-made head, in the encoded cache — for the warm path to write
    /// on the event loop (``WarmPathHandler``). Passed on for everything the ordinary path must
    /// decide or wait for: another route, an error, a `square` region placed by saliency, a
    /// variant of another source version than the memo's, a 304, a miss anywhere — with the
    /// memory lookup once one was made, so the route does not ask memory again. The same
    /// encoding as the ordinary path's (``encoding(_:variant:version:base:region:original:output:colour:derivationPrefix:)``),
    /// so the same bytes and validator. Touches no pixel; cost: the path's parse and the region
    /// and size arithmetic, the canonical URI, a memo lookup, at most one memory lookup, one
    /// encoded lookup.
    package func warmTile(path: Substring, authority: String?, ifNoneMatch: [String]) -> WarmOutcome {
        // A restricted identifier's request is always the route's (``AccessGate``).
        guard case .image(let request)? = try? IIIFRoute(path: path), !access.protects(request.identifier.key),
            let original = originals.known(request.identifier.key)
        else {
            return .passOn(nil)
        }
        let focus: CropFocus
        if request.region == .square, original.size.width != original.size.height {
            guard let fixed = settings.squareGravity.focus else { return .passOn(nil) }
            focus = fixed
        } else {
            focus = .center
        }
        guard let region = try? request.region.resolve(in: original.size, squareFocus: focus),
            let output = try? request.size.resolve(region: region.size, limits: settings, version: request.version)
        else { return .passOn(nil) }
        let colour = responder.colour.current
        let variant: VariantDescriptor
        var version = original.version
        let derivationPrefix: String
        // The memory lookup, when one was made (a pyramid's level needs none).
        var lookup: PreparedHandOff.IIIFLookup?
        if let pyramids, original.size.pixelCount > settings.tiledAbove {
            variant = IIIFRendering.TileCut(geometry: pyramids.geometry(for: original.size), region: region, output: output).descriptor
            derivationPrefix = "t"
        } else {
            let engineRequest = ImageRequest(
                key: CacheKey(request.identifier.key, colour: colour),
                box: IIIFRendering.engineBox(original: original.size, region: region, output: output), mode: .fit,
                upscaleTolerance: settings.upscaleTolerance)
            let found = cache.cachedImage(for: engineRequest)
            // A variant of another version than the memo's: the ordinary path forgets the memo's.
            guard let served = found, served.sourceVersion == .unknown || served.sourceVersion == original.version else {
                return .passOn(PreparedHandOff.IIIFLookup(request: engineRequest, hit: found))
            }
            lookup = PreparedHandOff.IIIFLookup(request: engineRequest, hit: served)
            variant = served.variant.descriptor
            version = served.sourceVersion
            derivationPrefix = ""
        }
        let base = "http://\(authority ?? "\(http.host):\(http.port)")\(request.version.prefix)\(request.identifier.raw)"
        let (key, canonical) = encoding(
            request, variant: variant, version: version, base: base, region: region, original: original.size, output: output,
            colour: colour, derivationPrefix: derivationPrefix)
        guard let hit = responder.encoded.value(for: key), let head = hit.head,
            !FormatNegotiation.matches(etag: hit.etag, ifNoneMatch: ifNoneMatch)
        else { return .passOn(lookup) }
        // The authority is the client's text: a value the ordinary path's HTTP types would have
        // to make legal goes that way.
        let link = Self.linkValue(canonical: canonical, version: request.version)
        guard HTTPField.isValidValue(link) else { return .passOn(lookup) }
        return .answer(WarmTile(image: hit, head: head, link: link, memoryHit: lookup != nil))
    }
}
