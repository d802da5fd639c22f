import Foundation
import Logging
import ServiceLifecycle
import Strata
import StrataConfiguration
import StrataTestSupport
import Testing

@testable import StrataService

/// `color.output` through `strata serve`: the choice is part of each answer's identity (ETag,
/// encoded cache, engine variant), `original` answers carry the profile, and a reload of the
/// configuration file applies it to new requests.
@Suite("Service: color.output")
struct ColourOutputTests {
    static func config(directory: String, colour: String) -> String {
        """
        color:
          output: \(colour)
        memory:
          pressure:
            enabled: false
        http:
          port: 0
        disk:
          path: \(directory)/disk
        source:
          directory: \(directory)/originals
        """
    }

    @Test("changing color.output by a reload changes the ETag and the variant; original answers embed the profile")
    func reload() async throws {
        let directory = makeScratchDirectory("colour")
        try FileManager.default.createDirectory(atPath: directory + "/originals", withIntermediateDirectories: true)
        let profile = ColourFixtures.profile(.swappedMatrix)
        let tagged = try ImageEncoder.encode(
            ColourFixtures.photo(PixelSize(width: 640, height: 400)), as: .png, profile: try ColourProfile(bytes: profile))
        try Data(tagged).write(to: URL(fileURLWithPath: directory + "/originals/tagged.png"))
        let path = directory + "/strata.yaml"
        try Self.config(directory: directory, colour: "srgb").write(toFile: path, atomically: true, encoding: .utf8)

        let layers = try await ConfigurationLayers(environment: [:], filePath: path, pollInterval: .milliseconds(50))
        let configuration = try StrataConfiguration(from: layers)
        #expect(configuration.colourOutput == .srgb)
        var logger = Logger(label: "test.colour")
        logger.logLevel = .error
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let server = try StrataServer(configuration: configuration, logger: logger) { _, port in
            continuation.yield(port)
            continuation.finish()
        }
        let reloader = ConfigurationReloader(
            layers: layers, engine: server.cache, initial: configuration, logger: logger, onApply: { server.apply($0) })
        let group = ServiceGroup(
            configuration: .init(services: [try #require(layers.fileProvider), reloader, server], logger: logger))
        let running = Task { try await group.run() }
        var port = 0
        for await bound in ports {
            port = bound
            break
        }
        let target = "/images/tagged.png?w=200&h=200&format=png"
        let srgb = try await get(port: port, target)
        #expect(srgb.status == 200)
        let srgbTag = try #require(srgb.header("ETag"))
        #expect(!srgbTag.contains("-icc"))
        #expect(try ImageDecoder().readHeader(srgb.body).colour == .none)

        // The file changes: new requests get the original's colours and its profile.
        let text = Self.config(directory: directory, colour: "original")
        try text.write(toFile: path + ".new", atomically: false, encoding: .utf8)
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(2)], ofItemAtPath: path + ".new")
        _ = rename(path + ".new", path)
        #expect(await eventually { server.colour.current == .original }, "the reload reaches the service")

        for format in ["png", "jpeg", "webp"] {
            let original = try await get(port: port, "/images/tagged.png?w=200&h=200&format=\(format)")
            #expect(original.status == 200)
            let tag = try #require(original.header("ETag"))
            #expect(tag.contains("-icc"), "\(format): \(tag)")
            #expect(try ImageDecoder().readHeader(original.body).colour.profile?.bytes == profile, "\(format)")
        }
        let original = try await get(port: port, target, headers: [("If-None-Match", srgbTag)])
        #expect(original.status == 200, "the sRGB answer's validator does not match the original's")
        #expect(original.header("ETag") != srgbTag)
        // The original's pixels are not the converted ones: another variant, not a stale one.
        let decoder = ImageDecoder()
        #expect(ColourFixtures.psnr(try decoder.decode(original.body), try decoder.decode(srgb.body)) < 30)

        await group.triggerGracefulShutdown()
        _ = try? await running.value
    }
}
