import CoreMetrics
import Logging
import Strata
#if RemoteSources
import StrataHTTPOrigin
import StrataS3
#endif

/// An ``ImageCache`` built from a ``StrataConfiguration``, with what lives beside it: the one
/// pool that the engine, the disk tier's write-behind, the image tables, a directory source and
/// the memory-pressure monitor share (`lanes.urgent` and `lanes.prefetch` wide), and the source
/// to shut down. Besides that pool it starts one thread, the disk tier's watcher. Keep it for as
/// long as the engine serves; call ``shutdown()`` before the process exits.
public final class ConfiguredImageCache: Sendable {
    public let cache: ImageCache
    /// The tile pyramids of big originals (`iiif.pyramidPath`), `nil` when unset.
    public let pyramids: TilePyramids?
    #if RemoteSources
    /// The fleet's shared tier, when `shared.s3.bucket` is set.
    public let sharedTier: S3SharedTier?
    #endif
    public let configuration: StrataConfiguration
    package let monitor: MemoryPressureMonitor?
    package let shutdownSource: @Sendable () async -> Void
    /// The shared pool (stopped when this object goes away).
    package let pool: BlockingPoolOwner<Void>

    /// Opens the tiers the configuration names (memory always; disk, tables and the source when
    /// set) and starts the engine. Throws a ``ConfigurationError`` naming the key whose value
    /// cannot be used (a directory that cannot be opened, threads refused).
    /// `metricsFactory` receives the engine's metrics (default: the process's bootstrapped
    /// backend).
    public init(
        _ configuration: StrataConfiguration, logger: Logger = Logger(label: "strata.engine"),
        metricsFactory: (any MetricsFactory)? = nil
    ) throws(ConfigurationError) {
        self.configuration = configuration
        let shared: BlockingPool<Void>
        do {
            shared = try BlockingPool(
                width: configuration.urgentWidth, prefetchWidth: configuration.prefetchWidth, name: "strata-engine", makeContext: {})
        } catch {
            throw ConfigurationError(
                key: "lanes.urgent", value: "\(configuration.urgentWidth)", reason: "cannot start the threads: \(error)")
        }
        pool = BlockingPoolOwner(shared)
        let memory = ImageMemoryTier(configuration: configuration.memory)
        var disk: DiskTier?
        if let path = configuration.diskPath {
            var settings = configuration.disk
            settings.logger = logger
            do {
                disk = try DiskTier(directory: path, configuration: settings, pool: shared)
            } catch {
                throw ConfigurationError(key: "disk.path", value: path, reason: "cannot open the disk tier: \(error)")
            }
        }
        var tables: ImageTableCache?
        if let path = configuration.tablesPath {
            do {
                tables = try ImageTableCache(
                    directory: path, formats: configuration.tableFormats, drawingPool: shared, logger: logger)
            } catch {
                throw ConfigurationError(key: "tables.path", value: path, reason: "cannot open the image tables: \(error)")
            }
        }
        let source: (any ImageSource)?
        switch configuration.source {
        case .none:
            source = nil
            shutdownSource = {}
        case .directory(let root):
            do {
                source = try DirectorySource(root: root, maxFileBytes: configuration.sourceMaxFileBytes, pool: shared)
            } catch {
                throw ConfigurationError(key: "source.directory", value: root, reason: "cannot open the directory: \(error)")
            }
            shutdownSource = {}
        #if RemoteSources
        case .http(let settings):
            let origin: HTTPSource
            do {
                origin = try HTTPSource(configuration: settings, logger: logger)
            } catch {
                throw ConfigurationError(key: error.key, value: error.value, reason: "expected \(error.allowed)")
            }
            source = origin
            shutdownSource = { try? await origin.shutdown() }
        case .s3(let settings):
            let bucket: S3Source
            do {
                bucket = try S3Source(configuration: settings, logger: logger)
            } catch {
                throw ConfigurationError(key: error.key, value: error.value, reason: "expected \(error.allowed)")
            }
            source = bucket
            shutdownSource = { try? await bucket.shutdown() }
        #endif
        }
        var options = ImageCache.Options()
        options.defaultTolerance = configuration.tolerance
        options.width = configuration.urgentWidth
        options.prefetchWidth = configuration.prefetchWidth
        options.revalidateAfter = configuration.revalidateAfter
        options.negativeTTL = configuration.negativeTTL
        options.negativeCapacity = configuration.negativeCapacity
        options.renderAhead = configuration.renderAhead
        options.memoryLimit = configuration.renderMemoryLimit
        // The process's pixel buffers: one cache for every engine in it.
        PixelMemory.shared.cacheLimit = configuration.bufferCacheSize
        options.tracing = EngineTracing(isEnabled: configuration.tracing.enabled, includesKeys: configuration.tracing.includeKeys)
        options.logger = logger
        options.metricsFactory = metricsFactory
        #if RemoteSources
        sharedTier = try configuration.shared.makeTier(logger: logger, metricsFactory: metricsFactory)
        let sharedTier = self.sharedTier
        #else
        let sharedTier: (any RemoteCacheTier)? = nil
        #endif
        cache = try ImageCache(
            memory: memory, disk: disk, tables: tables, shared: sharedTier, source: source, render: configuration.render,
            options: options, pool: shared)
        if let path = configuration.iiif.pyramidPath {
            do {
                pyramids = try TilePyramids(cache: cache, directory: path, settings: configuration.iiif.pyramidSettings)
            } catch {
                throw ConfigurationError(key: "iiif.pyramidPath", value: path, reason: "cannot open the pyramids' table: \(error)")
            }
        } else {
            pyramids = nil
        }
        monitor = configuration.memoryPressure.map { MemoryPressureMonitor(target: memory, policy: $0, pool: shared) }
    }

    /// Stops the pressure monitor, publishes the disk tier's queued writes (on the pool, and on
    /// the calling thread when no drain runs), closes it, writes the shared tier's queued uploads
    /// (10 s at most) and shuts the source's and the shared tier's clients down.
    public func shutdown() async {
        monitor?.stop()
        cache.disk?.flush()
        cache.disk?.close()
        #if RemoteSources
        await sharedTier?.shutdown()
        #endif
        await shutdownSource()
    }
}
