import Strata
import StrataConfiguration
import Testing

@testable import StrataService

/// `http.presets` resolved into a request's query: a preset means what its parameters mean in
/// a URL, explicit parameters add to it, conflicts and unknown presets are 400s that say what
/// to change, a presets-only service refuses everything but a preset, and a bad preset is a
/// configuration error naming the key and the preset.
@Suite("Image presets")
struct ImagePresetsTests {
    static let definitions = [
        "thumb": "w=256 h=256 mode=fill format=webp",
        "hero": "w=1200&quality=70",
        "webp": "format=webp quality=60",
        "card": "w=400 h=300 mode=fill gravity=smart format=webp",
        "focus": "w=400 h=300 mode=fill gravity=fp:0.2%2C0.8",
    ]

    static func presets(_ definitions: [String: String] = definitions, only: Bool = false) throws -> ImagePresets {
        try ImagePresets(definitions: definitions, only: only, maxDimension: 4096)
    }

    /// The parameters of `query` with `presets` resolved.
    static func parse(_ query: String?, _ presets: ImagePresets) throws(ServiceError) -> ImageParameters {
        try ImageParameters(path: "a.jpg", query: presets.resolve(query.map { Substring($0) }), maxDimension: 4096)
    }

    static func refusal(_ query: String?, _ presets: ImagePresets) -> ServiceError? {
        do {
            _ = try parse(query, presets)
            return nil
        } catch {
            return error
        }
    }

    @Test func aPresetMeansWhatItsParametersMeanInAURL() throws {
        let presets = try Self.presets()
        #expect(try Self.parse("preset=thumb", presets) == (try Self.parse("w=256&h=256&mode=fill&format=webp", .none)))
        #expect(try Self.parse("preset=hero", presets) == (try Self.parse("w=1200&quality=70", .none)))
        #expect(try Self.parse("preset=card", presets).gravity == .smart)
        #expect(try Self.parse("preset=focus", presets).gravity == .focalPoint(x: 20, y: 80))
        #expect(Self.refusal("preset=card&gravity=north", presets)?.code == "preset_conflict")
        // A query without a preset is the query itself.
        #expect(try Self.parse("w=10&h=20", presets) == (try Self.parse("w=10&h=20", .none)))
        #expect(try presets.resolve("w=10&presets=1") == "w=10&presets=1", "only `preset` itself names a preset")
    }

