import CWebP
import StrataBase

/// Animated WebP through libwebp's demux and mux libraries: ``AnimatedImage``'s frames decoded
/// by `WebPAnimDecoder` (the canvas as shown, premultiplied BGRA) and encoded by
/// `WebPAnimEncoder`.
extension WebPCodec {
    /// An open animation decoder over `bytes` (which must outlive it), premultiplied BGRA, on
    /// the caller's thread; the caller deletes it.
    static func animationDecoder(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> OpaquePointer {
        var options = WebPAnimDecoderOptions()
        guard WebPAnimDecoderOptionsInit(&options) != 0 else {
            throw ImageDecodingError(.unsupported("libwebp ABI mismatch"), format: .webp)
        }
        options.color_mode = MODE_bgrA
        options.use_threads = 0
        var data = WebPData(bytes: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), size: bytes.count)
        guard let decoder = WebPAnimDecoderNew(&data, &options) else {
            throw ImageDecodingError(.corrupt("the animation's frames cannot be read (truncated or damaged)"), format: .webp)
        }
        return decoder
    }

    /// The canvas, frame count and loop count (from the demuxed chunks: no frame decoded).
    static func animationInfo(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> AnimationInfo {
        guard !bytes.isEmpty else { throw ImageDecodingError(.truncated, format: .webp) }
        let decoder = try animationDecoder(bytes)
        defer { WebPAnimDecoderDelete(decoder) }
        var info = WebPAnimInfo()
        guard WebPAnimDecoderGetInfo(decoder, &info) != 0, info.canvas_width > 0, info.canvas_height > 0 else {
            throw ImageDecodingError(.corrupt("the animation's canvas cannot be read"), format: .webp)
        }
        return AnimationInfo(
            format: .webp, canvas: PixelSize(width: Int(info.canvas_width), height: Int(info.canvas_height)),
            frameCount: Int(info.frame_count), loopCount: Int(info.loop_count))
    }

    /// Every frame of the WebP whose facts are `info` (checked against the limits by the caller).
    static func decodeAnimation(_ bytes: UnsafeRawBufferPointer, info: AnimationInfo) throws(ImageDecodingError) -> AnimatedImage {
        let decoder = try animationDecoder(bytes)
        defer { WebPAnimDecoderDelete(decoder) }
        var frames: [AnimatedImage.Frame] = []
        frames.reserveCapacity(info.frameCount)
        var previous: Int32 = 0
        let rowBytes = info.canvas.width * 4
        while frames.count < info.frameCount, WebPAnimDecoderHasMoreFrames(decoder) != 0 {
            var pixels: UnsafeMutablePointer<UInt8>?
            var timestamp: Int32 = 0
            guard WebPAnimDecoderGetNext(decoder, &pixels, &timestamp) != 0, let pixels else {
                throw ImageDecodingError(.corrupt("frame \(frames.count + 1) cannot be decoded (truncated or damaged)"), format: .webp)
            }
            var image = PixelImage(uninitializedWidth: info.canvas.width, height: info.canvas.height, style: .bgra32Premultiplied)
            let stride = image.bytesPerRow
            image.withUnsafeMutableBytes { raw in
                for y in 0..<info.canvas.height {
                    (raw.baseAddress! + y * stride).copyMemory(from: pixels + y * rowBytes, byteCount: rowBytes)
                }
            }
            frames.append(AnimatedImage.Frame(image: image, duration: Int(timestamp - previous)))
            previous = timestamp
        }
        guard frames.count == info.frameCount else {
            throw ImageDecodingError(.corrupt("\(frames.count) of the animation's \(info.frameCount) frames decoded"), format: .webp)
        }
        return AnimatedImage(canvas: info.canvas, frames: frames, loopCount: info.loopCount)
    }

    /// `animation` as an animated WebP: each frame straight BGRA into a `WebPPicture`, added at its
    /// start time, lossy at `quality` (lossless at 100).
    static func encodeAnimation(_ animation: AnimatedImage, quality: Int) throws(ImageEncodingError) -> [UInt8] {
        let canvas = animation.canvas
        guard canvas.width <= 16383, canvas.height <= 16383 else {
            throw ImageEncodingError(.tooLarge(canvas, maximumSide: 16383), format: .webp)
        }
        var options = WebPAnimEncoderOptions()
        guard WebPAnimEncoderOptionsInit(&options) != 0 else {
            throw ImageEncodingError(.encoderFailed("libwebp ABI mismatch"), format: .webp)
        }
        options.anim_params.loop_count = Int32(clamping: animation.loopCount)
        guard let encoder = WebPAnimEncoderNew(Int32(canvas.width), Int32(canvas.height), &options) else {
            throw ImageEncodingError(.encoderFailed("WebPAnimEncoderNew failed"), format: .webp)
        }
        defer { WebPAnimEncoderDelete(encoder) }
        var config = WebPConfig()
        guard WebPConfigInit(&config) != 0 else { throw ImageEncodingError(.encoderFailed("libwebp ABI mismatch"), format: .webp) }
        config.quality = Float(min(100, max(0, quality)))
        config.lossless = quality >= 100 ? 1 : 0
        var timestamp = 0
        for (index, frame) in animation.frames.enumerated() {
            guard frame.image.size == canvas else {
                throw ImageEncodingError(
                    .encoderFailed("frame \(index + 1) is \(frame.image.size), not the canvas' \(canvas)"), format: .webp)
            }
            let (pixels, _) = PixelOps.straightBGRA(frame.image)
            var picture = WebPPicture()
            guard WebPPictureInit(&picture) != 0 else { throw ImageEncodingError(.encoderFailed("libwebp ABI mismatch"), format: .webp) }
            picture.use_argb = 1
            picture.width = Int32(canvas.width)
            picture.height = Int32(canvas.height)
            defer { WebPPictureFree(&picture) }
            let imported = pixels.withUnsafeBufferPointer { WebPPictureImportBGRA(&picture, $0.baseAddress, Int32(canvas.width * 4)) }
            guard imported != 0, WebPAnimEncoderAdd(encoder, &picture, Int32(clamping: timestamp), &config) != 0 else {
                let message = WebPAnimEncoderGetError(encoder).map { String(cString: $0) } ?? "out of memory"
                throw ImageEncodingError(.encoderFailed("frame \(index + 1): \(message)"), format: .webp)
            }
            timestamp += max(0, frame.duration)
        }
        guard WebPAnimEncoderAdd(encoder, nil, Int32(clamping: timestamp), nil) != 0 else {
            throw ImageEncodingError(.encoderFailed("closing the animation failed"), format: .webp)
        }
        var data = WebPData()
        WebPDataInit(&data)
        defer { WebPDataClear(&data) }
        guard WebPAnimEncoderAssemble(encoder, &data) != 0, let bytes = data.bytes else {
            let message = WebPAnimEncoderGetError(encoder).map { String(cString: $0) } ?? "no data"
            throw ImageEncodingError(.encoderFailed("assembling the animation: \(message)"), format: .webp)
        }
        return Array(UnsafeBufferPointer(start: bytes, count: data.size))
    }
}
