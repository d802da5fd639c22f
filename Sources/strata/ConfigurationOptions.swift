import ArgumentParser
import Foundation
import Strata
import StrataConfiguration

/// The configuration options every command that builds an engine takes: `--config FILE` (or
/// `STRATA_CONFIG`), then any configuration key as a flag (`--memory-cost-limit 512MiB`), over
/// the `STRATA_…` environment variables, over the file, over the defaults.
struct ConfigurationOptions: ParsableArguments {
    @Option(help: "A YAML or JSON configuration file (default: $STRATA_CONFIG, else none).")
    var config: String?

    @Argument(
        parsing: .allUnrecognized,
        help: "Configuration keys as flags, e.g. --memory-cost-limit 512MiB --lanes-urgent 4 (see `strata config`).")
    var settings: [String] = []

    /// The configuration file in effect.
    var filePath: String? { config ?? ProcessInfo.processInfo.environment["STRATA_CONFIG"] }

    /// The layered sources; `overrides` are the command's own options mapped to keys. Exits
    /// with status 2 and a message naming the key on any error.
    func layers(overrides: [String: ConfigurationRawValue] = [:]) async -> ConfigurationLayers {
        do {
            return try await ConfigurationLayers(arguments: settings, filePath: filePath, overrides: overrides)
        } catch {
            fail("\(error)", code: 2)
        }
    }

    /// The checked configuration, or exit 2 naming the key.
    func load(overrides: [String: ConfigurationRawValue] = [:]) async -> (ConfigurationLayers, StrataConfiguration) {
        let layers = await layers(overrides: overrides)
        do {
            return (layers, try StrataConfiguration(from: layers))
        } catch {
            fail("\(error)", code: 2)
        }
    }
}
