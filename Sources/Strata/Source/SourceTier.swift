/// The bottom tier: fetches an original from an ``ImageSource`` and renders the exact requested
/// image (header check → shrink-on-load decode → Lanczos-3 → style conversion).
///
/// Rendering runs on a dedicated ``BlockingPool`` (one ``ImageRenderer`` with its reusable
/// decode buffer per thread), never on Swift's cooperative pool. Safe to call from any number
/// of tasks; at most `width` renders run at once and the rest queue.
public final class SourceTier: Sendable {
    /// Settings of the source tier.
    public struct Configuration: Sendable, Hashable {
        /// Images with more pixels than this are refused from their header (default 100 MP).
        public var maxPixels: Int
        /// Rendering threads (default: the number of cores).
        public var width: Int
        /// See ``ImageRenderer/decodeHeadroom`` (default 2).
        public var decodeHeadroom: Double
        /// Threads one large resample may use (``Resampler/threads``; default 2, and never more
        /// bands than cores); above 1, a progressive JPEG also decodes on two threads while a
        /// core is idle (``ImageDecoder/splitsProgressiveJPEG``). 1 keeps every render on its own
        /// thread.
        public var resampleThreads: Int

        /// 2: a large reduction (a 2560×1600 photo to 1024 px) in two bands, about half the time
        /// on a machine with an idle core.
        public static let defaultResampleThreads = 2

        public init(
            maxPixels: Int = DecodingLimits().maxPixels, width: Int = SourceTier.coreCount,
            decodeHeadroom: Double = 2.0, resampleThreads: Int = Configuration.defaultResampleThreads
        ) {
            self.maxPixels = maxPixels
            self.width = width
            self.decodeHeadroom = decodeHeadroom
            self.resampleThreads = resampleThreads
        }

        /// Checks the values; throws a ``ConfigurationError`` naming the bad one.
        public func validate() throws(ConfigurationError) {
            if maxPixels <= 0 { throw .init(key: "maxPixels", value: "\(maxPixels)", reason: "must be ≥ 1 pixel") }
            if width < 1 { throw .init(key: "width", value: "\(width)", reason: "must be ≥ 1 thread") }
            if !(decodeHeadroom >= 1 && decodeHeadroom.isFinite) {
                throw .init(key: "decodeHeadroom", value: "\(decodeHeadroom)", reason: "must be a finite number ≥ 1")
            }
            if !(1...1024).contains(resampleThreads) {
                throw .init(key: "resampleThreads", value: "\(resampleThreads)", reason: "must be 1 to 1024 threads")
            }
        }
    }

    /// A rendered image and the version of the original it came from.
    public struct Rendered: Sendable {
        public var image: PixelImage
        public var sourceVersion: String
        /// The original's size (after orientation): `image` is the whole original when it has
        /// this size in `fit` mode.
        public var originalSize: PixelSize
    }

    public let source: any ImageSource
    public let configuration: Configuration
    /// The rendering threads: the tier's own, or the engine's (shared with its other blocking work).
    public let pool: BlockingPool<ImageRenderer>
    /// Set when the tier made its own pool (shut down on deinit).
    private let ownsPool: Bool

    /// Starts the rendering threads; throws only when the system refuses a thread.
    public init(source: any ImageSource, configuration: Configuration = Configuration()) throws(SystemCallError) {
        do { try configuration.validate() } catch { preconditionFailure("\(error)") }
        self.source = source
        self.configuration = configuration
        self.pool = try BlockingPool(width: configuration.width, name: "strata-render") {
            SourceTier.makeRenderer(configuration)
        }
        self.ownsPool = true
    }

    /// A source tier rendering on `pool` (whose renderers carry their own limits; make them
    /// with ``makeRenderer(_:)``), which the caller owns and shuts down.
    public init(source: any ImageSource, configuration: Configuration = Configuration(), pool: BlockingPool<ImageRenderer>) {
        do { try configuration.validate() } catch { preconditionFailure("\(error)") }
        self.source = source
        self.configuration = configuration
        self.pool = pool
        self.ownsPool = false
    }

    /// A renderer configured as `configuration` says (for the threads of a shared pool).
    public static func makeRenderer(_ configuration: Configuration) -> ImageRenderer {
        ImageRenderer(
            limits: DecodingLimits(maxPixels: configuration.maxPixels), decodeHeadroom: configuration.decodeHeadroom,
            resampleThreads: configuration.resampleThreads)
    }

    deinit { if ownsPool { pool.shutdown() } }

    /// Fetches `key` and renders it for `request`.
    public func image(forKey key: String, request: RenderRequest) async throws(SourceError) -> Rendered {
        let data = try await source.fetch(key: key)
        try Task.checkCancellation(key: key)
        let bytes = data.bytes
        do {
            let (image, originalSize) = try await pool.run { (renderer) throws(ImageDecodingError) -> (PixelImage, PixelSize) in
                try rethrowingTyped(ImageDecodingError.self) {
                    try bytes.withUnsafeBytes { try renderer.renderWithOriginalSize($0, request: request) }
                }
            }
            return Rendered(image: image, sourceVersion: data.version, originalSize: originalSize)
        } catch {
            switch error {
            case .failed(let error): throw SourceError(key: key, reason: .decoding(error))
            case .cancelled: throw SourceError(key: key, reason: .cancelled)
            case .shutDown: throw SourceError(key: key, reason: .failed("the rendering pool is shut down"))
            }
        }
    }

    /// The number of online cores.
    public static var coreCount: Int { Processors.online }
}

extension Task where Success == Never, Failure == Never {
    /// Throws a ``SourceError`` when the current task is cancelled.
    static func checkCancellation(key: String) throws(SourceError) {
        if Task.isCancelled { throw SourceError(key: key, reason: .cancelled) }
    }
}

#if canImport(Glibc)
import Glibc
#endif
