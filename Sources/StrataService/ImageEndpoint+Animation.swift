import Strata

/// Animated answers: an animated GIF or WebP original, asked for as WebP (explicitly or by
/// `Accept`) or as GIF (`format=gif`) without `frames=1`, is answered animated in that format.
///
/// The engine's variant of such an original is its first frame, flagged as an animation's
/// (``/StrataBase/ImageVariant/isAnimatedOriginal``) and kept in memory only, so the flag is
/// never lost to a tier that cannot store it. The animation itself is an encoding of that
/// variant — same key, size and version, `anim` in its derivation — made once (the shared
/// encoded responder coalesces it) from the original's bytes: every frame decoded within
/// `source.maxFrames` and `source.maxAnimationPixels`, rendered like the still (operations
/// included), the watermark laid on each, then one animated WebP with the frames' durations
/// and the loop count (WebP lossy at `quality`; GIF 255 colours a frame). It lives in the
/// encoded cache and is answered warm like any encoding.
extension ImageEndpoint {
    /// Makes `work` the encode of the whole animation (the still's encoder is not used).
    func animate(
        _ work: inout EncodedResponder.Work, prepared: Prepared, watermark mark: (WatermarkPlacement, Watermarks.Loaded)?
    ) async throws(ServiceError) {
        let parameters = prepared.parameters
        let key = parameters.key
        let data: SourceData
        do {
            data = try await cache.fetchOriginal(CacheKey(key), lane: FlightLane(.urgent))
        } catch {
            throw ServiceError(error)
        }
        let bytes = data.bytes
        let limits = settings.animationLimits
        let info: AnimationInfo
        do throws(ImageDecodingError) {
            info = try rethrowingTyped(ImageDecodingError.self) {
                try bytes.withUnsafeBytes { raw in
                    let info = try AnimatedImage.info(raw, maxFrames: limits.maxFrames)
                    try limits.check(info)
                    return info
                }
            }
        } catch {
            throw ServiceError(ImageCacheError.decoding(key: key, error))
        }
        // The still's size, so that the animation is exactly the variant it is an encoding of.
        let size = work.served.image.size
        let request = RenderRequest(
            box: size, mode: prepared.request.mode, style: .bgra32Premultiplied, gravity: parameters.gravity,
            operations: parameters.operations)
        let format = work.key.format
        let quality = quality(parameters, .webp)
        let frameBytes = 4 * info.canvas.width * info.canvas.height, outputBytes = 4 * size.width * size.height
        // Every decoded frame, every rendered one, and the encoder's copy of one.
        work.reserve = info.frameCount * (frameBytes + outputBytes) + 2 * outputBytes
        work.encode = { () throws(ServiceError) -> [UInt8] in
            var animation: AnimatedImage
            do throws(ImageDecodingError) {
                animation = try rethrowingTyped(ImageDecodingError.self) {
                    try bytes.withUnsafeBytes { raw in try AnimatedImage.decode(raw, limits: limits) }
                }
                animation = try ImageRenderer(resampleThreads: 1).render(animation, request: request)
                if let (placement, loaded) = mark {
                    animation = try animation.map { (frame: PixelImage) throws(ImageDecodingError) -> PixelImage in
                        placement.apply(loaded.image, to: frame)
                    }
                }
            } catch {
                throw ServiceError(ImageCacheError.decoding(key: key, error))
            }
            do {
                return format == .gif ? try animation.encodedAsGIF() : try animation.encodedAsWebP(quality: quality)
            } catch {
                throw ServiceError(.internalServerError, "encode_failed", "\(key.debugDescription): \(error)")
            }
        }
    }
}
