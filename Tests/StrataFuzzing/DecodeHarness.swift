import Strata
#if canImport(Glibc)
import Glibc
#endif

/// The `FuzzDecode` harness (`FuzzHarness.decode`); what it checks is said below.
package enum DecodeHarness {

    /// Format detection, header parsing and a full render (decode, EXIF orientation, resample) of
    /// arbitrary bytes, with a pixel limit of 1 megapixel: every input either renders within the
    /// request's box or throws ``ImageDecodingError``; nothing crashes, leaks or reads out of
    /// bounds, and nothing allocates near the size a lying header claims (`-malloc_limit_mb`).
    /// A second renderer overlaps every JPEG decode with its resample (rows handed over as they
    /// are decoded) and decodes progressive JPEGs on two threads, where the first decodes them
    /// whole: it must give the same bytes, or throw as well.
    ///
    /// Profiles are fed too: renders alternate between `color.output` sRGB and original, so an
    /// input's embedded profile (seeds: tagged files) goes through Little CMS; and every input is
    /// also embedded, as an ICC profile (its first 4 bytes set to its length, as a profile's header
    /// says), into a small JPEG (APP2 chunks) and PNG (`iCCP`), which must render whatever the
    /// profile is: a bad profile is ignored, never an error. A PNG is also read through libpng's
    /// row API and a still WebP through libwebp's incremental decoder, as a tile pyramid reads them
    /// (`Fuzzing.pngRows`, `Fuzzing.webpRows`), and a JPEG at 1/8 scale in one part and in many
    /// speculative ones, which must agree (`Fuzzing.jpegEighth`).
    nonisolated(unsafe) static let renderer: ImageRenderer = {
        let renderer = ImageRenderer(limits: DecodingLimits(maxPixels: 1_000_000))
        renderer.decoder.splitsProgressiveJPEG = false
        return renderer
    }()
    nonisolated(unsafe) static let overlapping: ImageRenderer = {
        let renderer = ImageRenderer(limits: DecodingLimits(maxPixels: 1_000_000))
        renderer.overlapEveryDecode()
        return renderer
    }()

    /// `precondition` whose message survives a release build.
    static func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
        if !condition { fatalError(message()) }
    }

    /// The request depends on the input's length, so that the Fixtures work as seeds unchanged.
    static let requests = [
        RenderRequest(box: PixelSize(width: 64, height: 64)),
        RenderRequest(box: PixelSize(width: 200, height: 120), mode: .fill),
        RenderRequest(box: PixelSize(width: 1, height: 1)),
        RenderRequest(box: PixelSize(width: 300, height: 500), mode: .fill, allowUpscale: true, colour: .original),
        RenderRequest(box: PixelSize(width: 48, height: 48), colour: .original),
    ]

    /// Small untagged images the inputs are embedded into as profiles.
    static let carriers: [(ImageFormat, [UInt8])] = {
        var image = PixelImage(width: 24, height: 16)
        image.withUnsafeMutableBytes { raw in
            for i in 0..<raw.count { raw[i] = i % 4 == 3 ? 255 : UInt8(truncatingIfNeeded: i &* 37) }
        }
        return [ImageFormat.jpeg, .png].map { format in (format, try! ImageEncoder.encode(image, as: format, quality: 90)) }
    }()

    static func run(_ bytes: UnsafeRawBufferPointer) {
        let count = bytes.count
        let header = try? renderer.decoder.readHeader(bytes)
        Fuzzing.headerFromPrefix(bytes, whole: header, decoder: renderer.decoder)
        let request = requests[count % requests.count]
        do {
            let image = try renderer.render(bytes, request: request)
            require(header != nil, "rendered an input whose header does not parse")
            require(image.width >= 1 && image.height >= 1, "an empty image")
            require(image.width <= request.box.width && image.height <= request.box.height, "rendered beyond the box")
            if let header, !request.allowUpscale {
                require(image.width <= header.size.width && image.height <= header.size.height, "upscaled")
            }
            _ = image.withUnsafeBytes { $0.reduce(UInt8(0)) { $0 &+ $1 } }  // every byte readable
            let other = try? overlapping.render(bytes, request: request)
            require(other.map { sameBytes($0, image) } == true, "the overlapped render differs or failed")
        } catch {
            // A typed error for bad input: fine; the overlapped render must fail too.
            require((try? overlapping.render(bytes, request: request)) == nil, "the overlapped render of a failing input succeeded")
        }
        fuzzProfile(bytes, request: request)
        animation(bytes)
        Fuzzing.pngRows(bytes)
        Fuzzing.webpRows(bytes)
        Fuzzing.jpegEighth(bytes)
        renderer.decoder.releaseScratch()
        overlapping.decoder.releaseScratch()
    }

    /// Every frame of the input as an animation, within small limits: a typed error or frames that
    /// agree with the scan (count, canvas), each the canvas' size; what decodes survives an
    /// animated WebP round trip with its length (identical frames may merge).
    static func animation(_ bytes: UnsafeRawBufferPointer) {
        let limits = AnimationLimits(maxFrames: 64, maxTotalPixels: 1 << 22)
        guard let animation = try? AnimatedImage.decode(bytes, limits: limits) else { return }
        let info = try? AnimatedImage.info(bytes)
        require(info?.frameCount == animation.frames.count && info?.canvas == animation.canvas, "the frames disagree with the scan")
        require(animation.frames.allSatisfy { $0.image.size == animation.canvas }, "a frame is not the canvas' size")
        guard animation.canvas.width <= 16383, animation.canvas.height <= 16383 else { return }
        let webp = try? animation.encodedAsWebP(quality: 100)
        let back = webp.flatMap { w in try? w.withUnsafeBytes { try AnimatedImage.decode($0, limits: limits) } }
        // libwebp merges a frame identical to the one before into it (its duration added).
        require(back.map { $0.frames.count <= animation.frames.count } == true, "the animated WebP gained frames")
        require(
            back?.frames.reduce(0) { $0 + $1.duration } == animation.frames.reduce(0) { $0 + $1.duration },
            "the animated WebP changed the animation's length")
    }

    /// The input embedded as a profile into each carrier: the render must succeed, and an encode
    /// that embeds an accepted profile must read it back byte for byte.
    static func fuzzProfile(_ bytes: UnsafeRawBufferPointer, request: RenderRequest) {
        var profileBytes = Array(bytes)
        if profileBytes.count >= 4 {
            let n = UInt32(truncatingIfNeeded: profileBytes.count)
            profileBytes.replaceSubrange(0..<4, with: [UInt8(n >> 24), UInt8(n >> 16 & 0xFF), UInt8(n >> 8 & 0xFF), UInt8(n & 0xFF)])
        }
        guard let profile = try? ColourProfile(bytes: profileBytes) else { return }
        for (format, carrier) in carriers {
            guard let tagged = try? ImageEncoder.embedding(profile, in: carrier, format: format) else { continue }
            let header = try? renderer.decoder.readHeader(tagged)
            require(header?.colour.profile == profile, "\(format): the embedded profile does not read back")
            require((try? renderer.render(tagged, request: request)) != nil, "\(format): a render with a bad profile failed")
        }
    }

    /// Whether two images of one size and style hold the same pixel bytes (padding aside).
    static func sameBytes(_ a: PixelImage, _ b: PixelImage) -> Bool {
        guard a.size == b.size, a.style == b.style else { return false }
        let rowBytes = a.width * a.style.bytesPerPixel
        return a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in
                (0..<a.height).allSatisfy { row in
                    memcmp(x.baseAddress! + row * a.bytesPerRow, y.baseAddress! + row * b.bytesPerRow, rowBytes) == 0
                }
            }
        }
    }
}
