#if RemoteSources
import CoreMetrics
import Logging
import Strata
import StrataS3

/// The shared tier's settings (`shared.*`): the bucket (`shared.s3.*`, the same keys as
/// `source.s3.*`'s bucket) and the tier's own limits. `nil` bucket: no shared tier.
public struct SharedTierSettings: Sendable, Equatable {
    package var bucket: BucketSettings?
    public var tier = S3SharedTier.Configuration()
    /// `shared.s3.maxConnections`: connections to the store at once.
    public var maxConnections = 32

    /// Whether a shared tier is configured.
    public var isEnabled: Bool { bucket != nil }

    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> SharedTierSettings {
        var settings = SharedTierSettings()
        settings.bucket = try BucketSettings.read("shared.s3", from: &reader)
        settings.tier.prefix = settings.bucket?.prefix ?? ""
        if settings.tier.prefix.isEmpty { settings.tier.prefix = "strata" }
        settings.maxConnections = try reader.integer("shared.s3.maxConnections", min: 1)
        settings.tier.timeout = try reader.duration("shared.timeout")
        settings.tier.uploadTimeout = try reader.duration("shared.uploadTimeout")
        settings.tier.pause = try reader.duration("shared.pause")
        settings.tier.maxObjectBytes = try reader.bytes("shared.maxObjectSize", min: 1 << 10)
        settings.tier.uploadQueueBytes = try reader.bytes("shared.uploadQueueSize")
        settings.tier.maxConcurrentUploads = try reader.integer("shared.maxConcurrentUploads", min: 1)
        do {
            try settings.tier.validate()
        } catch {
            throw reader.error(error.key, reason: "expected \(error.allowed)")
        }
        return settings
    }

    /// The tier, over its own client (`nil` when no bucket is configured).
    package func makeTier(logger: Logger, metricsFactory: (any MetricsFactory)?) throws(ConfigurationError) -> S3SharedTier? {
        guard let bucket else { return nil }
        do {
            let store = try S3ObjectStore(
                endpoint: bucket.endpoint, credentials: bucket.credentials, timeout: tier.uploadTimeout,
                maxObjectBytes: tier.maxObjectBytes, maxConnections: maxConnections)
            return try S3SharedTier(store: store, configuration: tier, logger: logger, metricsFactory: metricsFactory)
        } catch {
            throw ConfigurationError(key: error.key, value: error.value, reason: "expected \(error.allowed)")
        }
    }
}
#else
import Strata

/// The shared tier's settings in a build without the `RemoteSources` trait (`make run`): there
/// is none, and `shared.s3.bucket` is refused naming the key (``RemoteSourcesLeftOut``).
public struct SharedTierSettings: Sendable, Equatable {
    /// Whether a shared tier is configured: never in this build.
    public var isEnabled: Bool { false }

    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> SharedTierSettings {
        let _: Never? = try RemoteSourcesLeftOut.refuse("shared.s3.bucket", from: &reader)
        return SharedTierSettings()
    }
}
#endif