    @Test func explicitParametersAddToAPreset() throws {
        let presets = try Self.presets()
        #expect(
            try Self.parse("preset=thumb&quality=50&dpr=2", presets)
                == (try Self.parse("w=256&h=256&mode=fill&format=webp&quality=50&dpr=2", .none)))
        // A preset without a box takes the request's.
        #expect(try Self.parse("w=300&preset=webp", presets) == (try Self.parse("w=300&format=webp&quality=60", .none)))
        // The preset's own value again is no conflict (percent-encoded or not).
        #expect(try Self.parse("preset=thumb&w=256&mode=%66ill", presets) == (try Self.parse("preset=thumb", presets)))
        // A percent-encoded preset name is decoded like any value.
        #expect(try Self.parse("preset=%74humb", presets) == (try Self.parse("preset=thumb", presets)))
    }

    @Test func aConflictIsA400NamingBothValues() throws {
        let presets = try Self.presets()
        for (query, preset, request) in [
            ("preset=thumb&w=300", "w=256", "w=300"), ("format=png&preset=thumb", "format=webp", "format=png"),
            ("preset=hero&quality=90", "quality=70", "quality=90"),
        ] {
            let error = try #require(Self.refusal(query, presets), "\(query)")
            #expect(error.status == .badRequest && error.code == "preset_conflict", "\(error)")
            #expect(error.message.contains(preset) && error.message.contains(request), "\(error.message)")
        }
    }

    @Test func anUnknownPresetIsA400ListingTheKnownOnes() throws {
        let error = try #require(Self.refusal("preset=thumbs&w=10", try Self.presets()))
        #expect(error.status == .badRequest && error.code == "unknown_preset")
        #expect(error.message.contains("\"thumbs\"") && error.message.contains("card, focus, hero, thumb, webp"), "\(error.message)")
        let none = try #require(Self.refusal("preset=thumb", .none))
        #expect(none.code == "unknown_preset" && none.message.contains("no presets"), "\(none.message)")
        let twice = try #require(Self.refusal("preset=thumb&preset=hero", try Self.presets()))
        #expect(twice.code == "bad_parameter" && twice.message.contains("twice"))
        // An empty name is unknown too.
        #expect(Self.refusal("preset=&w=10", try Self.presets())?.code == "unknown_preset")
        #expect(Self.refusal("preset", try Self.presets())?.code == "unknown_preset")
    }

    @Test func presetsOnlyRefusesAnythingButAPresetAndTheSignature() throws {
        let only = try Self.presets(["thumb": "w=256 h=256 mode=fill", "hero": "w=1200"], only: true)
        for query in [nil, "", "w=10", "w=10&h=10&mode=fill", "preset=thumb&w=256", "preset=thumb&format=png", "dpr=2&preset=hero"] {
            let error = try #require(Self.refusal(query, only), "\(query ?? "nil")")
            #expect(error.status == .badRequest && error.code == "presets_only", "\(error)")
            #expect(error.message.contains("hero, thumb") && error.message.contains("http.presetsOnly"), "\(error.message)")
        }
        // The signature's parameters do not change the image: allowed.
        #expect(try Self.parse("preset=thumb&kid=k1&exp=2000000000&sig=x", only) == (try Self.parse("preset=thumb", only)))
        #expect(try Self.parse("preset=hero", only).box == PixelSize(width: 1200, height: 4096))
        // Unknown presets are still named as such.
        #expect(Self.refusal("preset=other", only)?.code == "unknown_preset")
    }

    /// Each preset is parsed by the query's parser at load: what it refuses in a URL is a
    /// configuration error naming `http.presets`, the preset and the parser's reason.
    @Test func badPresetsAreConfigurationErrorsNamingTheKeyAndThePreset() throws {
        for (text, reason) in [
            ("w=abc h=10", "w=abc"), ("w=5000", "http.maxDimension"), ("w=10 size=3", "size"), ("w=10 mode=cover", "mode=cover"),
            ("w=10 w=20", "twice"), ("w=10 sig=abc", "sig="), ("w=10 kid=k1", "kid="), ("w=10 exp=1", "exp="),
            ("preset=hero", "preset="), ("dpr=7", "dpr=7"), ("w=10 quality=0", "quality=0"),
        ] {
            let error = #expect(throws: ConfigurationError.self, "\(text)") { try Self.presets(["thumb": text]) }
            #expect(error?.key == "http.presets" && error?.value == "thumb: \(text)", "\(String(describing: error))")
            #expect(error?.reason.contains("\"thumb\"") == true && error?.reason.contains(reason) == true, "\(String(describing: error))")
        }
    }

    @Test func aPartialPresetIsAllowedUnlessPresetsOnly() throws {
        // A side, or the whole box, left to the request.
        #expect(throws: Never.self) { try Self.presets(["webp": "format=webp", "wide": "mode=fill w=400"]) }
        #expect(
            try Self.parse("preset=wide&h=100", try Self.presets(["wide": "mode=fill w=400"])).box == PixelSize(width: 400, height: 100))
        let error = #expect(throws: ConfigurationError.self) { try Self.presets(["wide": "mode=fill w=400"], only: true) }
        #expect(error?.key == "http.presets" && error?.reason.contains("\"wide\"") == true, "\(String(describing: error))")
        #expect(error?.reason.contains("whole box") == true && error?.reason.contains("needs both w and h") == true)
    }

    /// From a configuration: the error carries the value's origin.
    @Test func presetsReadFromAConfigurationNameTheirOrigin() async throws {
        let layers = try await ConfigurationLayers(environment: ["STRATA_HTTP_PRESETS": "thumb: w=256 h=256, bad: w=0"])
        let configuration = try StrataConfiguration(from: layers)
        let error = #expect(throws: ConfigurationError.self) { try ImagePresets(configuration) }
        #expect(error?.key == "http.presets" && error?.origin == "environment STRATA_HTTP_PRESETS", "\(String(describing: error))")
        #expect(error?.reason.contains("\"bad\"") == true && error?.reason.contains("w=0") == true)
        let good = try ImagePresets(
            try StrataConfiguration(
                from: try await ConfigurationLayers(arguments: ["--http-presets", "thumb: w=256 h=256"], environment: [:])))
        #expect(try Self.parse("preset=thumb", good).box == PixelSize(width: 256, height: 256))
    }

    @Test func aReloadedPresetMovesTheGenerationOnOnlyWhenItChanges() throws {
        let choice = PresetChoice(try Self.presets())
        #expect(choice.generation == 0)
        #expect(!choice.set(try Self.presets()), "the same presets")
        #expect(choice.generation == 0)
        #expect(choice.set(try Self.presets(["thumb": "w=128 h=128"])))
        #expect(choice.generation == 1 && choice.current.generation == 1)
        #expect(choice.set(try Self.presets(["thumb": "w=128 h=128"], only: true)), "presetsOnly alone is a change")
        #expect(choice.generation == 2)
    }
}
