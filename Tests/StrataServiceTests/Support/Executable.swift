import Foundation

/// The `strata` executable built beside the test bundle (`swift test` builds every product):
/// the first `strata` in the directories above this process's executable.
func strataExecutable() -> String? {
    let exe = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = dir.appendingPathComponent("strata").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir.deleteLastPathComponent()
    }
    return nil
}

/// Runs the built `strata` with `arguments` (no `STRATA_` variables, standard error discarded)
/// and waits: its exit status and its standard output.
func runStrata(_ arguments: [String]) throws -> (status: Int32, output: String) {
    guard let exe = strataExecutable() else {
        throw CocoaError(.fileNoSuchFile, userInfo: [NSLocalizedDescriptionKey: "the strata executable must be built next to the tests"])
    }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: exe)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("STRATA_") }
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.run()
    let output = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    return (process.terminationStatus, output)
}
