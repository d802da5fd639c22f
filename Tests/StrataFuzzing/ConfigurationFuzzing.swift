import Configuration
import Strata
import StrataConfiguration

/// The entry point of the `FuzzConfigFile` harness of the `Fuzz/` package (a separate package,
/// so it sees only public API): the configuration file reader over arbitrary bytes. Not for any
/// other use; `@_spi(Fuzzing) import StrataConfiguration` to reach it.
package enum ConfigurationFuzzing {
    /// `precondition` whose message survives a release build (the harnesses run optimized).
    package static func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
        if !condition { fatalError(message()) }
    }

    /// The path the fuzzed file is named by in origins and errors (it is never opened).
    package static let path = "fuzz.yaml"

    /// `data` read as `strata` reads a configuration file (`--config FILE`, nothing else set): the
    /// unknown-key check over its YAML (or JSON), swift-configuration's YAML snapshot, then every
    /// key parsed in its own syntax (sizes, durations, lists, presets, key ids, …). Never traps;
    /// every refusal is a ``ConfigurationError`` (typed throws all the way). A configuration
    /// that is read is written back as a file of its raw values (every string escaped) and read
    /// again: the same values from the same origins. Returns the configuration read, for the
    /// service's own checks (presets, signing keys) in the harness.
    package static func configurationFile(_ data: UnsafeRawBufferPointer) -> StrataConfiguration? {
        // `strata` reads the file as UTF-8 text for its key check: other bytes are refused there.
        guard let text = String(validating: data, as: UTF8.self) else { return nil }
        guard let (configuration, snapshot) = read(text) else { return nil }
        // Written back: each key the file set, with its raw value.
        var values: [(ConfigurationKey, ConfigurationRawValue)] = []
        for key in StrataConfiguration.keys {
            do {
                if let (value, _) = try snapshot.value(of: key) { values.append((key, value)) }
            } catch {
                fatalError("\(key.name) was read once and refused the second time: \(error)")
            }
        }
        let written = yaml(values)
        guard let (again, _) = read(written) else {
            fatalError("the configuration written back is refused: \(written.debugDescription) (read from \(text.debugDescription))")
        }
        require(
            again.resolved == configuration.resolved,
            "the configuration written back reads differently: \(written.debugDescription) (read from \(text.debugDescription))")
        return configuration
    }

    /// The configuration in `text` and the snapshot it was read from, or `nil` when refused.
    package static func read(_ text: String) -> (StrataConfiguration, ConfigurationLayers.Snapshot)? {
        do {
            try ConfigurationLayers.checkFileKeys(path) { try ConfigurationFileKeys.leaves(of: text, path: path) }
        } catch {
            require(!error.key.isEmpty, "an error naming no key: \(error)")
            return nil
        }
        let file: ConfigurationFileSnapshot
        do {
            let bytes = Array(text.utf8)
            file = try ConfigurationFileSnapshot(data: bytes.span.bytes, providerName: path, parsingOptions: .default)
        } catch {
            // `ConfigurationLayers` refuses it: "cannot read the configuration file".
            return nil
        }
        let origin: @Sendable (ConfigurationKey) -> ConfigurationOrigin = { _ in .file(ConfigurationFuzzing.path) }
        let snapshot = ConfigurationLayers.Snapshot(layers: [(file, origin)])
        do throws(ConfigurationError) {
            let configuration = try StrataConfiguration(snapshot: snapshot)
            return (configuration, snapshot)
        } catch {
            require(!error.key.isEmpty && !error.reason.isEmpty, "an error naming no key or no reason: \(error)")
            return nil
        }
    }

    /// A YAML file of `values` (nested mappings, every string double-quoted with everything
    /// but printable ASCII escaped, so no YAML rule of plain scalars or line breaks applies).
    package static func yaml(_ values: [(ConfigurationKey, ConfigurationRawValue)]) -> String {
        final class Node {
            var children: [(String, Node)] = []
            var value: ConfigurationRawValue?

            func child(_ name: String) -> Node {
                if let found = children.first(where: { $0.0 == name }) { return found.1 }
                let made = Node()
                children.append((name, made))
                return made
            }

            var text: String {
                if let value {
                    switch value {
                    case .scalar(let text): return ConfigurationFuzzing.quoted(text)
                    case .list(let items): return "[" + items.map(ConfigurationFuzzing.quoted).joined(separator: ", ") + "]"
                    }
                }
                return "{" + children.map { "\(ConfigurationFuzzing.quoted($0.0)): \($0.1.text)" }.joined(separator: ", ") + "}"
            }
        }
        let root = Node()
        for (key, value) in values {
            key.components.reduce(root) { $0.child($1) }.value = value
        }
        return root.text + "\n"
    }

    /// `text` as a YAML double-quoted scalar.
    package static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x22: out += "\\\""
            case 0x5C: out += "\\\\"
            case 0x20...0x7E: out.unicodeScalars.append(scalar)
            case 0...0xFFFF: out += "\\u" + hex(scalar.value, digits: 4)
            default: out += "\\U" + hex(scalar.value, digits: 8)
            }
        }
        return out + "\""
    }

    package static func hex(_ value: UInt32, digits: Int) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
