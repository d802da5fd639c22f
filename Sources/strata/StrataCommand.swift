import ArgumentParser
import NIOCore
import NIOPosix
import Strata

/// The process's entry: `strata serve` first makes NIO's event loops Swift Concurrency's global
/// executor (before any task exists), so the service's async code — Hummingbird's handlers, the
/// engine's flights, the continuations its pool jobs resume — runs on the threads of its
/// sockets, and the service has three executors: the event loops, the engine's pool, the disk
/// watcher. Other commands keep Swift's cooperative pool (their measurements compare with it).
@main
enum StrataMain {
    static func main() async {
        if CommandLine.arguments.dropFirst().first == "serve" {
            NIOSingletons.unsafeTryInstallSingletonPosixEventLoopGroupAsConcurrencyGlobalExecutor()
        }
        await StrataCommand.main()
    }
}

struct StrataCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Strata: a multi-tier cache of decoded images.",
        subcommands: [
            ServeCommand.self, SignCommand.self, GetCommand.self, WarmCommand.self, PurgeCommand.self, StatsCommand.self,
            ConfigCommand.self,
            DecodeCommand.self,
        ]
    )
}
