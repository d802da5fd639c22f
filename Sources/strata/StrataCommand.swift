import ArgumentParser
import Strata

@main
struct StrataCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata",
        abstract: "Strata: a multi-tier cache of decoded images.",
        subcommands: [
            ServeCommand.self, SignCommand.self, GetCommand.self, WarmCommand.self, PurgeCommand.self, StatsCommand.self,
            ConfigCommand.self,
            DecodeCommand.self, BenchCommand.self,
            TableWriterCommand.self, DiskWriterCommand.self,
        ]
    )
}

/// `strata bench …`: measurements of each tier (release build).
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Benchmark Strata's tiers (build with -c release).",
        subcommands: [
            BenchSourceCommand.self, BenchGravityCommand.self, BenchCodecsCommand.self, ResampleBenchCommand.self, BenchDiskCommand.self,
            BenchScrollCommand.self, BenchMemoryCommand.self, BenchLocksCommand.self, BenchEngineCommand.self, BenchNegativeCommand.self,
            BenchEighthCommand.self,
        ]
    )
}
