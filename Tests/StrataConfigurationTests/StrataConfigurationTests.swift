import Foundation
import Logging
import Testing

@testable import Strata
@testable import StrataConfiguration
@testable import StrataHTTPOrigin
import StrataTestSupport

/// Writes `text` to `name` in `dir` and returns the path.
@discardableResult
func writeConfig(_ text: String, named name: String = "strata.yaml", in dir: TempDirectory) throws -> String {
    let path = dir.path + "/" + name
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

@Suite("Configuration: sources, units, keys")
struct StrataConfigurationTests {
    @Test func precedenceIsFileThenEnvironmentThenCommandLine() async throws {
        let dir = TempDirectory()
        let file = try writeConfig(
            """
            tolerance: 0.3
            memory:
              costLimit: 64MiB
              countLimit: 700
            lanes:
              urgent: 2
            negativeTTL: 5s
            """, in: dir)
        let layers = try await ConfigurationLayers(
            arguments: ["--lanes-urgent", "4", "--memory-count-limit=900"],
            environment: ["STRATA_MEMORY_COST_LIMIT": "32MiB", "STRATA_LANES_URGENT": "3", "HOME": "/root"],
            filePath: file)
        let configuration = try StrataConfiguration(from: layers)
        #expect(configuration.tolerance == 0.3)
        #expect(configuration.memory.costLimit == 32 << 20, "environment beats file")
        #expect(configuration.memory.countLimit == 900, "command line beats file")
        #expect(configuration.urgentWidth == 4, "command line beats environment and file")
        #expect(configuration.negativeTTL == .seconds(5))
        #expect(configuration.prefetchWidth == 1, "default")
        let origins = Dictionary(uniqueKeysWithValues: configuration.resolved.map { ($0.key.name, $0.origin) })
        #expect(origins["tolerance"] == .file(file))
        #expect(origins["memory.costLimit"] == .environment("STRATA_MEMORY_COST_LIMIT"))
        #expect(origins["lanes.urgent"] == .commandLine("--lanes-urgent"))
        #expect(origins["memory.countLimit"] == .commandLine("--memory-count-limit"))
        #expect(origins["lanes.prefetch"] == .default)
    }

    @Test func aJSONFileIsReadToo() async throws {
        let dir = TempDirectory()
        let file = try writeConfig(
            #"{"tolerance": 0.1, "disk": {"byteLimit": "2GiB", "durable": false}, "lanes": {"prefetch": 2}}"#, named: "s.json",
            in: dir)
        let configuration = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], filePath: file))
        #expect(configuration.tolerance == 0.1)
        #expect(configuration.disk.byteLimit == 2 << 30)
        #expect(configuration.disk.durable == false)
        #expect(configuration.prefetchWidth == 2, "a JSON number is read as the value")
    }

    @Test func humanUnits() throws {
        #expect(ConfigurationUnits.bytes("512MiB") == 512 << 20)
        #expect(ConfigurationUnits.bytes("1.5 GiB") == 3 << 29)
        #expect(ConfigurationUnits.bytes("64KB") == 64_000)
        #expect(ConfigurationUnits.bytes("4096") == 4096)
        #expect(ConfigurationUnits.bytes("2g") == 2 << 30)
        #expect(ConfigurationUnits.bytes("1TB") == 1_000_000_000_000)
        for bad in ["", "MiB", "-1MiB", "12 parsecs", "1.5", "1e400GiB", "9999999TiB"] {
            #expect(ConfigurationUnits.bytes(bad) == nil, "\(bad)")
        }
        #expect(ConfigurationUnits.duration("30s") == .seconds(30))
        #expect(ConfigurationUnits.duration("250ms") == .milliseconds(250))
        #expect(ConfigurationUnits.duration("2m") == .seconds(120))
        #expect(ConfigurationUnits.duration("1.5h") == .seconds(5400))
        #expect(ConfigurationUnits.duration("10") == .seconds(10))
        #expect(ConfigurationUnits.duration("40us") == .microseconds(40))
        for bad in ["", "s", "-3s", "3 fortnights"] {
            #expect(ConfigurationUnits.duration(bad) == nil, "\(bad)")
        }
        #expect(ConfigurationUnits.format(bytes: 512 << 20) == "512MiB")
        #expect(ConfigurationUnits.format(.milliseconds(1500)) == "1500ms")
    }

    @Test func unitsThroughEverySource() async throws {
        let layers = try await ConfigurationLayers(
            arguments: ["--disk-byte-limit", "1.5GiB", "--revalidate-after", "90s"],
            environment: ["STRATA_MEMORY_PRESSURE_INTERVAL": "250ms", "STRATA_SOURCE_HTTP_MAX_BODY_SIZE": "8MB"])
        let configuration = try StrataConfiguration(from: layers)
        #expect(configuration.disk.byteLimit == 3 << 29)
        #expect(configuration.revalidateAfter == .seconds(90))
        #expect(configuration.memoryPressure?.interval == .milliseconds(250))
    }

    @Test func theDocumentedDefaultsAreTheTiersDefaults() async throws {
        let configuration = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:]))
        #expect(configuration.tolerance == SizeQuery.defaultTolerance)
        #expect(configuration.memory == ImageMemoryTier.Configuration())
        #expect(configuration.memoryPressure == MemoryPressurePolicy())
        #expect(configuration.disk.byteLimit == DiskTier.Configuration().byteLimit)
        #expect(configuration.disk.checksumPolicy == DiskTier.Configuration().checksumPolicy)
        #expect(configuration.render == RenderSettings())
        #expect(configuration.negativeTTL == ImageCache.Options().negativeTTL)
        #expect(configuration.negativeCapacity == ImageCache.Options().negativeCapacity)
        #expect(configuration.revalidateAfter == nil)
        #expect(configuration.urgentWidth == Processors.online)
        #expect(configuration.source == .none)
        #expect(configuration.colourOutput == .srgb)
    }

    /// Every key of the table in docs/Configuration.md is read by the code, and every key the
    /// code reads is in the table, with the same environment variable, default and reload column.
    @Test func theConfigurationTableListsExactlyTheKeysTheCodeReads() async throws {
        let readme = try String(
            contentsOf: Fixtures.directory.deletingLastPathComponent().appendingPathComponent("docs/Configuration.md"),
            encoding: .utf8)
        let rows = readme.split(separator: "\n").filter { $0.hasPrefix("| `") && $0.contains("| `STRATA_") }
        let documented = rows.map { row in
            row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
        }
        let names = documented.map { $0[0].trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
        // What the code reads: a full read records every key it asks for, once.
        let read = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:])).resolved.map(\.key.name)
        #expect(Set(read).count == read.count, "each key is read once")
        #expect(names == StrataConfiguration.keys.map(\.name), "the table's rows, in order, are the listed keys")
        #expect(Set(read) == Set(names), "the code reads exactly the table's keys")
        let table = StrataConfiguration.markdownTable.split(separator: "\n").dropFirst(2).map(String.init)
        #expect(rows.map(String.init) == table, "the table's rows match `strata config --table`")
    }

    @Test func badValuesNameTheKeyTheValueAndTheOrigin() async throws {
        let dir = TempDirectory()
        let file = try writeConfig("memory:\n  costLimit: lots\n", in: dir)
        let error = await #expect(throws: ConfigurationError.self) {
            try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], filePath: file))
        }
        #expect(error?.key == "memory.costLimit")
        #expect(error?.value == "lots")
        #expect(error?.origin == "file \(file)")
        #expect(error?.description.contains("512MiB") == true, "says what is allowed: \(String(describing: error))")

        for (arguments, key) in [
            (["--tolerance", "1.5"], "tolerance"), (["--lanes-urgent", "0"], "lanes.urgent"),
            (["--negative-capacity", "0"], "negativeCapacity"),
            (["--source-resample-threads", "0"], "source.resampleThreads"),
            (["--disk-checksum", "sometimes"], "disk.checksum"),
            (["--memory-pressure-cgroup-target", "0.95"], "memory.pressure.cgroupTarget"),
            (["--tables-formats", "thumb"], "tables.formats"),
            (["--source-directory", "/a", "--source-http-base-url", "http://x"], "source.directory"),
            (["--source-http-base-url", "ftp://origin/"], "source.http.baseURL"),
            (["--source-http-headers", "no colon here"], "source.http.headers"),
            (["--http-node-name", "node 1"], "http.nodeName"),
            (["--color-output", "wide"], "color.output"),
            (["--http-node-name", String(repeating: "n", count: 65)], "http.nodeName"),
        ] {
            let error = await #expect(throws: ConfigurationError.self) {
                try StrataConfiguration(from: try await ConfigurationLayers(arguments: arguments, environment: [:]))
            }
            #expect(error?.key == key, "\(arguments): \(String(describing: error))")
        }
    }

    /// `http.nodeName` defaults to the host name (or `strata` when it has none usable), and a
    /// name from any source is used as it is.
    @Test func theNodeNameDefaultsToTheHostName() async throws {
        let defaults = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:]))
        let host = HostName.current.flatMap { HTTPServiceSettings.isValidNodeName($0) ? $0 : nil } ?? "strata"
        #expect(defaults.http.nodeName == host)
        let named = try StrataConfiguration(
            from: try await ConfigurationLayers(environment: ["STRATA_HTTP_NODE_NAME": "edge-2.eu:8080"]))
        #expect(named.http.nodeName == "edge-2.eu:8080")
    }

    @Test func unknownKeysAreRefusedWithTheClosestName() async throws {
        let dir = TempDirectory()
        let file = try writeConfig("memory:\n  costLimt: 1MiB\n", in: dir)
        let fromFile = await #expect(throws: ConfigurationError.self) {
            _ = try await ConfigurationLayers(environment: [:], filePath: file)
        }
        #expect(fromFile?.key == "memory.costLimt")
        #expect(fromFile?.reason.contains("memory.costLimit") == true)
        // An empty key is named `""`, not left blank (found by `FuzzConfigFile`).
        let emptyKey = try writeConfig("\"\": 1\n", in: dir)
        let fromEmptyKey = await #expect(throws: ConfigurationError.self) {
            _ = try await ConfigurationLayers(environment: [:], filePath: emptyKey)
        }
        #expect(fromEmptyKey?.key == "\"\"")
        let fromEnvironment = await #expect(throws: ConfigurationError.self) {
            _ = try await ConfigurationLayers(environment: ["STRATA_DISK_BYTELIMIT": "1GiB"])
        }
        #expect(fromEnvironment?.reason.contains("STRATA_DISK_BYTE_LIMIT") == true)
        // The file's path and the test knobs share the prefix but are not keys: ignored.
        _ = try await ConfigurationLayers(environment: ["STRATA_CONFIG": "/nonexistent", "STRATA_STRESS_SECONDS": "5"])
        let fromFlags = await #expect(throws: ConfigurationError.self) {
            _ = try await ConfigurationLayers(arguments: ["--lanes-urgnt", "2"], environment: [:])
        }
        #expect(fromFlags?.reason.contains("--lanes-urgent") == true)
    }

    @Test func tableFormatsAndSecretsAreParsedAndRedacted() async throws {
        let layers = try await ConfigurationLayers(
            arguments: ["--tables-path", "/tmp/t", "--tables-formats", "small grid 64x64", "large grid 256x128 style=x mode=fit max=50"],
            environment: [
                "STRATA_SOURCE_HTTP_BASE_URL": "https://origin.example/images",
                "STRATA_SOURCE_HTTP_HEADERS": "Authorization: Bearer s3cret",
            ])
        let configuration = try StrataConfiguration(from: layers)
        #expect(
            configuration.tableFormats == [
                ImageTableFormat(name: "small", family: "grid", size: PixelSize(width: 64, height: 64), maximumCount: 1000),
                ImageTableFormat(
                    name: "large", family: "grid", size: PixelSize(width: 256, height: 128), style: .bgrx32, mode: .fit, maximumCount: 50),
            ])
        guard case .http(let origin) = configuration.source else {
            Issue.record("expected an HTTP origin, got \(configuration.source)")
            return
        }
        #expect(origin.headers == ["Authorization": "Bearer s3cret"])
        let shown = configuration.resolved.first { $0.key.name == "source.http.headers" }
        #expect(shown?.value == "<redacted>")
        #expect(!configuration.resolved.contains { $0.value?.contains("s3cret") == true })
    }

    /// `renderAhead` (``ImageCache/Options/renderAhead``, checked by the engine's own tests).
    @Test func theRenderAheadKeyIsReadAndChecked() async throws {
        let read = try StrataConfiguration(from: try await ConfigurationLayers(environment: ["STRATA_RENDER_AHEAD": "0.4"]))
        #expect(read.renderAhead == 0.4)
        #expect(try StrataConfiguration(from: try await ConfigurationLayers(environment: [:])).renderAhead == nil)
        let error = await #expect(throws: ConfigurationError.self) {
            try StrataConfiguration(from: try await ConfigurationLayers(environment: ["STRATA_RENDER_AHEAD": "2"]))
        }
        #expect(error?.key == "renderAhead")
    }

    /// `source.maxFileSize` bounds what the directory source reads: a file over it is refused
    /// by the engine, naming the limit; a zero is a configuration error naming the key.
    @Test func theDirectorySourcesFileSizeLimitIsConfigured() async throws {
        let layers = try await ConfigurationLayers(
            arguments: [
                "--source-directory", Fixtures.directory.path, "--source-max-file-size", "4KiB", "--memory-pressure-enabled", "false",
            ],
            environment: [:])
        let configuration = try StrataConfiguration(from: layers)
        #expect(configuration.sourceMaxFileBytes == 4096)
        let configured = try ConfiguredImageCache(configuration)
        let error = await #expect(throws: ImageCacheError.self) {
            _ = try await configured.cache.image(for: ImageRequest(key: "jpeg/path-2560x1600.jpg", box: PixelSize(width: 64, height: 64)))
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("4096-byte limit"))
        // The red fixture is under the limit.
        _ = try await configured.cache.image(for: ImageRequest(key: "png/red-8x8.png", box: PixelSize(width: 8, height: 8)))
        await configured.shutdown()
        let zero = await #expect(throws: ConfigurationError.self) {
            try StrataConfiguration(from: try await ConfigurationLayers(environment: ["STRATA_SOURCE_MAX_FILE_SIZE": "0"]))
        }
        #expect(zero?.key == "source.maxFileSize")
    }
}

