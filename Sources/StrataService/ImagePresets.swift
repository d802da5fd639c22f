import Strata
import StrataConfiguration
import Synchronization

/// The `/images` presets (`http.presets`, `http.presetsOnly`): named parameter sets a request
/// asks for with `?preset=NAME`. A preset is merged into the request's query before the one
/// parser of image parameters (``ImageParameters``) reads it, so a preset means exactly what
/// its parameters mean in a URL, and a parameter added to the parser works in presets too.
///
/// - Explicit parameters add to a preset; one the preset also sets must have the same value
///   (compared as written, percent-decoded), else the request is a 400 naming both values.
/// - With ``only`` (`http.presetsOnly`), a request must name a preset and no other parameter
///   than the signature's (`sig`, `kid`, `exp`, which do not change the image).
///
/// Checked when built (at start and on each reload), so a bad preset is a configuration error
/// naming `http.presets` and the preset, never a 400 at request time. Cost per parse (not per
/// memoized target, `PreparedTargets`): one scan of the query for `preset=`; with a preset, a
/// dictionary lookup and the merged query (one string).
public struct ImagePresets: Sendable, Equatable {
    /// The query parameter naming a preset.
    public static let parameter = "preset"
    /// The configuration key the presets come from (named in every error about them).
    public static let key = "http.presets"

    /// Parameters a presets-only request may add, and no preset may hold: the signature's,
    /// which say who signed the URL and until when, not what image it is.
    package static let signatureParameters = [URLSigner.parameter, URLSigner.keyIDParameter, URLSigner.expiryParameter]

    /// One preset's parameters.
    package struct Preset: Sendable, Equatable {
        /// One `name=value` (or a bare `name`) as written in the configuration.
        package struct Pair: Sendable, Equatable {
            package var name: String
            package var value: String
            package var text: String
        }

        package var pairs: [Pair]
    }

    package let presets: [String: Preset]
    /// `http.presetsOnly`: `/images` answers presets only.
    public let only: Bool
    /// The presets' names, sorted (listed in refusals).
    package let names: [String]

    /// No presets: `preset=` is refused, every other request is parsed as it is.
    public static let none = ImagePresets(presets: [:], only: false)

    private init(presets: [String: Preset], only: Bool) {
        self.presets = presets
        self.only = only
        names = presets.keys.sorted()
    }

    /// The presets of `configuration`, each parsed as `/images` parameters with
    /// `http.maxDimension`; an error names `http.presets`, the preset and what is wrong.
    public init(_ configuration: StrataConfiguration) throws(ConfigurationError) {
        let origin = configuration.resolved.first { $0.key.name == Self.key }?.origin
        try self.init(
            definitions: configuration.http.presets, only: configuration.http.presetsOnly,
            maxDimension: configuration.http.maxDimension, origin: origin.map { "\($0)" })
    }

    /// `definitions`: preset name → parameters (`w=256 h=256 mode=fill`, separated by spaces
    /// or `&`).
    package init(definitions: [String: String], only: Bool, maxDimension: Int, origin: String? = nil) throws(ConfigurationError) {
        var presets: [String: Preset] = [:]
        for (name, text) in definitions {
            presets[name] = try Self.preset(named: name, text, only: only, maxDimension: maxDimension, origin: origin)
        }
        self.init(presets: presets, only: only)
    }

