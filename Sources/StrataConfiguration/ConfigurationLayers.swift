import Configuration
import Foundation
import Logging
import Strata
import SystemPackage

/// Where a configuration value came from, highest precedence first.
public enum ConfigurationOrigin: Sendable, Hashable, CustomStringConvertible {
    /// A command-line flag (`--memory-cost-limit 512MiB`) or a command's own option mapped to a
    /// key (`strata get --cache DIR` is `disk.path`).
    case commandLine(String)
    /// A `STRATA_…` environment variable.
    case environment(String)
    /// The configuration file (`--config FILE`).
    case file(String)
    /// The documented default (``ConfigurationKey/defaultValue``).
    case `default`
    /// A share of the container's memory limit (``ContainerSizing``), in place of the default.
    case container(limit: Int, share: Double)

    public var description: String {
        switch self {
        case .commandLine(let flag): return "command line \(flag)"
        case .environment(let name): return "environment \(name)"
        case .file(let path): return "file \(path)"
        case .default: return "default"
        case .container(let limit, let share):
            return "derived: \(Int((share * 100).rounded())) % of the cgroup memory limit (\(limit >> 20) MiB)"
        }
    }
}

/// A raw value as a source gave it: one string, or a list of them.
public enum ConfigurationRawValue: Sendable, Hashable, CustomStringConvertible {
    case scalar(String)
    case list([String])

    public var description: String {
        switch self {
        case .scalar(let text): return text
        case .list(let items): return "[" + items.joined(separator: ", ") + "]"
        }
    }
}

/// The sources of Strata's configuration, highest precedence first: command line, environment,
/// file, then the documented defaults — read through swift-configuration's providers
/// (`CommandLineArgumentsProvider`, `EnvironmentVariablesProvider`, `ReloadingFileProvider`).
///
/// Asking each source in turn (rather than one merged reader) tells where each value came
/// from, for `strata config` and for error messages. Unknown keys are errors, not ignored: a
/// `STRATA_…` variable, a `--flag` or a file key that names no ``ConfigurationKey`` is refused
/// with the closest known name, so a typo never falls back to a default in silence.
public struct ConfigurationLayers: Sendable {
    package struct Layer: Sendable {
        package var provider: any ConfigProvider
        package var origin: @Sendable (ConfigurationKey) -> ConfigurationOrigin
    }

    package var layers: [Layer]
    /// The file's reloading provider (run it as a service for reloads), when there is a file.
    public let fileProvider: ReloadingFileProvider<ConfigurationFileSnapshot>?
    /// The configuration file's path.
    public let filePath: String?

    /// Reads the command line (`arguments`: `--flag value` pairs, without the program name),
    /// the environment (only `STRATA_…` variables) and, when `filePath` is given, a YAML or
    /// JSON file (JSON is YAML), polled every `pollInterval` and on `SIGHUP` while
    /// ``fileProvider`` runs. `overrides` are values a command's own options set (highest).
    ///
    /// Throws when the file cannot be read or parsed, or when any source names an unknown key.
    public init(
        arguments: [String] = [], environment: [String: String] = ProcessInfo.processInfo.environment,
        filePath: String? = nil, overrides: [String: ConfigurationRawValue] = [:], pollInterval: Duration = .seconds(5),
        container: ContainerSizing? = ContainerSizing.detect(), logger: Logger = Logger(label: "strata.config")
    ) async throws(ConfigurationError) {
        try Self.checkFlags(arguments)
        let strata = try Self.strataVariables(environment)
        var layers: [Layer] = []
        if !overrides.isEmpty {
            var values: [AbsoluteConfigKey: ConfigValue] = [:]
            for (name, value) in overrides {
                guard let key = StrataConfiguration.key(named: name) else {
                    throw .init(key: name, reason: "not a configuration key")
                }
                switch value {
                case .scalar(let text): values[AbsoluteConfigKey(key.components)] = ConfigValue(.string(text), isSecret: key.isSecret)
                case .list(let items): values[AbsoluteConfigKey(key.components)] = ConfigValue(.stringArray(items), isSecret: key.isSecret)
                }
            }
            layers.append(Layer(provider: InMemoryProvider(name: "options", values: values)) { .commandLine($0.commandLineFlag) })
        }
        layers.append(
            Layer(provider: CommandLineArgumentsProvider(arguments: ["strata"] + arguments)) { .commandLine($0.commandLineFlag) })
        layers.append(
            Layer(provider: EnvironmentVariablesProvider(environmentVariables: strata)) { .environment($0.environmentVariable) })
        if let filePath {
            try Self.checkFileKeys(filePath)
            let provider: ReloadingFileProvider<ConfigurationFileSnapshot>
            do {
                provider = try await ReloadingFileProvider<ConfigurationFileSnapshot>(
                    filePath: FilePath(filePath), pollInterval: pollInterval, logger: logger)
            } catch {
                throw .init(key: "config", value: filePath, reason: "cannot read the configuration file: \(error)")
            }
            layers.append(Layer(provider: provider) { _ in .file(filePath) })
            self.fileProvider = provider
        } else {
            self.fileProvider = nil
        }
        // Lowest: the standard AWS variables, for every bucket's credentials that no other
        // source names (`source.s3.*`, `shared.s3.*`).
        var aws: [AbsoluteConfigKey: ConfigValue] = [:]
        for (variable, suffix) in Self.awsVariables {
            guard let value = environment[variable], !value.isEmpty else { continue }
            for section in ["source.s3", "shared.s3"] {
                guard let key = StrataConfiguration.key(named: "\(section).\(suffix)") else { continue }
                aws[AbsoluteConfigKey(key.components)] = ConfigValue(.string(value), isSecret: key.isSecret)
            }
        }
        if !aws.isEmpty {
            layers.append(
                Layer(provider: InMemoryProvider(name: "aws-environment", values: aws)) { key in
                    .environment(Self.awsVariables.first { key.name.hasSuffix(".\($0.1)") }?.0 ?? "AWS_")
                })
        }
        // Lowest of all: shares of the container's memory limit, for the keys no source sets.
        if let container {
            layers.append(Layer(provider: InMemoryProvider(name: "container", values: container.values)) { container.origin(of: $0) })
        }
        self.container = container
        self.filePath = filePath
        self.layers = layers
    }

