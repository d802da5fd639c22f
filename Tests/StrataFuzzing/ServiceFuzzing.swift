import Foundation
import HTTPTypes
import Strata
import StrataService
import StrataConfiguration

/// Entry points for the libFuzzer harnesses of the `Fuzz/` package over the service's request
/// parsers (a separate package, so it sees only public API): each runs one parser over
/// arbitrary bytes and traps when an invariant breaks. Not for any other use;
/// `@_spi(Fuzzing) import StrataService` to reach them. The warm path's is in
/// `WarmPathFuzzing.swift`.
package enum ServiceFuzzing {
    /// `precondition` whose message survives a release build (the harnesses run optimized).
    package static func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
        if !condition { fatalError(message()) }
    }

    // MARK: - /images parameters

    /// The `http.maxDimension` values an input picks from (its first byte's low two bits).
    package static let maxDimensions = [4096, 64, 1, 1_000_000]

    /// Presets an input may ask for, each kept only where it is valid for the maximum and the
    /// mode (`only`): `ImagePresets` refuses the others, as a configuration would.
    package static let presetDefinitions = [
        "thumb": "w=64 h=64 mode=fill", "small": "w=32", "focus": "w=48 h=32 mode=fill gravity=fp:0.25,0.75",
        "webp": "format=webp quality=70", "retina": "w=40&h=40&dpr=2&mode=fill&gravity=north", "fuzzy": "tolerance=0.5 exact",
    ]

    /// The presets for each maximum (index as ``maxDimensions``), without and with
    /// `http.presetsOnly`.
    package static let presetTable: [[ImagePresets]] = maxDimensions.map { maxDimension in
        [false, true].map { only in
            let valid = presetDefinitions.filter { name, text in
                (try? ImagePresets(definitions: [name: text], only: only, maxDimension: maxDimension)) != nil
            }
            // A presets-only service with no valid preset is refused by the configuration.
            guard !(only && valid.isEmpty) else { return .none }
            return (try? ImagePresets(definitions: valid, only: only, maxDimension: maxDimension)) ?? .none
        }
    }

    /// ``ImageParameters`` (after ``ImagePresets/resolve(_:)``, as ``ImageEndpoint/prepare(target:now:)``
    /// runs them) on the target after `/images/`. The first byte picks `http.maxDimension`
    /// and whether presets (`?preset=`) are on and only presets are answered; the rest is the
    /// target, split at its first `?`. What parses has a key without an empty, `.` or `..`
    /// segment or a NUL, a box within the maximum, values within their ranges and a gravity
    /// that prints back to itself; its canonical target (every value spelled out, the key
    /// percent-encoded) parses to the same parameters. Refusals are 400s.
    package static func imageParameters(_ data: UnsafeRawBufferPointer) {
        guard let flags = data.first else { return }
        let maxDimension = maxDimensions[Int(flags & 3)]
        let presets = flags & 4 == 0 ? ImagePresets.none : presetTable[Int(flags & 3)][Int(flags >> 3 & 1)]
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: data.dropFirst()), as: UTF8.self)
        let question = text.utf8.firstIndex(of: UInt8(ascii: "?"))
        let path = text[..<(question ?? text.endIndex)]
        let query = question.map { text[text.utf8.index(after: $0)...] }
        let parameters: ImageParameters
        do {
            let resolved = try presets.resolve(query)
            if !presets.only, query.map(ImagePresets.namesPreset) != true {
                require(resolved == query, "a query without a preset was changed by the presets")
            }
            parameters = try ImageParameters(path: path, query: resolved, maxDimension: maxDimension)
        } catch {
            require(error.status == .badRequest, "a refusal that is not a 400: \(error)")
            return
        }
        check(parameters, maxDimension: maxDimension)
        // The canonical target: the same parameters, without presets.
        let canonical = canonicalTarget(of: parameters)
        let canonicalQuestion = canonical.utf8.firstIndex(of: UInt8(ascii: "?"))!
        let again: ImageParameters
        do {
            again = try ImageParameters(
                path: canonical[..<canonicalQuestion], query: canonical[canonical.utf8.index(after: canonicalQuestion)...],
                maxDimension: maxDimension)
        } catch {
            fatalError("the canonical target \(canonical.debugDescription) of \(text.debugDescription) is refused: \(error)")
        }
        var expected = parameters
        expected.dpr = nil  // the box is already multiplied by it
        require(again == expected, "\(canonical.debugDescription) parses to \(again), not \(expected) (from \(text.debugDescription))")
    }

    /// The invariants of parsed parameters.
    package static func check(_ parameters: ImageParameters, maxDimension: Int) {
        let key = parameters.key
        for segment in key.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            require(
                !segment.isEmpty && !segment.elementsEqual(".".utf8) && !segment.elementsEqual("..".utf8) && !segment.contains(0),
                "the key \(key.debugDescription) has an empty, `.` or `..` segment or a NUL")
        }
        let box = parameters.box
        require((1...maxDimension).contains(box.width) && (1...maxDimension).contains(box.height), "the box \(box) is out of range")
        require(parameters.quality.map { (1...100).contains($0) } ?? true, "quality out of range")
        require(parameters.tolerance.map { (0...1).contains($0) } ?? true, "tolerance out of range")
        require(parameters.dpr.map { $0 > 0 && $0 <= 4 } ?? true, "dpr out of range")
        require(Gravity(parsing: parameters.gravity.description) == parameters.gravity, "gravity \(parameters.gravity) does not print back")
        require(parameters.gravity == .center || parameters.mode == .fill, "a gravity without mode=fill")
        let operations = parameters.operations
        require(
            ImageOperations(canonical: Substring(operations.canonical)) == operations,
            "operations \(operations.canonical.debugDescription) do not read back")
        require(!operations.canonical.utf8.contains(0), "operations with a NUL")
        require(operations.pad == nil || parameters.mode == .fill, "mode=pad without the box's aspect")
        require(operations.trim.map { (0...255).contains($0) } ?? true, "trim out of range")
        require(operations.blur.map { ImageOperations.blurRange.contains($0) } ?? true, "blur out of range")
        require(operations.sharpen.map { ImageOperations.sharpenRange.contains($0) } ?? true, "sharpen out of range")
        require(
            parameters.gravity != .smart || !(operations.changesGeometry || operations.pad != nil),
            "gravity=smart with operations that change the geometry")
        let derived = CacheKey(parameters.key, colour: .srgb, gravity: parameters.gravity, operations: operations)
        require(
            derived.operations == operations && derived.gravity == parameters.gravity && derived.sourceKey == parameters.key,
            "the key loses a part")
        if let mark = parameters.watermark {
            require((0.01...1).contains(mark.opacity) && mark.scale.map { (0.01...1).contains($0) } ?? true, "watermark out of range")
            require((0...1000).contains(mark.margin) && mark.gravity != .smart, "watermark placement out of range")
        }
    }

    /// Characters left as they are in a canonical key segment (RFC 3986's unreserved).
    package static let unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")

    /// `/images/` target (without the prefix) that spells every value of `parameters` out.
    package static func canonicalTarget(of parameters: ImageParameters) -> String {
        // Split at the bytes `/` (a `/` followed by a combining mark is one Character).
        let key = parameters.key.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
            .map { Substring($0).addingPercentEncoding(withAllowedCharacters: unreserved)! }.joined(separator: "/")
        let operations = parameters.operations
        var pairs = [
            "w=\(parameters.box.width)", "h=\(parameters.box.height)", "mode=\(operations.pad != nil ? "pad" : "\(parameters.mode)")",
        ]
        if let pad = operations.pad { pairs.append("extend=\(pad.rawValue)") }
        if let trim = operations.trim { pairs.append("trim=\(trim)") }
        if let crop = operations.crop { pairs.append("crop=\(crop)") }
        if let flip = operations.flip { pairs.append("flip=\(flip.rawValue)") }
        if operations.quarterTurns != 0 { pairs.append("rot=\(operations.quarterTurns * 90)") }
        if let background = operations.background { pairs.append("bg=\(background)") }
        if let blur = operations.blur { pairs.append("blur=\(blur)") }
        if let sharpen = operations.sharpen { pairs.append("sharpen=\(sharpen)") }
        if parameters.still { pairs.append("frames=1") }
        if let mark = parameters.watermark {
            pairs.append("watermark=\(mark.name)")
            pairs.append("wmpos=\(mark.gravity.map { "\($0)" } ?? "tile")")
            pairs.append("wmopacity=\(mark.opacity)")
            if let scale = mark.scale { pairs.append("wmscale=\(scale)") }
            pairs.append("wmmargin=\(mark.margin)")
        }
        if let tolerance = parameters.tolerance { pairs.append("tolerance=\(tolerance)") }
        if let format = parameters.format { pairs.append("format=\(format.rawValue)") }
        if let quality = parameters.quality { pairs.append("quality=\(quality)") }
        if parameters.exact { pairs.append("exact=true") }
        if parameters.gravity != .center { pairs.append("gravity=\(parameters.gravity)") }
        return key + "?" + pairs.joined(separator: "&")
    }

    // MARK: - IIIF

    /// A side an original or a limit can have: often an edge, otherwise any up to 65 535.
    package static func side(_ input: inout FuzzBytes, edges: [Int]) -> Int {
        let pick = input.byte()
        if pick < 128 { return edges[Int(pick) % edges.count] }
        return 1 + Int(input.uint16())
    }

    /// The IIIF path grammar (``IIIFRoute``) and the request's arithmetic. Eight bytes pick the
    /// original's size (up to 10⁶ a side, as decoders report), the limits (`iiif.maxWidth`,
    /// `maxHeight`, `maxArea`) and the `square` focus; the rest is the path. A parsed
    /// identifier is a valid key; the region and size resolve or refuse with a 4xx, never trap;
    /// what resolves is within the image and the limits (and the region without `^` in 3.0); its
    /// canonical URI parses back to a request with the same identifier, rotation, quality and
    /// format whose region and size resolve to the same pixels, and whose canonical URI is the
    /// same: canonical URIs are fixed points.
    package static func iiif(_ data: UnsafeRawBufferPointer) {
        var input = FuzzBytes(data)
        let originalEdges = [1, 2, 3, 7, 255, 256, 512, 513, 4096, 65_535, 1_000_000]
        let original = PixelSize(width: side(&input, edges: originalEdges), height: side(&input, edges: originalEdges))
        var limits = IIIFSettings()
        let limitEdges = [1, 16, 512, 4096, 65_535, 1 << 20]
        limits.maxWidth = side(&input, edges: limitEdges)
        limits.maxHeight = side(&input, edges: limitEdges)
        limits.maxArea = [1, 256, 16_777_216, 1 << 32, 1 << 40, 1_000_000][Int(input.byte()) % 6]
        let focus = CropFocus(x: Double(input.byte()) / 255, y: Double(input.byte()) / 255)
        let path = String(decoding: input.rest(), as: UTF8.self)
        let route: IIIFRoute
        do {
            route = try IIIFRoute(path: Substring(path))
        } catch {
            require(error.status == .badRequest || error.status == .notFound || error.status == .notImplemented, "\(error)")
            return
        }
        switch route {
        case .base(_, let identifier), .info(_, let identifier):
            checkIdentifier(identifier)
        case .image(let request):
            checkIdentifier(request.identifier)
            guard let (region, output) = resolve(request, original: original, limits: limits, focus: focus) else { return }
            let base = request.version.prefix + request.identifier.raw
            let canonical = IIIFEndpoint.canonical(request, base: base, region: region, original: original, output: output)
            guard case .image(let again) = try? IIIFRoute(path: Substring(canonical)) else {
                fatalError("the canonical URI \(canonical.debugDescription) of \(path.debugDescription) does not parse")
            }
            require(
                again.version == request.version && again.identifier == request.identifier && again.rotation == request.rotation
                    && again.quality == request.quality && again.format == request.format,
                "\(canonical.debugDescription) parses to another request than \(path.debugDescription)")
            guard let (region2, output2) = resolve(again, original: original, limits: limits, focus: focus) else {
                fatalError("the canonical URI \(canonical.debugDescription) of \(path.debugDescription) does not resolve")
            }
            require(
                region2 == region && output2 == output,
                "\(canonical.debugDescription) resolves to \(region2) → \(output2), \(path.debugDescription) to \(region) → \(output) (original \(original))"
            )
            let fixed = IIIFEndpoint.canonical(again, base: base, region: region2, original: original, output: output2)
            require(fixed == canonical, "the canonical URI \(canonical.debugDescription) is not a fixed point: \(fixed.debugDescription)")
        }
    }

    package static func checkIdentifier(_ identifier: IIIFIdentifier) {
        require(
            (try? ImageParameters.checkKey(identifier.key)) != nil, "the identifier's key \(identifier.key.debugDescription) is not a key")
        require(identifier.raw.removingPercentEncoding == identifier.key, "the identifier's key is not its segment decoded")
    }

    /// The region and output size of `request`, checked, or `nil` when it is refused (a 400).
    package static func resolve(
        _ request: IIIFImageRequest, original: PixelSize, limits: IIIFSettings, focus: CropFocus
    ) -> (IIIFRect, PixelSize)? {
        let region: IIIFRect
        let output: PixelSize
        do {
            region = try request.region.resolve(in: original, squareFocus: focus)
            output = try request.size.resolve(region: region.size, limits: limits, version: request.version)
        } catch {
            require(error.status == .badRequest, "\(error)")
            return nil
        }
        require(
            region.x >= 0 && region.y >= 0 && region.width >= 1 && region.height >= 1 && region.x + region.width <= original.width
                && region.y + region.height <= original.height, "the region \(region) leaves the \(original) image")
        require(
            output.width >= 1 && output.height >= 1 && output.width <= limits.maxWidth && output.height <= limits.maxHeight
                && output.width * output.height <= limits.maxArea, "the size \(output) is empty or over the limits")
        if request.version == .v3, !request.size.upscale {
            require(output.width <= region.width && output.height <= region.height, "\(output) upscales \(region) without ^")
        }
        let box = IIIFRendering.engineBox(original: original, region: region, output: output)
        require(
            box.width >= 1 && box.height >= 1 && box.width <= original.width && box.height <= original.height,
            "the engine box \(box) is empty or larger than the original \(original)")
        let rect = IIIFRendering.variantRect(region: region, original: original, variant: box)
        let slack = 1e-9 * Double(max(box.width, box.height))
        require(
            rect.x >= 0 && rect.y >= 0 && rect.width > 0 && rect.height > 0 && rect.x + rect.width <= Double(box.width) + slack
                && rect.y + rect.height <= Double(box.height) + slack, "the variant rectangle \(rect) leaves the variant \(box)")
        return (region, output)
    }

    // MARK: - Signed URLs

    /// The characters of a key id (`http.signingKeys` checks them).
    package static let keyIDCharacters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")

    /// ``URLSigner`` on arbitrary keys and targets. The input names zero to three keys by id and
    /// maybe a key without id (their secrets are input bytes), a clock, and a target. Checks:
    /// - ``URLSigner/verify(_:now:)`` of the target never traps; when it passes, the target it
    ///   returns is the given one up to `sig`, and the signer's own signature of it decodes to
    ///   the same bytes;
    /// - the target signed as `strata sign` signs (``URLSigner/sign(_:keyID:expires:)``, with a
    ///   key id and an expiry or not) verifies, returning what was signed, until it expires;
    /// - any single-byte change to the signed part is refused.
    package static func urlSigner(_ data: UnsafeRawBufferPointer) {
        var input = FuzzBytes(data)
        let flags = input.byte()
        var keys: [String: String] = [:]
        for _ in 0..<Int(flags % 4) {
            let id = String((0..<1 + input.below(8)).map { _ in keyIDCharacters[input.below(keyIDCharacters.count)] })
            keys[id] = String(decoding: input.take(input.below(24)), as: UTF8.self)
        }
        let defaultKey = flags & 4 != 0 ? String(decoding: input.take(input.below(24)), as: UTF8.self) : nil
        let now = Int(input.uint32())
        let target = String(decoding: input.rest(), as: UTF8.self)
        guard let signer = URLSigner(keys: keys, defaultKey: defaultKey) else {
            require(keys.isEmpty && defaultKey == nil, "a signer with keys was refused")
            return
        }
        // Any target.
        let whole = Substring(target)
        if let (signed, expires) = try? signer.verify(whole, now: now) {
            require(signed.startIndex == whole.startIndex, "verify returned what the target does not start with")
            let given = whole[signed.endIndex...].dropFirst(URLSigner.parameter.count + 2)
            let keyID = URLSigner.value(of: URLSigner.keyIDParameter, in: signed).map(String.init)
            let ours = signer.signature(for: signed, keyID: keyID).flatMap { URLSigner.decodeBase64URL(Substring($0)) }
            require(ours != nil && ours == URLSigner.decodeBase64URL(given), "a signature the signer would not make verifies")
            require(expires.map { now <= $0 } ?? true, "an expired URL verifies")
        }
        // Signed as `strata sign` signs.
        let ids = [nil] + keys.keys.sorted()
        let keyID = ids[Int(flags >> 3) % ids.count]
        let expires = flags & 0x80 != 0 ? now + Int(flags >> 4 & 7) : nil
        guard let url = signer.sign(target, keyID: keyID, expires: expires) else {
            require(keyID == nil && defaultKey == nil, "a signer refused to sign with a key it has")
            return
        }
        let signedTarget = URLSigner.split(Substring(url)).target
        // A whole URL without a path (`http://host`) signs an empty target, which no request has.
        guard signedTarget.hasPrefix("/") || !url.contains("://") else { return }
        let verified: (target: Substring, expires: Int?)
        do {
            verified = try signer.verify(signedTarget, now: now)
        } catch {
            fatalError("the signed target \(String(signedTarget).debugDescription) is refused: \(error)")
        }
        require(verified.expires == expires, "verify read another expiry than was signed")
        let after = signedTarget[verified.target.endIndex...]
        require(
            verified.target.startIndex == signedTarget.startIndex && (after.hasPrefix("&sig=") || after.hasPrefix("?sig=")),
            "verify returned another signed part")
        if let expires {
            do {
                _ = try signer.verify(signedTarget, now: expires + 1)
                fatalError("an expired signature verifies")
            } catch {
                require(error == .expired, "an expired signature is refused as \(error)")
            }
        }
        // One byte of the signed part changed.
        var bytes = Array(signedTarget.utf8)
        let signedCount = verified.target.utf8.count
        guard signedCount > 0 else { return }
        let position = input.below(signedCount)
        bytes[position] = bytes[position] &+ UInt8(1 + input.below(255))
        let changed = String(decoding: bytes, as: UTF8.self)
        guard changed != String(signedTarget) else { return }
        require((try? signer.verify(Substring(changed), now: now)) == nil, "\(changed.debugDescription), one byte changed, verifies")
    }
}

/// Reads the fuzzer's bytes as a stream of small decisions; past the end every read is 0.
package struct FuzzBytes {
    package let bytes: UnsafeRawBufferPointer
    package var position = 0

    package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    package mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    package mutating func uint16() -> UInt16 { UInt16(byte()) | UInt16(byte()) << 8 }
    package mutating func uint32() -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(byte()) << (8 * $1) } }

    /// A number in `0..<bound` (bound ≥ 1).
    package mutating func below(_ bound: Int) -> Int { Int(uint16()) % bound }

    /// The next `count` bytes (fewer at the end).
    package mutating func take(_ count: Int) -> UnsafeRawBufferPointer {
        let start = min(position, bytes.count), end = min(position + max(0, count), bytes.count)
        position = end
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }

    /// The bytes not read yet.
    package mutating func rest() -> UnsafeRawBufferPointer { take(bytes.count) }
}
