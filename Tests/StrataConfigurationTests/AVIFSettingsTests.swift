import Foundation
import Testing

@testable import Strata
@testable import StrataConfiguration
import StrataTestSupport

/// `http.avifQuality`, `http.avifSpeed` and `http.formats`: their defaults, and errors that name
/// the key and say what is allowed.
@Suite("Configuration: AVIF answers and negotiated formats")
struct AVIFSettingsTests {
    @Test func theDefaultsAreTheEncodersAndTheDocumentedOrder() async throws {
        let http = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:])).http
        #expect(http.avifQuality == AVIFCodec.defaultQuality)
        #expect(http.avifSpeed == AVIFCodec.defaultSpeed)
        #expect(http.formats == [.avif, .jxl, .webp, .jpeg, .png])
        #expect(StrataConfiguration.key(named: "http.avifQuality")?.defaultValue == String(AVIFCodec.defaultQuality))
        #expect(StrataConfiguration.key(named: "http.avifSpeed")?.defaultValue == String(AVIFCodec.defaultSpeed))
    }

    @Test func valuesFromEachSourceAreRead() async throws {
        let http = try StrataConfiguration(
            from: try await ConfigurationLayers(
                arguments: ["--http-avif-speed", "6", "--http-formats", "WebP", "png"],
                environment: ["STRATA_HTTP_AVIF_QUALITY": "45"])
        ).http
        #expect(http.avifQuality == 45)
        #expect(http.avifSpeed == 6)
        #expect(http.formats == [.webp, .png])
        let dir = TempDirectory()
        let file = try writeConfig("http:\n  formats: [jxl, jpeg, avif]\n", in: dir)
        #expect(
            try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], filePath: file)).http.formats == [
                .jxl, .jpeg, .avif,
            ])
    }

    @Test(
        arguments: [
            (["--http-avif-quality", "0"], "http.avifQuality", "≥ 1"),
            (["--http-avif-quality", "101"], "http.avifQuality", "1…100"),
            (["--http-avif-speed", "11"], "http.avifSpeed", "0 (smallest files, slowest) … 10 (fastest)"),
            (["--http-avif-speed", "fast"], "http.avifSpeed", "whole number"),
            (["--http-formats", "avif", "gif"], "http.formats", "use avif, jxl, webp, jpeg, png"),
            (["--http-formats", "heic", "jpeg"], "http.formats", "use avif, jxl, webp, jpeg, png"),
            (["--http-formats", "jpeg", "webp", "jpeg"], "http.formats", "listed twice"),
            (["--http-formats", "avif", "webp"], "http.formats", "list jpeg or png"),
        ])
    func badValuesNameTheKey(arguments: [String], key: String, says: String) async throws {
        let error = await #expect(throws: ConfigurationError.self) {
            try StrataConfiguration(from: try await ConfigurationLayers(arguments: arguments, environment: [:]))
        }
        #expect(error?.key == key, "\(arguments): \(String(describing: error))")
        #expect(error?.description.contains(says) == true, "\(arguments): \(String(describing: error))")
    }
}