    /// The container's memory limit the defaults were sized from (``ContainerSizing``), if any.
    public let container: ContainerSizing?

    /// The AWS SDKs' standard credential variables and the bucket keys they fill.
    package static let awsVariables: [(String, String)] = [
        ("AWS_ACCESS_KEY_ID", "accessKeyID"), ("AWS_SECRET_ACCESS_KEY", "secretAccessKey"), ("AWS_SESSION_TOKEN", "sessionToken"),
    ]

    /// The value of `key` from the highest source that has it, and which source; `nil` when
    /// none has it (the default applies). Reads the file's latest snapshot.
    public func value(of key: ConfigurationKey) throws(ConfigurationError) -> (ConfigurationRawValue, ConfigurationOrigin)? {
        try snapshot().value(of: key)
    }

    /// Every source's current values, frozen: keys read from it come from one version of the
    /// file even while it is being reloaded.
    public func snapshot() -> Snapshot {
        Snapshot(layers: layers.map { ($0.provider.snapshot(), $0.origin) })
    }

    /// The sources' values at one moment (``snapshot()``).
    public struct Snapshot: Sendable {
        package init(layers: [(any ConfigSnapshot, @Sendable (ConfigurationKey) -> ConfigurationOrigin)]) {
            self.layers = layers
        }

        package let layers: [(any ConfigSnapshot, @Sendable (ConfigurationKey) -> ConfigurationOrigin)]

        /// As ``ConfigurationLayers/value(of:)``, from these frozen values.
        public func value(of key: ConfigurationKey) throws(ConfigurationError) -> (ConfigurationRawValue, ConfigurationOrigin)? {
            let absolute = AbsoluteConfigKey(key.components)
            for (snapshot, origin) in layers {
                if let raw = try ConfigurationLayers.read(absolute, list: key.isList, from: snapshot, key: key, origin: origin(key)) {
                    return (raw, origin(key))
                }
            }
            return nil
        }
    }

