import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The threads of a real `strata serve` process (its own process, so the tiers other tests start
/// in this one cannot blur the count).
@Suite("strata serve threads", .timeLimit(.minutes(5)))
struct ServeThreadsTests {
    /// The names (`comm`) of the threads of process `pid`.
    static func threadNames(of pid: Int32) throws -> [String] {
        let tasks = "/proc/\(pid)/task"
        return try FileManager.default.contentsOfDirectory(atPath: tasks).compactMap { tid in
            (try? String(contentsOfFile: "\(tasks)/\(tid)/comm", encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    @Test(
        "With memory, disk, tables, a directory and memory pressure, strata's threads are the pool's and the disk watcher, and async code runs on the event loops"
    )
    func onlyThePoolAndTheWatcher() async throws {
        let scratch = makeScratchDirectory("threads")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let (process, port, _, _) = try GracefulShutdownTests.startServe([
            "--source-directory", fixturesDirectory, "--disk-path", scratch + "/disk", "--disk-durable", "false",
            "--tables-path", scratch + "/tables", "--tables-formats", "small grid 64x64",
            "--memory-pressure-enabled", "true", "--memory-pressure-interval", "50ms",
        ])
        defer {
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
        // Cold renders (each a disk write-behind store), and one served by the tables.
        let targets =
            [160, 240, 320].map { "/images/jpeg/kite-800x500-gray.jpg?w=\($0)&h=\($0)&tolerance=0" }
            + ["/images/jpeg/cups-320x200-rgb-reference.jpg?w=64&h=64&mode=fill"]
            // Renders that fork: a large resample's bands, a progressive JPEG's halves.
            + ["/images/jpeg/path-2560x1600.jpg?w=1200&tolerance=0", "/images/jpeg/eveningglow-1024x640-progressive.jpg?w=500&tolerance=0"]
        for target in targets {
            let answer = try await get(port: port, target)
            #expect(answer.status == 200, "\(target): \(answer.status) \(answer.text)")
        }
        // Every write-behind store of those renders has been published (or counted as failed).
        var published = false
        for _ in 0..<30000 where !published {
            if let stats = try? await get(port: port, "/stats"),
                let json = try? JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any],
                let disk = json["disk"] as? [String: Any],
                (disk["stores"] as? Int ?? 0) + (disk["failedStores"] as? Int ?? 0) >= 5
            {
                published = true
            } else {
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        #expect(published)

        let all = try Self.threadNames(of: process.processIdentifier)
        print("strata serve threads: \(all.sorted())")
        // The event loops run the service and, taken over, Swift's async code too: the /stats
        // route's handler, a task, ran on one.
        #expect(all.contains { $0.hasPrefix("NIO-") }, "\(all.sorted())")
        let stats = try await get(port: port, "/stats")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
        #expect(json["asyncExecutor"] as? String == "eventLoops", "\(stats.text)")
        let names = all.filter { $0.hasPrefix("strata-") }
        let others = names.filter { !$0.hasPrefix("strata-engine-") && $0 != "strata-disk-i" }
        #expect(others.isEmpty, "threads beyond the pool and the disk watcher: \(names.sorted())")
        #expect(names.filter { $0 == "strata-disk-i" }.count == 1, "\(names.sorted())")
        #expect(names.contains { $0.hasPrefix("strata-engine-") }, "\(names.sorted())")

        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
    }
}
