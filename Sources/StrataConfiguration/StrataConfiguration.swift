import Strata
#if RemoteSources
import StrataHTTPOrigin
import StrataS3
#endif

/// Everything an operator can set, read and checked in one go from ``ConfigurationLayers``
/// (command line > environment > file > documented defaults), mapped onto the tiers' own
/// `Configuration` values and the engine's options. No tier reads the environment itself.
///
/// Reading is all-or-nothing: the first value that does not parse or validate throws a
/// ``ConfigurationError`` naming the dotted key, the value, where it came from and what is
/// allowed. ``resolved`` keeps each value's text and origin for `strata config`.
/// Cost: a few hundred dictionary lookups; read at start-up and on each reload.
public struct StrataConfiguration: Sendable {
    /// Where originals come from.
    public enum SourceSetting: Sendable, Equatable {
        /// No source: only cached images are served.
        case none
        /// ``DirectorySource`` over a directory.
        case directory(String)
        #if RemoteSources
        /// An HTTP origin (``HTTPSource``).
        case http(HTTPSource.Configuration)
        /// An S3-compatible bucket (``S3Source``).
        case s3(S3Source.Configuration)
        #endif
    }

    /// A value in force and where it came from.
    public struct Resolved: Sendable, Hashable {
        public var key: ConfigurationKey
        /// The value as text (`<redacted>` for secrets), `nil` when unset.
        public var value: String?
        public var origin: ConfigurationOrigin
    }

    public var tolerance: Double
    public var memory: ImageMemoryTier.Configuration
    /// `nil` when `memory.pressure.enabled` is false.
    public var memoryPressure: MemoryPressurePolicy?
    public var diskPath: String?
    public var disk: DiskTier.Configuration
    public var tablesPath: String?
    public var tableFormats: [ImageTableFormat]
    public var urgentWidth: Int
    public var prefetchWidth: Int
    /// How originals are rendered (`source.maxPixels`, `source.decodeHeadroom`,
    /// `source.resampleThreads`).
    public var render: RenderSettings
    /// `render.memoryLimit` (``ImageCache/Options/memoryLimit``); `nil` when `off`.
    public var renderMemoryLimit: Int?
    /// `render.bufferCacheSize` (``PixelMemory/cacheLimit``).
    public var bufferCacheSize: Int = PixelMemory.defaultCacheLimit
    /// `process.allocator`: `strata serve`'s general allocator, `jemalloc` or `system`.
    public var allocator = "jemalloc"
    /// `color.output`: the colours variants are rendered in (``ColourOutput``); reloads.
    public var colourOutput: ColourOutput = .srgb
    public var source: SourceSetting
    /// `source.maxFileSize`: the largest file `source.directory` reads (an original is held in
    /// memory while it is decoded).
    public var sourceMaxFileBytes = 256 << 20
    public var revalidateAfter: Duration?
    public var negativeTTL: Duration
    /// ``ImageCache/Options/negativeCapacity``.
    public var negativeCapacity: Int
    /// ``ImageCache/Options/renderAhead``; `nil` when `off`.
    public var renderAhead: Double?
    /// `strata serve`'s settings (`http.*`).
    public var http: HTTPServiceSettings
    /// `strata serve`'s IIIF Image API settings (`iiif.*`).
    public var iiif: IIIFSettings
    /// `strata serve`'s thumbor route (`thumbor.*`).
    public var thumbor = ThumborSettings()
    /// `strata serve`'s tracing (`tracing.*`).
    public var tracing = TracingSettings()
    /// The fleet's shared tier (`shared.*`).
    public var shared = SharedTierSettings()
    /// Every key's value and origin, in ``keys`` order.
    public var resolved: [Resolved]

    /// The settings a reload may change (``ImageCache/reconfigure(_:)``).
    public var reloadableSettings: ReloadableSettings {
        ReloadableSettings(
            tolerance: tolerance, urgentWidth: urgentWidth, prefetchWidth: prefetchWidth, memory: memory,
            diskByteLimit: diskPath == nil ? nil : disk.byteLimit, renderMemoryLimit: renderMemoryLimit)
    }

    /// Reads and checks every key from `layers`.
    public init(from layers: ConfigurationLayers) throws(ConfigurationError) {
        try self.init(snapshot: layers.snapshot())
    }

