import ArgumentParser

/// `strata-test-helper`: the child processes of the crash tests (killed with SIGKILL at random
/// moments). Built with the tests, never shipped: the `strata` product has no hidden commands.
@main
struct StrataTestHelper: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "strata-test-helper",
        abstract: "Child processes of Strata's crash tests.",
        subcommands: [TableWriterCommand.self, DiskWriterCommand.self]
    )
}
