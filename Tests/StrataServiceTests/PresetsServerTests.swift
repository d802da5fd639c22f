import Foundation
import Logging
import ServiceLifecycle
import Strata
import StrataConfiguration
import StrataTestSupport
import Testing

@testable import StrataService

/// `?preset=` through `strata serve`: on the route and on the warm path, signed, presets-only,
/// refused at start when bad, and replaced by a configuration reload, warm memo included.
@Suite("Service: presets", .timeLimit(.minutes(5)))
struct PresetsServerTests {
    static let kite = "/images/jpeg/kite-800x500-gray.jpg"
    static let presets = "thumb: w=120 h=90 mode=fill format=jpeg, small: w=64, webp: format=webp quality=60"

    static func size(_ answer: Answer) -> String {
        "\(answer.header("X-Strata-Width") ?? "?")x\(answer.header("X-Strata-Height") ?? "?")"
    }

    @Test func aPresetIsServedOnTheRouteAndOnTheWarmPath() async throws {
        let server = try await TestServer.start(["http.presets": Self.presets])
        let cold = try await server.get(Self.kite + "?preset=thumb")
        #expect(cold.status == 200 && Self.size(cold) == "120x90", "\(cold.status) \(cold.text)")
        #expect(cold.header("Content-Type") == "image/jpeg")
        let warmBefore = try await WarmPathTests.warmAnswers(server)
        let warm = try await server.get(Self.kite + "?preset=thumb")
        #expect(warm.header("X-Strata-Tier") == "encoded" && warm.body == cold.body)
        #expect(try await WarmPathTests.warmAnswers(server) == warmBefore + 1, "answered by the warm path")
        // The same image as the preset's parameters spelled out.
        let explicit = try await server.get(Self.kite + "?w=120&h=90&mode=fill&format=jpeg")
        #expect(explicit.header("ETag") == cold.header("ETag"))
        // Added to: a box for a preset without one, a format for one without.
        let added = try await server.get("/images/jpeg/eveningglow-1024x640-progressive.jpg?preset=small&format=png&h=30")
        #expect(added.status == 200 && Self.size(added) == "48x30" && added.header("Content-Type") == "image/png", "\(added.text)")
        let boxed = try await server.get("/images/jpeg/cups-320x200-rgb-reference.jpg?w=160&preset=webp")
        #expect(boxed.status == 200 && Self.size(boxed) == "160x100" && boxed.header("Content-Type") == "image/webp")
        // Conflicts and unknown presets, on both paths (the second asks the warm path's memo).
        for _ in 0..<2 {
            let conflict = try await server.get(Self.kite + "?preset=thumb&w=100")
            #expect(conflict.status == 400 && conflict.errorCode == "preset_conflict", "\(conflict.text)")
            #expect(conflict.text.contains("w=120") && conflict.text.contains("w=100"), "\(conflict.text)")
            let unknown = try await server.get(Self.kite + "?preset=large")
            #expect(unknown.status == 400 && unknown.errorCode == "unknown_preset", "\(unknown.text)")
            #expect(unknown.text.contains("small, thumb, webp"), "\(unknown.text)")
        }
        try await server.stop()
    }

    /// The signature covers the query as sent, `preset=` included.
    @Test func signedPresetURLs() async throws {
        let key = "0123456789abcdef-presets"
        let server = try await TestServer.start(["http.presets": Self.presets, "http.signingKey": key])
        let signed = URLSigner(key: key).sign(Self.kite + "?preset=thumb")
        let answer = try await server.get(signed)
        #expect(answer.status == 200 && Self.size(answer) == "120x90", "\(answer.text)")
        let swapped = try await server.get(signed.replacingOccurrences(of: "preset=thumb", with: "preset=small"))
        #expect(swapped.status == 403 && swapped.errorCode == "bad_signature")
        #expect(try await server.get(Self.kite + "?preset=thumb").errorCode == "missing_signature")
        try await server.stop()
    }

