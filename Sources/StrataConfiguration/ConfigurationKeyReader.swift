import Foundation
import Strata

/// Reads keys from ``ConfigurationLayers`` one at a time, parsing each in its own syntax and
/// recording its value and origin; every error names the key, the value and the origin.
package struct KeyReader {
    /// The sources, frozen when reading began: one version of the file for every key.
    package let layers: ConfigurationLayers.Snapshot
    package var resolved: [StrataConfiguration.Resolved] = []
    /// The raw text and origin of the key read last (for errors raised after parsing).
    private var current: [String: (String, ConfigurationOrigin)] = [:]

    package init(layers: ConfigurationLayers) {
        self.init(snapshot: layers.snapshot())
    }

    package init(snapshot: ConfigurationLayers.Snapshot) {
        self.layers = snapshot
    }

    /// The key's raw value from the highest source, or its default. Records it.
    private mutating func raw(_ name: String) throws(ConfigurationError) -> (ConfigurationRawValue?, ConfigurationOrigin) {
        guard let key = StrataConfiguration.key(named: name) else {
            preconditionFailure("configuration key \(name) is read but not listed in StrataConfiguration.keys")
        }
        let found = try layers.value(of: key)
        let value: ConfigurationRawValue?
        let origin: ConfigurationOrigin
        if let found {
            (value, origin) = found
        } else {
            origin = .default
            value = key.defaultValue.map { key.isList ? .list(ConfigurationLayers.splitList($0)) : .scalar($0) }
        }
        let text = value?.description
        resolved.append(.init(key: key, value: key.isSecret && text != nil ? "<redacted>" : text, origin: origin))
        current[name] = (key.isSecret ? "<redacted>" : (text ?? ""), origin)
        return (value, origin)
    }

    private mutating func scalar(_ name: String) throws(ConfigurationError) -> String? {
        let (value, _) = try raw(name)
        switch value {
        case nil: return nil
        case .scalar(let text): return text.trimmingCharacters(in: .whitespaces)
        case .list: throw error(name, reason: "must be a single value, not a list")
        }
    }

    /// An error about `name`'s value as read.
    package func error(_ name: String, reason: String) -> ConfigurationError {
        let (value, origin) = current[name] ?? ("", .default)
        return ConfigurationError(key: name, value: value, reason: reason, origin: "\(origin)")
    }

    /// A tier's `validate()` error, with the dotted key and the value's origin.
    package func explain(_ error: ConfigurationError, section: String) -> ConfigurationError {
        let aliases = [
            "cgroupTargetFraction": "cgroupTarget", "someAvg10Threshold": "someAvg10", "fullAvg10Threshold": "fullAvg10",
            "psiTrimShare": "trimShare", "maxEntryShare": "entryShare",
        ]
        let name = section + (aliases[error.key] ?? error.key)
        var explained = self.error(name, reason: error.reason)
        if current[name] == nil { explained.value = error.value }
        return explained
    }

    package mutating func number(_ name: String, in range: ClosedRange<Double>) throws(ConfigurationError) -> Double {
        guard let value = try optionalNumber(name, in: range) else { throw error(name, reason: "must be set") }
        return value
    }

    /// A number, or `off` for none.
    package mutating func optionalNumber(_ name: String, in range: ClosedRange<Double>) throws(ConfigurationError) -> Double? {
        guard let text = try scalar(name), text.lowercased() != "off" else { return nil }
        guard let value = Double(text), value.isFinite, range.contains(value) else {
            throw error(name, reason: "must be a number within \(range.lowerBound)...\(range.upperBound)")
        }
        return value
    }

    package mutating func integer(_ name: String, min: Int) throws(ConfigurationError) -> Int {
        guard let text = try scalar(name), let value = Int(text.replacingOccurrences(of: "_", with: "")), value >= min else {
            throw error(name, reason: "must be a whole number ≥ \(min)")
        }
        return value
    }

    /// A byte size with a unit (`512MiB`).
    package mutating func bytes(_ name: String, min: Int = 0) throws(ConfigurationError) -> Int {
        guard let text = try scalar(name), let value = ConfigurationUnits.bytes(text), value >= min else {
            throw error(name, reason: "must be a size ≥ \(min) bytes, e.g. 512MiB, 1GiB, 64KB or 4096")
        }
        return value
    }

    package mutating func duration(_ name: String) throws(ConfigurationError) -> Duration {
        guard let text = try scalar(name), let value = ConfigurationUnits.duration(text) else {
            throw error(name, reason: "must be a duration, e.g. 30s, 250ms, 2m or 1h")
        }
        return value
    }

    /// A duration, or `off` for none.
    package mutating func optionalDuration(_ name: String) throws(ConfigurationError) -> Duration? {
        guard let text = try scalar(name), text.lowercased() != "off" else { return nil }
        guard let value = ConfigurationUnits.duration(text) else {
            throw error(name, reason: "must be a duration (30s, 10m, 1h) or off")
        }
        return value
    }

    package mutating func bool(_ name: String) throws(ConfigurationError) -> Bool {
        switch try scalar(name)?.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw error(name, reason: "must be true or false")
        }
    }

    package mutating func choice<T>(_ name: String, _ choices: [(String, T)]) throws(ConfigurationError) -> T {
        let text = try scalar(name)
        guard let match = choices.first(where: { $0.0.lowercased() == text?.lowercased() }) else {
            throw error(name, reason: "must be one of \(choices.map(\.0).joined(separator: ", "))")
        }
        return match.1
    }

    /// A path, or `nil` when unset or empty.
    package mutating func path(_ name: String) throws(ConfigurationError) -> String? {
        guard let text = try scalar(name), !text.isEmpty else { return nil }
        if text.utf8.contains(0) { throw error(name, reason: "must not contain a NUL byte") }
        return text
    }

    /// An optional string (unset or empty is `nil`).
    package mutating func string(_ name: String) throws(ConfigurationError) -> String? {
        guard let text = try scalar(name), !text.isEmpty else { return nil }
        return text
    }

    package mutating func list(_ name: String) throws(ConfigurationError) -> [String] {
        let (value, _) = try raw(name)
        switch value {
        case nil: return []
        case .scalar(let text): return ConfigurationLayers.splitList(text)
        case .list(let items): return items.map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }

    /// A thread count, or `cores` for the number of cores.
    package mutating func threads(_ name: String) throws(ConfigurationError) -> Int {
        let text = try scalar(name)
        if text?.lowercased() == "cores" { return Processors.online }
        guard let text, let value = Int(text), (1...1024).contains(value) else {
            throw error(name, reason: "must be a thread count within 1...1024, or cores")
        }
        return value
    }

    /// A byte size of at least 1 MiB, `auto` (a quarter of the machine's memory: the container's
    /// share arrives as a size from its own layer) or `off` (`nil`: no limit).
    package mutating func memoryLimit(_ name: String) throws(ConfigurationError) -> Int? {
        let text = try scalar(name)
        switch text?.lowercased() {
        case "off"?: return nil
        case "auto"?: return Processors.physicalMemory / 4
        default:
            guard let text, let value = ConfigurationUnits.bytes(text), value >= 1 << 20 else {
                throw error(name, reason: "must be a size ≥ 1MiB (e.g. 256MiB), auto or off")
            }
            return value
        }
    }

    /// `NAME FAMILY WxH [style=a|x|r|g] [mode=fill|fit] [max=N]`.
    package func tableFormat(_ text: String) throws(ConfigurationError) -> ImageTableFormat {
        let name = "tables.formats"
        let fields = text.split(whereSeparator: \.isWhitespace).map(String.init)
        let usage = "each format is NAME FAMILY WxH [style=a|x|r|g] [mode=fill|fit] [max=N], got \(text.debugDescription)"
        guard fields.count >= 3 else { throw error(name, reason: usage) }
        let sides = fields[2].lowercased().split(separator: "x")
        guard sides.count == 2, let width = Int(sides[0]), let height = Int(sides[1]), (1...16_384).contains(width),
            (1...16_384).contains(height)
        else { throw error(name, reason: "the size must be WxH with sides 1...16384; " + usage) }
        var format = ImageTableFormat(name: fields[0], family: fields[1], size: PixelSize(width: width, height: height), maximumCount: 1000)
        for option in fields.dropFirst(3) {
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw error(name, reason: usage) }
            switch parts[0] {
            case "style":
                guard parts[1].count == 1, let style = PixelStyle(code: Character(parts[1])) else {
                    throw error(name, reason: "style must be a, x, r or g; " + usage)
                }
                format.style = style
            case "mode":
                guard let mode = ContentMode.allCases.first(where: { "\($0)" == parts[1] }) else {
                    throw error(name, reason: "mode must be fill or fit; " + usage)
                }
                format.mode = mode
            case "max":
                guard let count = Int(parts[1]), count >= 1 else { throw error(name, reason: "max must be ≥ 1; " + usage) }
                format.maximumCount = count
            default:
                throw error(name, reason: usage)
            }
        }
        return format
    }
}
