import StrataBase

/// An animated GIF or WebP decoded frame by frame: each frame the whole canvas as it is shown
/// (the GIF's disposal methods and offsets, WebP's blending, already applied), premultiplied
/// BGRA, with its duration; and the loop count.
///
/// Use it to resize an animation and keep it animated (``map(_:)``, then
/// ``encodedAsWebP(quality:)``). Every frame is held at once: ``info(_:maxFrames:)`` reads the frame count
/// and the canvas first, without decoding a frame, and ``decode(_:limits:)`` refuses an
/// animation past its ``AnimationLimits`` before it allocates any frame (a GIF of thousands of
/// frames on a huge canvas is a few kilobytes). Cost: every frame's decode, and canvas × frames
/// × 4 bytes.
public struct AnimatedImage: Sendable {
    /// One frame: the canvas as shown, and for how long.
    public struct Frame: Sendable {
        public var image: PixelImage
        /// Milliseconds the frame is shown (as the file says: a GIF's 0 stays 0, which browsers
        /// show for 100 ms).
        public var duration: Int

        public init(image: PixelImage, duration: Int) {
            self.image = image
            self.duration = duration
        }
    }

    public var canvas: PixelSize
    public var frames: [Frame]
    /// How many times the animation plays; 0: forever.
    public var loopCount: Int

    public init(canvas: PixelSize, frames: [Frame], loopCount: Int) {
        self.canvas = canvas
        self.frames = frames
        self.loopCount = loopCount
    }

    /// The same animation with `transform` applied to every frame (a resize, operations); the
    /// canvas becomes the first frame's new size.
    public func map(_ transform: (PixelImage) throws(ImageDecodingError) -> PixelImage) throws(ImageDecodingError) -> AnimatedImage {
        var frames: [Frame] = []
        frames.reserveCapacity(self.frames.count)
        for frame in self.frames { frames.append(Frame(image: try transform(frame.image), duration: frame.duration)) }
        return AnimatedImage(canvas: frames.first?.image.size ?? canvas, frames: frames, loopCount: loopCount)
    }
}

/// What an animation is before any frame is decoded.
public struct AnimationInfo: Sendable, Hashable {
    public var format: ImageFormat
    public var canvas: PixelSize
    public var frameCount: Int
    /// 0: forever.
    public var loopCount: Int

    public init(format: ImageFormat, canvas: PixelSize, frameCount: Int, loopCount: Int) {
        self.format = format
        self.canvas = canvas
        self.frameCount = frameCount
        self.loopCount = loopCount
    }
}

/// The most an animation may hold when decoded whole (`source.maxFrames`, and a bound on
/// frames × canvas pixels), checked before any frame is decoded.
public struct AnimationLimits: Sendable, Hashable {
    public var maxFrames: Int
    /// Frames × canvas pixels (and, for a GIF, the sum of its frames' own areas, which its LZW
    /// decode costs).
    public var maxTotalPixels: Int

    public init(maxFrames: Int = 1000, maxTotalPixels: Int = 1 << 28) {
        precondition(maxFrames > 0 && maxTotalPixels > 0, "animation limits must be positive")
        self.maxFrames = maxFrames
        self.maxTotalPixels = maxTotalPixels
    }

    /// Throws when `info` (or a GIF's `frameArea`) is past the limits.
    public func check(_ info: AnimationInfo, frameArea: Int = 0) throws(ImageDecodingError) {
        if info.frameCount > maxFrames {
            throw ImageDecodingError(.tooManyFrames(frames: info.frameCount, limit: maxFrames), format: info.format)
        }
        let total = info.frameCount.multipliedReportingOverflow(by: info.canvas.width * info.canvas.height)
        if total.overflow || total.partialValue > maxTotalPixels || frameArea > maxTotalPixels {
            throw ImageDecodingError(
                .tooLarge(pixels: total.overflow ? Int.max : max(total.partialValue, frameArea), limit: maxTotalPixels), format: info.format
            )
        }
    }
}

extension AnimatedImage {
    /// The format, canvas, frame count and loop count of an animated GIF or WebP (a still one
    /// has one frame), read without decoding a frame: a GIF's image data is skipped, a WebP's
    /// chunks are listed. A GIF's count stops one past `maxFrames`.
    public static func info(_ bytes: UnsafeRawBufferPointer, maxFrames: Int = .max) throws(ImageDecodingError) -> AnimationInfo {
        switch ImageFormatDetector.detect(bytes) {
        case .gif: return try GIFCodec.animationInfo(bytes, maxFrames: maxFrames).info
        case .webp: return try WebPCodec.animationInfo(bytes)
        case let other:
            throw ImageDecodingError(.unsupported("only GIF and WebP animations are decoded frame by frame"), format: other)
        }
    }

    /// Every frame of an animated GIF or WebP, checked against `limits` first.
    public static func decode(
        _ bytes: UnsafeRawBufferPointer, limits: AnimationLimits = AnimationLimits()
    ) throws(ImageDecodingError) -> AnimatedImage {
        switch ImageFormatDetector.detect(bytes) {
        case .gif:
            let (info, area) = try GIFCodec.animationInfo(bytes, maxFrames: limits.maxFrames)
            try limits.check(info, frameArea: area)
            return try GIFCodec.decodeAnimation(bytes, info: info)
        case .webp:
            let info = try WebPCodec.animationInfo(bytes)
            try limits.check(info)
            return try WebPCodec.decodeAnimation(bytes, info: info)
        case let other:
            throw ImageDecodingError(.unsupported("only GIF and WebP animations are decoded frame by frame"), format: other)
        }
    }

    /// The animation as an animated WebP (lossy at `quality`, lossless at 100), with its frames'
    /// durations and its loop count. libwebp's animation encoder keeps each frame's changed
    /// rectangle only.
    public func encodedAsWebP(quality: Int) throws(ImageEncodingError) -> [UInt8] {
        try WebPCodec.encodeAnimation(self, quality: quality)
    }
}
