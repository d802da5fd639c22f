import StrataBase
import StrataCodecs
import StrataTiers
/// Why ``ImageCache`` could not produce an image. Every case names the key; none of them stops
/// the engine serving other requests.
public enum ImageCacheError: Error, Sendable, CustomStringConvertible {
    /// The request itself is invalid (an empty box, a tolerance outside 0...1, an over-long key).
    case invalidRequest(key: String, reason: String)
    /// The source has no original for the key (remembered for the configured negative TTL).
    case notFound(key: String)
    /// The original could not be decoded (corrupt, truncated, too large, unsupported).
    case decoding(key: String, ImageDecodingError)
    /// The source failed (I/O, an origin error, a refused key).
    case source(SourceError)
    /// A tier's own files failed where the request could not do without them (a pyramid's
    /// table, emptying the disk tier): the tier, the key and the call are named.
    case tier(TierFailure)
    /// No tier can serve the request: there is no source and no cached variant.
    case noSource(key: String)
    /// The requesting task (or the prefetch handle) was cancelled.
    case cancelled(key: String)
    /// The engine was shut down.
    case shutDown
    /// The render would hold more bytes than the engine's whole `render.memoryLimit`
    /// (``ImageCache/Options/memoryLimit``): it never runs under this limit.
    case overMemoryLimit(key: String, MemoryBudgetError)

    public var description: String {
        switch self {
        case .invalidRequest(let key, let reason): return "\(key.debugDescription): invalid request: \(reason)"
        case .notFound(let key): return "\(key.debugDescription): no such image in the source"
        case .decoding(let key, let error): return "\(key.debugDescription): \(error)"
        case .source(let error): return error.description
        case .tier(let failure): return failure.description
        case .noSource(let key): return "\(key.debugDescription): not cached, and the engine has no source"
        case .cancelled(let key): return "\(key.debugDescription): cancelled"
        case .shutDown: return "the image cache is shut down"
        case .overMemoryLimit(let key, let error): return "\(key.debugDescription): \(error)"
        }
    }

    /// A short, stable name of the case (metrics labels, logs).
    public var kind: String {
        switch self {
        case .invalidRequest: return "invalid_request"
        case .notFound: return "not_found"
        case .decoding: return "decoding"
        case .source: return "source"
        case .tier: return "tier"
        case .noSource: return "no_source"
        case .cancelled: return "cancelled"
        case .shutDown: return "shut_down"
        case .overMemoryLimit: return "over_memory_limit"
        }
    }

    /// Maps a source-tier error to the engine's.
    package init(_ error: SourceError) {
        switch error.reason {
        case .notFound: self = .notFound(key: error.key)
        case .decoding(let decoding): self = .decoding(key: error.key, decoding)
        case .cancelled: self = .cancelled(key: error.key)
        default: self = .source(error)
        }
    }
}