/// `iiif.pyramidPath` unset: beside `disk.path` when there is a disk tier; `off` turns it off.
@Suite("Configuration: default place of the tile pyramids")
struct PyramidPathDefaultTests {
    static func iiif(_ arguments: [String]) async throws -> IIIFSettings {
        try StrataConfiguration(from: try await ConfigurationLayers(arguments: arguments, environment: [:])).iiif
    }

    @Test func besideTheDiskTier() async throws {
        let beside = try await Self.iiif(["--disk-path", "/var/cache/strata/disk/"])
        #expect(beside.pyramidPath == "/var/cache/strata/disk-pyramids")
        #expect(beside.pyramidPathIsDefault)
        let none = try await Self.iiif([])
        #expect(none.pyramidPath == nil)
        let given = try await Self.iiif(["--disk-path", "/d", "--iiif-pyramid-path", "/p"])
        #expect(given.pyramidPath == "/p" && !given.pyramidPathIsDefault)
        let off = try await Self.iiif(["--disk-path", "/d", "--iiif-pyramid-path", "off"])
        #expect(off.pyramidPath == nil && off.pyramidsOff)
        // A tile size the pyramids cannot halve: no default (the key stays an error only when set).
        #expect(try await Self.iiif(["--disk-path", "/d", "--iiif-tile-size", "257"]).pyramidPath == nil)
    }
}
