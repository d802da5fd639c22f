import Foundation
import Logging
import ServiceLifecycle
import Testing

@testable import Strata
@testable import StrataConfiguration
import StrataTestSupport

@Suite("Configuration: reload without a restart, and the CLI", .serialized)
struct ConfigurationReloadTests {
    static let key = "jpeg/path-2560x1600.jpg"

    static func file(tolerance: String, countLimit: Int = 5000, urgent: Int = 2) -> String {
        """
        tolerance: \(tolerance)
        memory:
          countLimit: \(countLimit)
          pressure:
            enabled: false
        lanes:
          urgent: \(urgent)
        source:
          directory: \(Fixtures.directory.path)
        """
    }

    /// The engine and its reloader running as services (the file provider polls every 50 ms),
    /// until `body` returns.
    static func withReloadingEngine(
        _ initial: String, log: CapturingLogHandler.Store,
        _ body: (_ path: String, _ engine: ImageCache, _ reloader: ConfigurationReloader) async throws -> Void
    ) async throws {
        let dir = TempDirectory()
        let path = try writeConfig(initial, in: dir)
        let layers = try await ConfigurationLayers(environment: [:], filePath: path, pollInterval: .milliseconds(50))
        let configuration = try StrataConfiguration(from: layers)
        let configured = try ConfiguredImageCache(configuration)
        let logger = Logger(label: "test") { _ in CapturingLogHandler(store: log) }
        let reloader = ConfigurationReloader(layers: layers, engine: configured.cache, initial: configuration, logger: logger)
        let group = ServiceGroup(
            configuration: .init(services: [try #require(layers.fileProvider), reloader], logger: Logger(label: "test.services")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            defer { tasks.cancelAll() }
            try await body(path, configured.cache, reloader)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        await configured.shutdown()
    }

    /// Rewrites the file so that its modification time moves on (the provider compares it).
    static func rewrite(_ path: String, _ text: String) throws {
        let before = try FileManager.default.attributesOfItem(atPath: path)[.modificationDate] as? Date
        try text.write(toFile: path + ".new", atomically: false, encoding: .utf8)
        if let before {
            try FileManager.default.setAttributes([.modificationDate: before.addingTimeInterval(2)], ofItemAtPath: path + ".new")
        }
        _ = rename(path + ".new", path)
    }

    @Test func aReloadThatChangesTheToleranceChangesWhichVariantIsServed() async throws {
        let log = CapturingLogHandler.Store()
        try await Self.withReloadingEngine(Self.file(tolerance: "0"), log: log) { path, engine, reloader in
            let first = try await engine.image(for: ImageRequest(key: CacheKey(Self.key), box: PixelSize(width: 512, height: 512)))
            #expect(first.tier == .source)
            // At tolerance 0 the 512×320 variant does not answer a 480 box: a new render.
            let exact = try await engine.image(for: ImageRequest(key: CacheKey(Self.key), box: PixelSize(width: 480, height: 480)))
            #expect(exact.tier == .source)
            #expect(exact.image.size == PixelSize(width: 480, height: 300))

            try Self.rewrite(path, Self.file(tolerance: "0.2", countLimit: 1234, urgent: 3))
            #expect(await eventually { engine.defaultTolerance == 0.2 }, "the reload reaches the engine")
            #expect(reloader.reloads.applied >= 1)
            // The same kind of request is now answered by a variant within 20 %, from memory.
            let loose = try await engine.image(for: ImageRequest(key: CacheKey(Self.key), box: PixelSize(width: 470, height: 470)))
            #expect(loose.tier == .memory)
            #expect([PixelSize(width: 480, height: 300), PixelSize(width: 512, height: 320)].contains(loose.image.size))
            #expect(engine.memory?.configuration.countLimit == 1234, "memory limits follow the file")
            #expect(engine.reloadableSettings.urgentWidth == 3, "lane widths follow the file")
        }
    }

    @Test func aReloadWithAnInvalidValueKeepsTheOldOneAndLogsTheKey() async throws {
        let log = CapturingLogHandler.Store()
        try await Self.withReloadingEngine(Self.file(tolerance: "0.1"), log: log) { path, engine, reloader in
            try Self.rewrite(path, Self.file(tolerance: "7", countLimit: 99))
            #expect(await eventually { reloader.reloads.refused >= 1 }, "the bad file is seen and refused")
            #expect(engine.defaultTolerance == 0.1, "the old tolerance stays")
            #expect(engine.memory?.configuration.countLimit == 5000, "nothing else changed either")
            let refusal = log.messages.withLock { $0 }.first { $0.0 == .error }
            #expect(refusal?.2["key"] == "tolerance")
            #expect(refusal?.2["value"] == "7")
            // A good file afterwards applies again.
            try Self.rewrite(path, Self.file(tolerance: "0.3"))
            #expect(await eventually { engine.defaultTolerance == 0.3 })
        }
    }

    @Test func startUpWithAnInvalidValueFailsNamingTheKey() throws {
        let dir = TempDirectory()
        let path = try writeConfig("disk:\n  byteLimit: 12 parsecs\n", in: dir)
        let run = try runStrata(
            ["get", Self.key, "--size", "64x64", "--source", Fixtures.directory.path, "--config", path], environment: [:])
        #expect(run.status == 2)
        #expect(run.stderr.contains("disk.byteLimit"), "\(run.stderr)")
        #expect(run.stderr.contains("12 parsecs"))
        #expect(run.stdout.isEmpty)

        let flag = try runStrata(["get", Self.key, "--size", "64x64", "--lanes-urgent", "none"], environment: [:])
        #expect(flag.status == 2)
        #expect(flag.stderr.contains("lanes.urgent") && flag.stderr.contains("--lanes-urgent"), "\(flag.stderr)")
    }

    @Test func strataConfigShowsOriginsAndRedactsSecrets() throws {
        let dir = TempDirectory()
        let path = try writeConfig("tolerance: 0.25\nsource:\n  http:\n    baseURL: http://127.0.0.1:9/images\n", in: dir)
        let run = try runStrata(
            ["config", "--config", path, "--negative-ttl", "3s"],
            environment: ["STRATA_SOURCE_HTTP_HEADERS": "Authorization: Bearer top-s3cret", "STRATA_MEMORY_COUNT_LIMIT": "77"])
        #expect(run.status == 0, "\(run.stderr)")
        let lines = run.stdout.split(separator: "\n").map(String.init)
        func line(_ key: String) -> String? { lines.first { $0.hasPrefix(key + " ") } }
        #expect(line("tolerance")?.contains("0.25  (file \(path))") == true, "\(lines)")
        #expect(line("memory.countLimit")?.contains("77  (environment STRATA_MEMORY_COUNT_LIMIT)") == true)
        #expect(line("negativeTTL")?.contains("3s  (command line --negative-ttl)") == true)
        #expect(line("lanes.prefetch")?.contains("(default)") == true)
        #expect(line("source.http.baseURL")?.contains("http://127.0.0.1:9/images") == true)
        #expect(line("source.http.headers")?.contains("<redacted>") == true)
        #expect(!run.stdout.contains("top-s3cret") && !run.stderr.contains("top-s3cret"))
        #expect(run.stdout.contains("# source: HTTP origin http://127.0.0.1:9/images"))
        #expect(line("iiif.pyramidPath")?.contains("(unset)  (default)") == true)
        // With a disk tier, the pyramids' default place beside it.
        let disk = try runStrata(["config", "--disk-path", dir.path + "/disk"], environment: [:])
        #expect(disk.stdout.contains("iiif.pyramidPath"), "\(disk.stderr)")
        #expect(disk.stdout.contains("= \(dir.path)/disk-pyramids  (default: beside disk.path)"), "\(disk.stdout)")
    }
}
