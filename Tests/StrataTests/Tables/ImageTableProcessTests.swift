import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// Every entity/version the test-pattern writers can produce that the table serves must be the
/// exact pattern. Returns the number of hits checked.
func verifyAllHits(_ table: ImageTable, entities: Int, held: inout [(PixelImage, Int, UInt64)]) -> (hits: Int, wrong: Int) {
    var hits = 0, wrong = 0
    for n in 0..<entities {
        for version in UInt64(1)...3 {
            guard let image = table.image(for: TableTestPattern.entityID(n), sourceVersion: version) else { continue }
            hits += 1
            if !TableTestPattern.matches(image, n: n, version: version) { wrong += 1 }
            if held.count < 8 { held.append((image, n, version)) }
        }
    }
    return (hits, wrong)
}

@Suite(.serialized) struct ImageTableProcessTests {
    static let cycles = Int(getenv("STRATA_TABLE_KILL_CYCLES").flatMap { String(cString: $0) }.flatMap { Int($0) } ?? 200)

    /// What the child was doing when it was killed (its `--progress-file`), if it got that far.
    static func progress(at path: String) -> TableWriterProgress? {
        guard let file = try? FileDescriptor(open: path, flags: O_RDONLY), let bytes = try? file.readAll() else { return nil }
        return TableWriterProgress(decoding: bytes)
    }

    /// What the kill cycles found.
    struct KillOutcome: Sendable {
        var failures: [String] = []
        var totalHits = 0, killedWhileRunning = 0, tornMidDraw = 0
    }

    /// Spawns and kills `cycles` writers, checking the table after each (on a thread of its own:
    /// a minute of spawning and killing must not hold one of Swift's two cooperative threads).
    static func killCycles(_ exe: String, cycles: Int) throws -> KillOutcome {
        let dir = TempDirectory()
        let entities = 24
        let height = 40
        let format = ImageTableFormat(name: "t", family: "test", size: PixelSize(width: 48, height: height), maximumCount: 16)
        let progressPath = dir.path + "/progress"
        var rng = SystemRandomNumberGenerator()
        var outcome = KillOutcome()
        for cycle in 0..<cycles {
            unlink(progressPath)
            // Every other cycle the child sleeps after each drawn row, so the kill lands mid-draw.
            let pid = try spawn(
                exe,
                [
                    "table-writer", "--directory", dir.path, "--width", "48", "--height", "\(height)",
                    "--max-count", "16", "--entities", "\(entities)", "--seed", "\(cycle + 1)",
                    "--row-delay-microseconds", cycle % 2 == 0 ? "0" : "100",
                    "--progress-file", progressPath,
                ])
            // The kill lands at a random moment after the child has opened the table (its start-up
            // time varies a lot: debug builds, sanitizers, a loaded machine).
            do {
                try waitUntilSynchronously("the table-writer child has opened the table") {
                    Self.progress(at: progressPath) != nil || waitpid(pid, nil, WNOHANG) == pid
                }
            } catch {
                // Never leave the child running after the test.
                kill(pid, SIGKILL)
                _ = waitFor(pid)
                throw error
            }
            usleep(UInt32.random(in: 1_000...30_000, using: &rng))
            kill(pid, SIGKILL)
            if waitFor(pid) == 128 + SIGKILL { outcome.killedWhileRunning += 1 }
            let last = Self.progress(at: progressPath)
            // "Restart": a fresh instance opens (and repairs) the table, then serves what it can.
            let table = try ImageTable(directory: dir.path, format: format)
            var held: [(PixelImage, Int, UInt64)] = []
            let (hits, wrong) = verifyAllHits(table, entities: entities, held: &held)
            if wrong != 0 { outcome.failures.append("cycle \(cycle): \(wrong) wrong images") }
            outcome.totalHits += hits
            // Killed inside a draw: at most `rows + 1` rows were drawn (the next row may have been
            // drawn but not yet reported), so with two rows missing the draw had certainly not
            // finished. The slot was invalidated before the draw: the entry must be a miss.
            if let last, last.phase == .drawing, last.rows + 2 <= height {
                outcome.tornMidDraw += 1
                if table.image(for: TableTestPattern.entityID(last.entity), sourceVersion: last.version) != nil {
                    outcome.failures.append("cycle \(cycle): the entry killed after \(last.rows) of \(height) rows was served")
                }
            }
            if wrong > 0 { break }
        }
        return outcome
    }