    /// Reads and checks every key from the sources' values at one moment.
    package init(snapshot: ConfigurationLayers.Snapshot) throws(ConfigurationError) {
        var reader = KeyReader(snapshot: snapshot)
        tolerance = try reader.number("tolerance", in: 0...1)
        memory = ImageMemoryTier.Configuration(
            costLimit: try reader.bytes("memory.costLimit"), countLimit: try reader.integer("memory.countLimit", min: 0),
            maxEntryShare: try reader.number("memory.entryShare", in: 0...1),
            fileMappingShare: try reader.number("memory.fileMappingShare", in: 0...1))
        let pressure = MemoryPressurePolicy(
            cgroupHighWatermark: try reader.optionalNumber("memory.pressure.cgroupHighWatermark", in: 0...1),
            cgroupTargetFraction: try reader.number("memory.pressure.cgroupTarget", in: 0...1),
            someAvg10Threshold: try reader.optionalNumber("memory.pressure.someAvg10", in: 0...100),
            fullAvg10Threshold: try reader.optionalNumber("memory.pressure.fullAvg10", in: 0...100),
            psiTrimShare: try reader.number("memory.pressure.trimShare", in: 0...1),
            interval: try reader.duration("memory.pressure.interval"))
        do { try pressure.validate() } catch { throw reader.explain(error, section: "memory.pressure.") }
        memoryPressure = try reader.bool("memory.pressure.enabled") ? pressure : nil

        diskPath = try reader.path("disk.path")
        disk = DiskTier.Configuration()
        disk.byteLimit = try reader.bytes("disk.byteLimit", min: 1)
        disk.checksumPolicy = try reader.choice("disk.checksum", DiskTier.ChecksumPolicy.allCases.map { ($0.rawValue, $0) })
        disk.durable = try reader.bool("disk.durable")
        tablesPath = try reader.path("tables.path")
        tableFormats = try reader.list("tables.formats").map { text throws(ConfigurationError) in
            try reader.tableFormat(text)
        }
        if tablesPath == nil, !tableFormats.isEmpty {
            throw reader.error("tables.path", reason: "must be set when tables.formats lists formats")
        }
        if tablesPath != nil, tableFormats.isEmpty {
            throw reader.error("tables.formats", reason: "must list at least one format when tables.path is set")
        }
        var names = Set<String>()
        for format in tableFormats where !names.insert(format.name).inserted {
            throw reader.error("tables.formats", reason: "the format name \(format.name) appears twice")
        }

        urgentWidth = try reader.threads("lanes.urgent")
        prefetchWidth = try reader.threads("lanes.prefetch")
        render = RenderSettings(
            maxPixels: try reader.integer("source.maxPixels", min: 1),
            decodeHeadroom: try reader.number("source.decodeHeadroom", in: 1...64),
            resampleThreads: try reader.threads("source.resampleThreads"))
        renderMemoryLimit = try reader.memoryLimit("render.memoryLimit")
        bufferCacheSize = try reader.bytes("render.bufferCacheSize")
        allocator = try reader.choice("process.allocator", [("jemalloc", "jemalloc"), ("system", "system")])
        colourOutput = try reader.choice("color.output", ColourOutput.allCases.map { ($0.rawValue, $0) })
        let directory = try reader.path("source.directory")
        sourceMaxFileBytes = try reader.bytes("source.maxFileSize", min: 1)
        #if RemoteSources
        let origin = try HTTPSource.Configuration.read(from: &reader)
        let bucket = try S3Source.Configuration.read(from: &reader)
        #else
        let origin: Never? = try RemoteSourcesLeftOut.refuse("source.http.baseURL", from: &reader)
        let bucket: Never? = try RemoteSourcesLeftOut.refuse("source.s3.bucket", from: &reader)
        #endif
        switch (directory, origin, bucket) {
        case (let directory?, nil, nil): source = .directory(directory)
        #if RemoteSources
        case (nil, let http?, nil): source = .http(http)
        case (nil, nil, let s3?): source = .s3(s3)
        #endif
        case (nil, nil, nil): source = .none
        default:
            let given = [
                (directory != nil, "source.directory"), (origin != nil, "source.http.baseURL"), (bucket != nil, "source.s3.bucket"),
            ]
            .filter(\.0).map(\.1)
            throw reader.error(given[0], reason: "set one source of originals, not \(given.joined(separator: " and "))")
        }
        revalidateAfter = try reader.optionalDuration("revalidateAfter")
        negativeTTL = try reader.duration("negativeTTL")
        negativeCapacity = try reader.integer("negativeCapacity", min: 1)
        renderAhead = try reader.optionalNumber("renderAhead", in: 0...1)
        http = try HTTPServiceSettings.read(from: &reader)
        iiif = try IIIFSettings.read(from: &reader)
        if iiif.pyramidPath == nil, !iiif.pyramidsOff, let diskPath, iiif.tileSize % 2 == 0, iiif.tileSize <= 4096 {
            // Big originals work by default: with a disk tier, their pyramids go beside it.
            iiif.pyramidPath = IIIFSettings.defaultPyramidPath(besideDisk: diskPath)
            iiif.pyramidPathIsDefault = true
        }
        thumbor = try ThumborSettings.read(from: &reader)
        shared = try SharedTierSettings.read(from: &reader)
        tracing = try TracingSettings.read(from: &reader)
        let order = Dictionary(uniqueKeysWithValues: Self.keys.enumerated().map { ($1.name, $0) })
        resolved = reader.resolved.sorted { order[$0.key.name, default: 0] < order[$1.key.name, default: 0] }
    }
}