    /// One key from one snapshot, whatever scalar type the source parsed it as (a JSON number,
    /// a YAML boolean, a string).
    package static func read(
        _ absolute: AbsoluteConfigKey, list: Bool, from snapshot: any ConfigSnapshot, key: ConfigurationKey,
        origin: ConfigurationOrigin
    ) throws(ConfigurationError) -> ConfigurationRawValue? {
        let types: [ConfigType] = list ? [.stringArray, .intArray, .doubleArray, .boolArray, .string] : [.string, .int, .double, .bool]
        var lastError: (any Error)?
        for type in types {
            do {
                guard let value = try snapshot.value(forKey: absolute, type: type).value else { return nil }
                switch value.content {
                case .string(let text): return list ? .list(Self.splitList(text)) : .scalar(text)
                case .int(let number): return .scalar(String(number))
                case .double(let number): return .scalar(String(number))
                case .bool(let flag): return .scalar(String(flag))
                case .stringArray(let items): return .list(items)
                case .intArray(let items): return .list(items.map(String.init))
                case .doubleArray(let items): return .list(items.map { String($0) })
                case .boolArray(let items): return .list(items.map(String.init))
                case .bytes, .byteChunkArray: return nil
                }
            } catch {
                lastError = error
            }
        }
        throw ConfigurationError(
            key: key.name, reason: "cannot be read as \(list ? "a list" : "a single value"): \(lastError.map { "\($0)" } ?? "?")",
            origin: "\(origin)")
    }

    /// A list given as one string (an environment variable): comma-separated.
    package static func splitList(_ text: String) -> [String] {
        text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    // MARK: - Unknown keys

    /// `STRATA_…` variables that are not configuration keys: the file's path (read by the
    /// commands) and the knobs of the project's own tests and scripts. Ignored, not refused.
    public static let otherVariables: Set<String> = [
        "STRATA_CONFIG", "STRATA_STRESS_SECONDS", "STRATA_DISK_KILL_CYCLES", "STRATA_TABLE_KILL_CYCLES", "STRATA_FUZZ_SCRATCH",
    ]

    /// The `STRATA_…` variables without the prefix (the provider's view), each naming a key.
    package static func strataVariables(_ environment: [String: String]) throws(ConfigurationError) -> [String: String] {
        let known = Dictionary(uniqueKeysWithValues: StrataConfiguration.keys.map { ($0.environmentVariable, $0) })
        var variables: [String: String] = [:]
        for (name, value) in environment where name.hasPrefix("STRATA_") && !otherVariables.contains(name) {
            guard known[name] != nil else {
                throw .init(
                    key: name, value: value,
                    reason: "unknown environment variable; known: \(closest(to: name, in: known.keys.sorted()))",
                    origin: "environment")
            }
            variables[String(name.dropFirst("STRATA_".count))] = value
        }
        return variables
    }

    /// Every `--flag` in `arguments` names a key.
    package static func checkFlags(_ arguments: [String]) throws(ConfigurationError) {
        let known = Set(StrataConfiguration.keys.map(\.commandLineFlag))
        for argument in arguments where argument.hasPrefix("--") {
            let flag = String(argument.split(separator: "=", maxSplits: 1)[0])
            guard known.contains(flag) else {
                throw .init(
                    key: flag, reason: "unknown option; configuration flags: \(closest(to: flag, in: known.sorted()))",
                    origin: "command line")
            }
        }
    }

    /// Every leaf key of the file names a key (a nested mapping per dot).
    package static func checkFileKeys(_ path: String) throws(ConfigurationError) {
        try checkFileKeys(path) { try ConfigurationFileKeys.leaves(ofFileAt: path) }
    }

    /// Every leaf key that `leaves` lists of the file `path` names a key.
    package static func checkFileKeys(_ path: String, leaves read: () throws -> [String]) throws(ConfigurationError) {
        let leaves: [String]
        do {
            leaves = try read()
        } catch var error as ConfigurationError {
            error.origin = error.origin ?? "file \(path)"
            throw error
        } catch {
            throw .init(key: "config", value: path, reason: "cannot read the configuration file: \(error)")
        }
        let known = StrataConfiguration.keys.map(\.name)
        for leaf in leaves where !known.contains(leaf) {
            // An empty key (`"": 1`) is named as YAML writes it, not as nothing.
            throw .init(
                key: leaf.isEmpty ? "\"\"" : leaf, reason: "unknown key; known: \(closest(to: leaf, in: known))", origin: "file \(path)")
        }
    }

    /// The known name closest to `name` (edit distance, case-insensitive), as "did you mean".
    package static func closest(to name: String, in known: [String]) -> String {
        let best = known.min { distance(name.lowercased(), $0.lowercased()) < distance(name.lowercased(), $1.lowercased()) }
        return best.map { "did you mean \($0)?" } ?? "none"
    }

    package static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a)
        let b = Array(b)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let saved = row[j]
                row[j] = min(row[j] + 1, row[j - 1] + 1, previous + (a[i - 1] == b[j - 1] ? 0 : 1))
                previous = saved
            }
        }
        return row[b.count]
    }
}
