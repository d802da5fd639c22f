import ArgumentParser
import Foundation
import Logging
import ServiceLifecycle
import Strata
import StrataConfiguration
import StrataService

/// `strata serve [--config FILE] [--host H] [--port P] [--KEY VALUE …]`
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve images over HTTP: GET /images/{key}?w=&h=, /metrics, /stats, /healthz.",
        discussion: """
            Everything is configured through the configuration (--config FILE or STRATA_CONFIG, \
            STRATA_… variables, configuration keys as flags; see `strata config`); --host and \
            --port are http.host and http.port. With no source and no disk tier configured, it \
            serves the embedded default: the repository's Fixtures/ directory (from the current \
            directory) as the source, with its disk cache in ./.strata-cache/disk (and the tile \
            pyramids of big originals beside it, in ./.strata-cache/disk-pyramids). SIGTERM or \
            SIGINT stops it gracefully: requests in flight finish and the disk tier's queued \
            writes are published before it exits.
            """
    )

    @Option(help: "Address to listen on (http.host; default 127.0.0.1).")
    var host: String?

    @Option(help: "TCP port (http.port; default 8080; 0: any free port).")
    var port: Int?

    @OptionGroup var configurationOptions: ConfigurationOptions

    /// The embedded default's directories, relative to the working directory.
    static let defaultSource = "Fixtures"
    static let defaultCache = ".strata-cache/disk"

    func run() async throws {
        // swift-otel's bridge: with tracing on, a log line written under a span names its trace
        // and span (`trace_id`, `span_id`).
        LoggingSystem.bootstrap(
            { label, metadata in StreamLogHandler.standardError(label: label, metadataProvider: metadata) },
            metadataProvider: ServiceTracing.loggingMetadataProvider)
        var overrides: [String: ConfigurationRawValue] = [:]
        if let host { overrides["http.host"] = .scalar(host) }
        if let port { overrides["http.port"] = .scalar(String(port)) }
        var (layers, configuration) = await configurationOptions.load(overrides: overrides)
        var embedded = false
        if configuration.source == .none, configuration.diskPath == nil {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: Self.defaultSource, isDirectory: &isDirectory), isDirectory.boolValue else {
                fail(
                    "no source is configured (source.directory, source.http.baseURL or source.s3.bucket), and there is no ./\(Self.defaultSource) "
                        + "directory to serve by default: set one (see `strata config`)", code: 2)
            }
            overrides["source.directory"] = .scalar(Self.defaultSource)
            overrides["disk.path"] = .scalar(Self.defaultCache)
            (layers, configuration) = await configurationOptions.load(overrides: overrides)
            embedded = true
        }
        let logger = Logger(label: "strata.serve")
        // May execute the program again with jemalloc preloaded (before any work is done).
        ProcessAllocator.apply(configuration.allocator, logger: logger)
        DescriptorLimit.raise(for: configuration.http.maxConnections, logger: logger)
        let isEmbedded = embedded
        let signer = URLSigner(keys: configuration.http.signingKeys, defaultKey: configuration.http.signingKey)
        let examples = Self.exampleKeys(configuration.source)
        let server: StrataServer
        let tracing: (any Service)?
        do {
            tracing = try ServiceTracing.bootstrap(configuration.tracing, logger: logger)
            server = try StrataServer(configuration: configuration, logger: logger) { host, port in
                Self.announce(host: host, port: port, embedded: isEmbedded, examples: examples, signer: signer)
            }
        } catch {
            fail("\(error)", code: 2)
        }
        let reloader = ConfigurationReloader(
            layers: layers, engine: server.cache, initial: configuration, logger: logger,
            check: { [server] configuration throws(ConfigurationError) in try server.check(configuration) },
            onApply: { [server] in server.apply($0) })
        // The exporter first: a group stops its services in reverse order, so it flushes the
        // spans of the server's last requests.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = tracing.map { [.init(service: $0)] } ?? []
        // The file's provider polls the file (and traps SIGHUP) only while it runs as a service;
        // without it the reloader never saw a change and SIGHUP ended the process.
        if let provider = layers.fileProvider { services.append(.init(service: provider)) }
        // Without a configuration file the reloader has nothing to watch and returns.
        services.append(.init(service: reloader, successTerminationBehavior: .ignore))
        services.append(.init(service: server))
        let group = ServiceGroup(
            configuration: .init(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }

    /// Keys to show in the example URLs: the two largest originals of a source directory whose
    /// extension is an image's (``OriginalsListing/imageExtensions``; the first 1000 files
    /// looked at).
    static func exampleKeys(_ source: StrataConfiguration.SourceSetting) -> [String] {
        guard case .directory(let root) = source,
            let walker = FileManager.default.enumerator(atPath: root)
        else { return ["path/to/image.jpg"] }
        var candidates: [(key: String, size: Int)] = []
        var looked = 0
        while let path = walker.nextObject() as? String, looked < 1000 {
            looked += 1
            let lower = path.lowercased()
            let suffix = lower.split(separator: ".").last.map(String.init) ?? ""
            guard lower.contains("."), OriginalsListing.imageExtensions.contains(suffix), !lower.contains("broken") else {
                continue
            }
            let size = (walker.fileAttributes?[.size] as? NSNumber)?.intValue ?? 0
            candidates.append((path, size))
        }
        let keys = candidates.sorted { $0.size > $1.size }.prefix(2).map(\.key)
        return keys.isEmpty ? ["path/to/image.jpg"] : keys
    }

    /// Prints where the service listens and URLs to try (signed when a key is set).
    static func announce(host: String, port: Int, embedded: Bool, examples: [String], signer: URLSigner?) {
        let base = "http://\(host == "0.0.0.0" ? "127.0.0.1" : host):\(port)"
        var lines = ["strata: listening on \(base)"]
        if embedded {
            lines.append("strata: serving ./\(defaultSource) (the embedded default), cache in ./\(defaultCache)")
        }
        lines.append("Try:")
        for (index, key) in examples.enumerated() {
            let encodedKey = key.split(separator: "/").map {
                String($0).addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/")))
                    ?? String($0)
            }.joined(separator: "/")
            var target = "/images/\(encodedKey)?w=\(index == 0 ? 512 : 256)&h=\(index == 0 ? 512 : 256)"
            if index == 1 { target += "&format=webp" }
            if let signer { target = signer.sign(target, keyID: signer.preferredKeyID) ?? target }
            lines.append("  curl -sS -D - -o /tmp/strata-example-\(index) '\(base)\(target)'")
        }
        if let first = examples.first {
            // The deep-zoom viewer (IIIF tiles) of the first key: a page for a browser.
            let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
            let id = first.addingPercentEncoding(withAllowedCharacters: unreserved) ?? first
            lines.append("  open \(base)/viewer?id=\(id)   (deep-zoom viewer in a browser)")
        }
        lines.append("  curl -sS \(base)/stats")
        lines.append("  curl -sS \(base)/metrics")
        // Written at once, unbuffered: a script reading the port waits for this line.
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
    }
}