    @Test func aWriterKilledAtRandomMomentsNeverLeavesAWrongImage() async throws {
        let exe = try #require(testHelperExecutable(), "strata-test-helper must be built next to the tests")
        let cycles = Self.cycles
        let outcome = try await offThePool("kill cycles") { try Self.killCycles(exe, cycles: cycles) }
        print(
            "table writer kill test: \(cycles) cycles, \(outcome.tornMidDraw) killed inside a draw, \(outcome.totalHits) hits checked")
        #expect(outcome.failures.isEmpty, "\(outcome.failures)")
        #expect(outcome.killedWhileRunning == cycles, "every child was killed, none exited on its own")
        #expect(outcome.totalHits > cycles, "the writers stored entries (otherwise the test proves nothing)")
        #expect(outcome.tornMidDraw > 0, "no kill landed inside a draw (otherwise the test proves nothing about torn writes)")
    }

    @Test func twoProcessesShareATableWithoutCorruptingIt() throws {
        let exe = try #require(testHelperExecutable(), "strata-test-helper must be built next to the tests")
        let dir = TempDirectory()
        let entities = 20
        let format = ImageTableFormat(name: "t", family: "test", size: PixelSize(width: 32, height: 32), maximumCount: 12)
        let table = try ImageTable(directory: dir.path, format: format)
        let writers = try (1...2).map { seed in
            try spawn(
                exe,
                [
                    "table-writer", "--directory", dir.path, "--max-count", "12", "--entities", "\(entities)",
                    "--iterations", "1500", "--verify", "--seed", "\(seed)",
                ])
        }
        // Meanwhile this process reads, holds images for a while (pinning their slots against
        // the other processes' evictions) and checks they never change under it.
        var rounds = 0, hits = 0
        var running = true
        var exits: [pid_t: Int32] = [:]
        let deadline = monotonicNanoseconds() + 120 * 1_000_000_000
        while running {
            guard monotonicNanoseconds() < deadline else {
                for pid in writers where exits[pid] == nil {
                    kill(pid, SIGKILL)
                    exits[pid] = waitFor(pid)
                }
                Issue.record("the writers did not finish 1500 iterations each within 120 s (killed)")
                break
            }
            var held: [(PixelImage, Int, UInt64)] = []
            let (h, wrong) = verifyAllHits(table, entities: entities, held: &held)
            hits += h
            #expect(wrong == 0)
            usleep(2_000)
            for (image, n, version) in held {
                #expect(TableTestPattern.matches(image, n: n, version: version), "a held image changed under its reader")
            }
            rounds += 1
            for pid in writers where exits[pid] == nil {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid { exits[pid] = status }
            }
            running = exits.count < writers.count
        }
        #expect(exits.values.allSatisfy { $0 == 0 }, "both writers (which verify what they read) exit cleanly: \(exits)")
        var held: [(PixelImage, Int, UInt64)] = []
        let (finalHits, wrong) = verifyAllHits(table, entities: entities, held: &held)
        #expect(wrong == 0)
        #expect(finalHits > 0)
        #expect(table.count <= 12)
        #expect(hits > 0 && rounds > 1)
        // A fresh instance (rebuilding nothing) agrees.
        let reopened = try ImageTable(directory: dir.path, format: format)
        var held2: [(PixelImage, Int, UInt64)] = []
        #expect(verifyAllHits(reopened, entities: entities, held: &held2).wrong == 0)
    }
}