    @Test func presetsOnlyRefusesEverythingButAPreset() async throws {
        let keys = "k1:0123456789abcdef-presets"
        let server = try await TestServer.start([
            "http.presets": "thumb: w=120 h=90 mode=fill format=jpeg, small: w=64", "http.presetsOnly": "true", "http.signingKeys": keys,
        ])
        let signer = try #require(URLSigner(keys: ["k1": "0123456789abcdef-presets"], defaultKey: nil))
        let now = Int(Date().timeIntervalSince1970)
        for target in [Self.kite + "?w=120&h=90", Self.kite, Self.kite + "?preset=thumb&quality=50"] {
            let refused = try await server.get(try #require(signer.sign(target, keyID: "k1")))
            #expect(refused.status == 400 && refused.errorCode == "presets_only", "\(target): \(refused.text)")
            #expect(refused.text.contains("small, thumb"), "\(refused.text)")
        }
        // kid, exp and sig are the URL's own: a preset with them is served.
        let answer = try await server.get(try #require(signer.sign(Self.kite + "?preset=thumb", keyID: "k1", expires: now + 600)))
        #expect(answer.status == 200 && Self.size(answer) == "120x90", "\(answer.text)")
        // IIIF has its own syntax and is not restricted (docs/HTTP.md: http.presetsOnly).
        let tile = try await server.get("/iiif/3/jpeg%2Fkite-800x500-gray.jpg/full/100,/0/default.jpg")
        #expect(tile.status == 200, "\(tile.text)")
        try await server.stop()
    }

    @Test func aBadPresetStopsTheServerFromStarting() async throws {
        let error = await #expect(throws: ConfigurationError.self) {
            try await TestServer.start(["http.presets": "thumb: w=120 h=90, broken: w=120 gravity=sideways"])
        }
        #expect(error?.key == "http.presets" && error?.reason.contains("\"broken\"") == true, "\(String(describing: error))")
    }

    /// A configuration of `presets` (`name: parameters` lines), written as a list of quoted
    /// strings or, `asMapping`, as a mapping of names to parameters.
    static func config(directory: String, presets: String, asMapping: Bool = false) -> String {
        let entries = presets.split(separator: "\n").map { line in
            guard asMapping, let colon = line.firstIndex(of: ":") else { return "    - \"\(line)\"" }
            return "    \(line[..<colon]): \"\(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))\""
        }
        return """
            memory:
              pressure:
                enabled: false
            http:
              port: 0
              presets:
            \(entries.joined(separator: "\n"))
            disk:
              path: \(directory)/disk
            source:
              directory: \(fixturesDirectory)
            """
    }

    /// Replaces the configuration file at `path` with `text` (a new modification time, one
    /// rename: the reloader never reads half a file).
    static func rewrite(_ path: String, _ text: String) throws {
        try text.write(toFile: path + ".new", atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(2)], ofItemAtPath: path + ".new")
        _ = rename(path + ".new", path)
    }

    /// A running server whose preset changes by a reload answers the new size at once, on the
    /// warm path too (its memo of the old meaning is dropped); a bad preset refuses the reload
    /// and the presets in force stay.
    @Test func presetsReloadWithTheConfiguration() async throws {
        let directory = makeScratchDirectory("presets")
        let path = directory + "/strata.yaml"
        try Self.config(directory: directory, presets: "thumb: w=120 h=90 mode=fill format=jpeg").write(
            toFile: path, atomically: true, encoding: .utf8)
        let layers = try await ConfigurationLayers(environment: [:], filePath: path, pollInterval: .milliseconds(50))
        let configuration = try StrataConfiguration(from: layers)
        var logger = Logger(label: "test.presets")
        logger.logLevel = .critical
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server = try StrataServer(configuration: configuration, logger: logger) { _, port in
            continuation.yield(port)
            continuation.finish()
        }
        let reloader = ConfigurationReloader(
            layers: layers, engine: server.cache, initial: configuration, logger: logger,
            check: { configuration throws(ConfigurationError) in try server.check(configuration) }, onApply: { server.apply($0) })
        let group = ServiceGroup(configuration: .init(services: [try #require(layers.fileProvider), reloader, server], logger: logger))
        let running = Task { try await group.run() }
        var port = 0
        for await bound in ports {
            port = bound
            break
        }
        let target = Self.kite + "?preset=thumb"
        #expect(Self.size(try await get(port: port, target)) == "120x90")
        let warm = try await get(port: port, target)
        #expect(warm.header("X-Strata-Tier") == "encoded" && Self.size(warm) == "120x90", "memoized by the warm path")

        // Written as a mapping this time (`thumb: "w=60 …"`), as people write it.
        try Self.rewrite(path, Self.config(directory: directory, presets: "thumb: w=60 h=40 mode=fill format=jpeg", asMapping: true))
        #expect(await eventually { server.presets.generation == 1 }, "the reload reaches the service")
        for _ in 0..<3 {
            let answer = try await get(port: port, target)
            #expect(answer.status == 200 && Self.size(answer) == "60x40", "\(answer.status) \(Self.size(answer))")
        }

        // A bad preset: refused, the one in force stays.
        try Self.rewrite(path, Self.config(directory: directory, presets: "thumb: w=60 h=40 mode=sideways"))
        #expect(await eventually { reloader.reloads.refused == 1 }, "the reload is refused")
        #expect(server.presets.generation == 1)
        #expect(Self.size(try await get(port: port, target)) == "60x40")

        await group.triggerGracefulShutdown()
        _ = try? await running.value
        try? FileManager.default.removeItem(atPath: directory)
    }
}