    /// Parses and checks one preset: it parses as a query, with `w=1`/`h=1` for a side it leaves
    /// to the request (a presets-only service's presets must be whole: nothing can be added).
    package static func preset(
        named name: String, _ text: String, only: Bool, maxDimension: Int, origin: String?
    ) throws(ConfigurationError) -> Preset {
        func refused(_ reason: String) -> ConfigurationError {
            ConfigurationError(key: key, value: "\(name): \(text)", reason: "preset \(name.debugDescription): \(reason)", origin: origin)
        }
        var pairs: [Preset.Pair] = []
        for token in text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "&" }) {
            let equals = token.firstIndex(of: "=")
            let pair = Preset.Pair(
                name: String(token[..<(equals ?? token.endIndex)]),
                value: equals.map { String(token[token.index(after: $0)...]) } ?? "", text: String(token))
            if pair.name == parameter || signatureParameters.contains(pair.name) {
                throw refused(
                    "\(pair.name)= cannot be part of a preset (presets hold image parameters; sig, kid and exp are the signed URL's own)")
            }
            pairs.append(pair)
        }
        let query = pairs.map(\.text).joined(separator: "&")
        do {
            _ = try ImageParameters(path: "preset", query: Substring(query), maxDimension: maxDimension)
        } catch let alone {
            // The request may give what the preset leaves out: only the sides can be missing.
            var filled = query
            for side in ["w", "h"] where !pairs.contains(where: { $0.name == side }) { filled += "&\(side)=1" }
            do {
                _ = try ImageParameters(path: "preset", query: Substring(filled), maxDimension: maxDimension)
            } catch {
                throw refused(error.message)
            }
            if only {
                throw refused(
                    "\(alone.message): with http.presetsOnly a request cannot add parameters, so each preset must name its whole box")
            }
        }
        return Preset(pairs: pairs)
    }

    /// The query the image parameters are parsed from, for a request's `query` (the signature
    /// removed): the same query without a preset; the request's parameters and its preset's
    /// (those it does not give) with one. Throws the 400s of an unknown preset, a conflict
    /// between the two, and a presets-only service's refusals.
    package func resolve(_ query: Substring?) throws(ServiceError) -> Substring? {
        guard let query, Self.namesPreset(query) else {
            if only { throw presetsOnlyRefusal(got: "no preset") }
            return query
        }
        var given: [(name: Substring, value: Substring, text: Substring)] = []
        var asked: Substring?
        for text in query.split(separator: "&") {
            let equals = text.firstIndex(of: "=")
            let name = text[..<(equals ?? text.endIndex)]
            let value = equals.map { text[text.index(after: $0)...] } ?? ""
            if name == Self.parameter {
                guard asked == nil else { throw .badParameter("parameter preset is given twice") }
                asked = value
            } else {
                given.append((name, value, text))
            }
        }
        let wanted = String(ImageParameters.decoded(asked ?? ""))
        guard let preset = presets[wanted] else {
            throw ServiceError(
                .badRequest, "unknown_preset",
                names.isEmpty
                    ? "no preset \(wanted.debugDescription): this service has no presets (http.presets)"
                    : "no preset \(wanted.debugDescription): the presets are \(names.joined(separator: ", ")) (http.presets)")
        }
        if only, let extra = given.first(where: { !Self.signatureParameters.contains(String($0.name)) }) {
            throw presetsOnlyRefusal(got: "\(extra.name)=")
        }
        var merged = given.map(\.text).joined(separator: "&")
        for pair in preset.pairs {
            if let same = given.first(where: { $0.name == pair.name }) {
                guard ImageParameters.decoded(same.value) == ImageParameters.decoded(Substring(pair.value)) else {
                    throw ServiceError(
                        .badRequest, "preset_conflict",
                        "preset \(wanted) sets \(pair.name)=\(pair.value) and the request \(pair.name)=\(same.value): leave \(pair.name) out of the request (or give the preset's value)"
                    )
                }
                continue
            }
            if !merged.isEmpty { merged += "&" }
            merged += pair.text
        }
        return Substring(merged)
    }

    /// The 400 of a request that is not a preset on a presets-only service.
    private func presetsOnlyRefusal(got: String) -> ServiceError {
        ServiceError(
            .badRequest, "presets_only",
            "this service answers presets only (http.presetsOnly): /images/{key}?preset=NAME, NAME one of \(names.joined(separator: ", ")), with no other parameter than sig, kid and exp (got \(got))"
        )
    }

    /// Whether a query has a `preset` parameter: a scan of its bytes, no allocation.
    package static func namesPreset(_ query: Substring) -> Bool {
        var rest = query.utf8[...]
        while !rest.isEmpty {
            let ampersand = rest.firstIndex(of: UInt8(ascii: "&")) ?? rest.endIndex
            let pair = rest[..<ampersand]
            if pair.starts(with: "preset".utf8) {
                let after = pair.dropFirst(6)
                if after.isEmpty || after.first == UInt8(ascii: "=") { return true }
            }
            rest = ampersand == rest.endIndex ? rest[ampersand...] : rest[rest.index(after: ampersand)...]
        }
        return false
    }
}

/// The presets in force for new requests: read once per parse (a lock), replaced by
/// ``StrataServer/apply(_:)`` when a reload changes them. Each change moves ``generation`` on,
/// and a target memoized under another generation (``PreparedTargets``) is parsed again, so an
/// old preset's meaning is never served after a reload. Cost of the memo's check: one atomic
/// load.
package final class PresetChoice: Sendable {
    private let state: Lock<(presets: ImagePresets, generation: Int)>
    private let latest = Atomic<Int>(0)

    package init(_ presets: ImagePresets) { state = Lock((presets, 0)) }

    /// The presets in force and their generation.
    package var current: (presets: ImagePresets, generation: Int) { state.withLock { $0 } }

    /// The generation of the presets in force.
    package var generation: Int { latest.load(ordering: .acquiring) }

    /// Puts `presets` in force; `false` when they are the ones in force already.
    @discardableResult
    package func set(_ presets: ImagePresets) -> Bool {
        state.withLock { state in
            guard state.presets != presets else { return false }
            state = (presets, state.generation + 1)
            latest.store(state.generation, ordering: .releasing)
            return true
        }
    }
}
