import ArgumentParser
import Strata

@main
struct StrataCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Strata: a multi-tier cache of decoded images.",
        subcommands: [BenchCommand.self]
    )
}

/// `strata bench …`: measurements of each tier (release build).
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmark Strata's tiers (build with -c release).",
        subcommands: [BenchMemoryCommand.self]
    )
}
