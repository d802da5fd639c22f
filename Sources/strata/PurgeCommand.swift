import ArgumentParser
import Foundation
import Strata
import StrataConfiguration

/// `strata purge KEY [--cache DIR] [--config FILE] [--KEY VALUE …]`
struct PurgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "purge",
        abstract: "Drop every variant of KEY from the configured disk tier and image tables, offline.",
        discussion: """
            What `DELETE /images/{key}` does to a running `strata serve`, for a cache directory \
            no server holds open — or one that others share: processes sharing the disk \
            directory drop their memory copies as the files go (inotify). The tiers are those \
            of the configuration (--config FILE, STRATA_… variables, configuration flags; see \
            `strata config`): disk.path (--cache) and the image tables. Prints one line. \
            Exits with status 2 when the configuration or a directory is unusable.
            """
    )

    @Argument(help: "The key to purge (as an /images URL names it, without the query).")
    var key: String

    @Option(help: "Disk tier directory (disk.path).")
    var cache: String?

    @OptionGroup var configurationOptions: ConfigurationOptions

    func validate() throws {
        if key.isEmpty || key.utf8.contains(0) { throw ValidationError("\(key.debugDescription) is not a key") }
    }

    func run() async throws {
        var overrides: [String: ConfigurationRawValue] = [:]
        if let cache { overrides["disk.path"] = .scalar(cache) }
        var (_, configuration) = await configurationOptions.load(overrides: overrides)
        guard configuration.diskPath != nil || configuration.tablesPath != nil else {
            fail("nothing to purge: neither disk.path (--cache) nor image tables are configured", code: 2)
        }
        configuration.disk.useInotify = false  // this process serves nothing
        configuration.memoryPressure = nil
        let configured: ConfiguredImageCache
        do {
            configured = try ConfiguredImageCache(configuration)
        } catch {
            fail("purge: \(error)", code: 2)
        }
        // Every derived key: both colour choices, each gravity a client can name.
        await configured.cache.remove(keys: CacheKey.allDerived(from: key))
        print("purged \(key)")
        await configured.shutdown()
    }
}
