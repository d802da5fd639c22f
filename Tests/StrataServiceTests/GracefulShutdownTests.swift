import Foundation
import Strata
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `strata serve` as an operator runs it: a real process, stopped with SIGTERM while requests
/// are in flight.
@Suite("strata serve process", .timeLimit(.minutes(5)))
struct GracefulShutdownTests {
    /// Starts `strata serve` on an ephemeral port; returns the process and the port it printed.
    static func startServe(_ arguments: [String], in directory: String? = nil) throws -> (Process, Int, Pipe, Pipe) {
        let exe = try #require(strataExecutable(), "the strata executable must be built next to the tests")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: exe)
        process.arguments = ["serve", "--port", "0"] + arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("STRATA_") }
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let out = Pipe()
        process.standardOutput = out
        let err = Pipe()
        process.standardError = err
        try process.run()
        // The first line: "strata: listening on http://127.0.0.1:PORT".
        var line = [UInt8]()
        let handle = out.fileHandleForReading
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = handle.readData(ofLength: 1)
            if chunk.isEmpty { break }
            line += chunk
        }
        let text = String(decoding: line, as: UTF8.self)
        let port = try #require(
            text.split(separator: ":").last.flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }, "\(text)")
        return (process, port, out, err)
    }

    @Test func sigtermDuringRequestsLosesNone() async throws {
        let scratch = makeScratchDirectory("sigterm")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (process, port, _, _) = try Self.startServe([
            "--source-directory", fixturesDirectory, "--disk-path", scratch + "/disk", "--lanes-urgent", "1",
            "--memory-pressure-enabled", "false",
        ])
        // Cold renders of large originals, one at a time (tolerance 0: each its own render and
        // its own disk file): they are still running when SIGTERM arrives.
        let targets = [600, 800, 1000].flatMap { w in
            ["jpeg/path-2560x1600.jpg", "webp/path-2560x1600.webp"].map { "/images/\($0)?w=\(w)&h=\(w)&format=jpeg&tolerance=0" }
        }
        let requests = Task {
            try await withThrowingTaskGroup(of: Answer.self) { group in
                for target in targets { group.addTask { try await get(port: port, target) } }
                return try await group.reduce(into: [Answer]()) { $0.append($1) }
            }
        }
        // Wait until every request has reached the engine, then ask the process to stop.
        var arrived = false
        for _ in 0..<30000 where !arrived {
            if let stats = try? await get(port: port, "/stats"),
                let json = try? JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any],
                let engine = json["engine"] as? [String: Any], (engine["requests"] as? Int ?? 0) >= targets.count
            {
                arrived = true
            } else {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        #expect(arrived)
        kill(process.processIdentifier, SIGTERM)
        let answers = try await requests.value
        #expect(answers.count == targets.count)
        for answer in answers {
            #expect(answer.status == 200, "\(answer.status): \(answer.text)")
            #expect(Array(answer.body.prefix(3)) == [0xFF, 0xD8, 0xFF])
        }
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
        // The disk tier's write-behind queue was drained before exit: every render is a file.
        let files = try FileManager.default.subpathsOfDirectory(atPath: scratch + "/disk").filter { !$0.hasPrefix(".") && $0.contains(".") }
        #expect(files.count >= targets.count, "\(files)")
    }

    /// The memory tier's cost limit `/stats` reports, in bytes.
    static func costLimit(port: Int) async throws -> Int? {
        let stats = try await get(port: port, "/stats")
        let json = try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any]
        return (json?["memory"] as? [String: Any])?["costLimit"] as? Int
    }

    /// Polls `/stats` for up to 20 s until the memory cost limit is `bytes`.
    static func awaitCostLimit(_ bytes: Int, port: Int) async throws -> Bool {
        for _ in 0..<200 {
            if try await costLimit(port: port) == bytes { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    /// Found by Scripts/soak.sh: `strata serve` did not run the file's provider as a service, so
    /// an edited configuration file was never read again and SIGHUP ended the process.
    @Test func serveFollowsItsConfigurationFileAndSIGHUP() async throws {
        let scratch = makeScratchDirectory("reload")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let file = scratch + "/strata.yaml"
        func write(_ limit: String) throws {
            let text = "source:\n  directory: \(fixturesDirectory)\nmemory:\n  costLimit: \(limit)\n"
            try text.write(toFile: file + ".tmp", atomically: false, encoding: .utf8)
            #expect(rename(file + ".tmp", file) == 0)
        }
        try write("48MiB")
        let (process, port, _, _) = try Self.startServe(["--config", file, "--memory-pressure-enabled", "false"])
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        #expect(try await Self.costLimit(port: port) == 48 << 20)
        // Polled (every 5 s): the edit is applied without a signal.
        try write("40MiB")
        #expect(try await Self.awaitCostLimit(40 << 20, port: port))
        // SIGHUP: read at once, and the process goes on.
        try write("44MiB")
        kill(process.processIdentifier, SIGHUP)
        #expect(try await Self.awaitCostLimit(44 << 20, port: port))
        #expect(process.isRunning)
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationReason == .exit)
        #expect(process.terminationStatus == 0)
    }

    @Test func theEmbeddedDefaultServesFixtures() async throws {
        // In a directory holding a Fixtures/ (a link to the repository's), with no configuration.
        let scratch = makeScratchDirectory("embedded")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try FileManager.default.createSymbolicLink(atPath: scratch + "/Fixtures", withDestinationPath: fixturesDirectory)
        let (process, port, out, err) = try Self.startServe([], in: scratch)
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        let answer = try await get(port: port, "/images/jpeg/kite-800x500-gray.jpg?w=200&h=200", headers: [("Accept", "image/webp")])
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "image/webp")
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(printed.contains("embedded default"))
        #expect(printed.contains("curl"))
        let logged = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(logged.contains("http.signingKey is not set"))
        #expect(FileManager.default.fileExists(atPath: scratch + "/.strata-cache/disk"))
    }
}
