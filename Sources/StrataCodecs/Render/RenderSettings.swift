import StrataBase
/// How the engine renders originals: the pixel limit read from each header, the shrink-on-load
/// headroom and the threads one large resample may use. (How many renders run at once is the
/// engine's pool width, `ImageCache.Options.width`.)
public struct RenderSettings: Sendable, Hashable {
    /// Images with more pixels than this are refused from their header (default 100 MP).
    public var maxPixels: Int
    /// See ``ImageRenderer/decodeHeadroom`` (default 2).
    public var decodeHeadroom: Double
    /// Threads one large resample may use (``/StrataBase/Resampler/threads``; default 2, and never more
    /// bands than cores); above 1, a progressive JPEG also decodes on two threads while a core
    /// is idle (``ImageDecoder/splitsProgressiveJPEG``). 1 keeps every render on its own thread.
    public var resampleThreads: Int

    /// 2: a large reduction (a 2560×1600 photo to 1024 px) in two bands, about half the time on
    /// a machine with an idle core.
    public static let defaultResampleThreads = 2

    public init(
        maxPixels: Int = DecodingLimits().maxPixels, decodeHeadroom: Double = 2.0,
        resampleThreads: Int = RenderSettings.defaultResampleThreads
    ) {
        self.maxPixels = maxPixels
        self.decodeHeadroom = decodeHeadroom
        self.resampleThreads = resampleThreads
    }

    /// Checks the values; throws a ``/StrataBase/ConfigurationError`` naming the bad one.
    public func validate() throws(ConfigurationError) {
        if maxPixels <= 0 { throw .init(key: "maxPixels", value: "\(maxPixels)", reason: "must be ≥ 1 pixel") }
        if !(decodeHeadroom >= 1 && decodeHeadroom.isFinite) {
            throw .init(key: "decodeHeadroom", value: "\(decodeHeadroom)", reason: "must be a finite number ≥ 1")
        }
        if !(1...1024).contains(resampleThreads) {
            throw .init(key: "resampleThreads", value: "\(resampleThreads)", reason: "must be 1 to 1024 threads")
        }
    }

    /// A renderer with these settings (one per running job: renderers are not thread-safe).
    public func makeRenderer() -> ImageRenderer {
        ImageRenderer(
            limits: DecodingLimits(maxPixels: maxPixels), decodeHeadroom: decodeHeadroom, resampleThreads: resampleThreads)
    }
}
