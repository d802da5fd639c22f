import ArgumentParser
import Strata
import StrataConfiguration
import StrataService

/// `strata config [--config FILE] [--KEY VALUE …]`: every effective value and where it came from.
struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Print every configuration value in force and where it came from.",
        discussion: """
            One line per key: `KEY = VALUE (ORIGIN)`, the origin being `default`, `file PATH`, \
            `environment STRATA_…` or `command line --…`. Secrets (origin headers) print as \
            <redacted>. The values are checked as an engine would check them (http.presets as \
            `strata serve` parses them): a bad value or an unknown key prints one line naming it and exits with status 2.
            """
    )

    @Flag(help: "Print the table of every key (Markdown, as in the README) instead of the values.")
    var table = false

    @OptionGroup var options: ConfigurationOptions

    func run() async throws {
        if table {
            print(StrataConfiguration.markdownTable)
            return
        }
        let (_, configuration) = await options.load()
        do {
            // The presets parsed as `strata serve` parses them (as /images parameters).
            _ = try ImagePresets(configuration)
        } catch {
            fail("\(error)", code: 2)
        }
        let width = configuration.resolved.map(\.key.name.count).max() ?? 0
        for entry in configuration.resolved {
            let name = entry.key.name.padding(toLength: width, withPad: " ", startingAt: 0)
            if entry.key.name == "iiif.pyramidPath", configuration.iiif.pyramidPathIsDefault, let path = configuration.iiif.pyramidPath {
                print("\(name) = \(path)  (default: beside disk.path)")
            } else {
                print("\(name) = \(entry.value ?? "(unset)")  (\(entry.origin))")
            }
        }
        switch configuration.source {
        case .none: print("# source: none (only cached images are served)")
        case .directory(let root): print("# source: directory \(root)")
        #if RemoteSources
        case .http(let origin): print("# source: HTTP origin \(origin.baseURL)")
        case .s3(let bucket): print("# source: \(bucket.endpoint), prefix \(bucket.prefix.debugDescription)")
        #endif
        }
    }
}
