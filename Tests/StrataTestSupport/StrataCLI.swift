import Foundation

/// What one run of the built `strata` executable did.
package struct StrataRun {
    package var status: Int32
    package var stdout: String
    package var stderr: String
}

/// Runs the built `strata` executable with `arguments` (as a user would, in `directory` when
/// given) and waits for it. `environment`, when given, replaces the test's own `STRATA_…`
/// variables (the rest of the environment is inherited). Throws ``StrataNotBuilt`` when there
/// is no `strata` beside the tests.
package func runStrata(_ arguments: [String], in directory: URL? = nil, environment: [String: String]? = nil) throws -> StrataRun {
    guard let exe = strataExecutable() else { throw StrataNotBuilt() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: exe)
    process.arguments = arguments
    if let directory { process.currentDirectoryURL = directory }
    if let environment {
        let inherited = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("STRATA_") }
        process.environment = inherited.merging(environment) { _, given in given }
    }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    try process.run()
    let stdout = out.fileHandleForReading.readDataToEndOfFile()
    let stderr = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return StrataRun(
        status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
        stderr: String(decoding: stderr, as: UTF8.self))
}

/// No `strata` executable beside the test bundle (`swift test` builds every product).
package struct StrataNotBuilt: Error, CustomStringConvertible {
    package var description: String { "the strata executable must be built next to the tests" }
}
