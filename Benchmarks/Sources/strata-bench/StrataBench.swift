import ArgumentParser
import Strata

/// `strata-bench …`: measurements of each tier (release build), out of the shipped `strata`
/// binary. Build and run from the repository root (the benches read `Fixtures/`):
///
///     swift build -c release --package-path Benchmarks --scratch-path .build-bench
///     .build-bench/release/strata-bench memory --threads 1
///
/// Like `strata`'s commands other than `serve`, these run on Swift's cooperative pool.
@main
struct StrataBenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata-bench",
        abstract: "Benchmark Strata's tiers (build with -c release).",
        subcommands: [
            BenchSourceCommand.self, BenchGravityCommand.self, BenchCodecsCommand.self, ResampleBenchCommand.self, BenchDiskCommand.self,
            BenchScrollCommand.self, BenchMemoryCommand.self, BenchLocksCommand.self, BenchEngineCommand.self, BenchNegativeCommand.self,
            BenchEighthCommand.self, BenchOperationsCommand.self, BenchS3FetchCommand.self,
        ]
    )
}

/// Runs are reproducible from a seed (the name `strata`'s commands use).
typealias SplitMix = SplitMix64
