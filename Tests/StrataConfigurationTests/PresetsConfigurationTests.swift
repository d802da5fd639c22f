import Foundation
import Testing

@testable import StrataConfiguration
import StrataTestSupport
import Strata

/// `http.presets` and `http.presetsOnly` from every source, and the shape errors the
/// configuration itself finds (the parameters are the service's to check: its tests).
@Suite("Configuration: http.presets")
struct PresetsConfigurationTests {
    static let expected = ["thumb": "w=256 h=256 mode=fill format=webp", "hero": "w=1200"]

    @Test func presetsAreReadFromAFileTheEnvironmentAndTheCommandLine() async throws {
        let dir = TempDirectory()
        let file = try writeConfig(
            """
            http:
              presets:
                - "thumb: w=256 h=256 mode=fill format=webp"
                - "hero: w=1200"
              presetsOnly: true
            """, in: dir)
        let fromFile = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], filePath: file))
        #expect(fromFile.http.presets == Self.expected)
        #expect(fromFile.http.presetsOnly)
        let fromEnvironment = try StrataConfiguration(
            from: try await ConfigurationLayers(environment: [
                "STRATA_HTTP_PRESETS": "thumb: w=256 h=256 mode=fill format=webp, hero: w=1200", "STRATA_HTTP_PRESETS_ONLY": "true",
            ]))
        #expect(fromEnvironment.http.presets == Self.expected)
        #expect(fromEnvironment.http.presetsOnly)
        let fromFlags = try StrataConfiguration(
            from: try await ConfigurationLayers(
                arguments: ["--http-presets", "thumb: w=256 h=256 mode=fill format=webp", "hero:w=1200"], environment: [:]))
        #expect(fromFlags.http.presets == Self.expected)
        #expect(!fromFlags.http.presetsOnly, "default")
        let unset = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:]))
        #expect(unset.http.presets.isEmpty && !unset.http.presetsOnly)
    }

    @Test func malformedPresetsNameTheKeyAndThePreset() async throws {
        for (list, reason) in [
            ("nocolon", "name: parameters"), ("th umb: w=1", "name: parameters"), ("a/b: w=1", "name: parameters"),
            (": w=1", "name: parameters"), ("thumb:", "\"thumb\" names no parameters"),
            ("thumb: w=1, thumb: w=2", "\"thumb\" is listed twice"),
            ("\(String(repeating: "x", count: 33)): w=1", "name: parameters"),
        ] {
            let layers = try await ConfigurationLayers(environment: ["STRATA_HTTP_PRESETS": list])
            let error = #expect(throws: ConfigurationError.self, "\(list)") { try StrataConfiguration(from: layers) }
            #expect(error?.key == "http.presets" && error?.origin == "environment STRATA_HTTP_PRESETS", "\(String(describing: error))")
            #expect(error?.reason.contains(reason) == true, "\(String(describing: error))")
        }
    }

    /// Named entries as people write them in YAML: a mapping of names to parameters, a list of
    /// one-entry mappings (`- thumb: w=256`), or the list of quoted strings; nested or flat.
    @Test func presetsAreReadAsAMappingOrAListOfMappings() async throws {
        let dir = TempDirectory()
        for (index, text) in [
            "http:\n  presets:\n    thumb: \"w=256 h=256 mode=fill format=webp\"\n    hero: w=1200\n",
            "http:\n  presets:\n    - thumb: w=256 h=256 mode=fill format=webp\n    - \"hero: w=1200\"\n",
            "http.presets:\n  thumb: w=256 h=256 mode=fill format=webp\n  hero: w=1200\n",
            "{\"http\": {\"presets\": {\"thumb\": \"w=256 h=256 mode=fill format=webp\", \"hero\": \"w=1200\"}}}",
        ].enumerated() {
            let file = try writeConfig(text, named: "strata-\(index).yaml", in: dir)
            let configuration = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], filePath: file))
            #expect(configuration.http.presets == Self.expected, "\(text)")
        }
    }

    /// The same forms for the other named keys: signing keys and an origin's headers.
    @Test func signingKeysAndHeadersAreReadAsMappings() async throws {
        let dir = TempDirectory()
        let file = try writeConfig(
            """
            http:
              signingKeys:
                old: "0123456789abcdef-old"
                new: "0123456789abcdef:new"
            source:
              http:
                baseURL: "http://127.0.0.1:9/"
                headers:
                  Authorization: "Bearer a:b"
                  X-Tenant: 42
            """, in: dir)
        let configuration = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], filePath: file))
        #expect(configuration.http.signingKeys == ["old": "0123456789abcdef-old", "new": "0123456789abcdef:new"])
        guard case .http(let origin) = configuration.source else {
            Issue.record("expected an HTTP source, got \(configuration.source)")
            return
        }
        #expect(origin.headers == ["Authorization": "Bearer a:b", "X-Tenant": "42"])
    }

    /// A named entry whose value is not a string is refused naming the key, with both forms.
    @Test func aNestedValueIsRefusedNamingTheKey() async throws {
        let dir = TempDirectory()
        for text in [
            "http:\n  presets:\n    thumb:\n      w: 256\n", "http:\n  presets:\n    - thumb: w=1\n      hero: w=2\n",
            "http:\n  presets:\n    - [w=1]\n",
        ] {
            let file = try writeConfig(text, in: dir)
            let error = await #expect(throws: ConfigurationError.self, "\(text)") {
                try await ConfigurationLayers(environment: [:], filePath: file)
            }
            #expect(error?.key == "http.presets" && error?.origin == "file \(file)", "\(String(describing: error))")
            #expect(error?.reason.contains("a mapping of names to strings") == true, "\(String(describing: error))")
        }
    }

    /// A list that is not of named entries keeps the hint to quote an entry holding `: `.
    @Test func anUnquotedEntryOfAnotherListSaysToQuoteIt() async throws {
        let dir = TempDirectory()
        let file = try writeConfig("http:\n  formats:\n    - webp: 1\n", in: dir)
        let error = await #expect(throws: ConfigurationError.self) { try await ConfigurationLayers(environment: [:], filePath: file) }
        #expect(error?.key == "http.formats" && error?.origin == "file \(file)", "\(String(describing: error))")
        #expect(error?.reason.contains("quote") == true)
    }

    @Test func presetsOnlyWithoutPresetsIsAnError() async throws {
        let layers = try await ConfigurationLayers(arguments: ["--http-presets-only", "true"], environment: [:])
        let error = #expect(throws: ConfigurationError.self) { try StrataConfiguration(from: layers) }
        #expect(error?.key == "http.presetsOnly" && error?.reason.contains("http.presets lists no preset") == true)
    }
}
