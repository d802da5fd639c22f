import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata

/// The `strata` executable built next to the test bundle (`swift test` builds every product).
func strataExecutable() -> String? {
    var candidates: [String] = []
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    if n > 0 { candidates.append(String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)) }
    candidates.append(CommandLine.arguments[0])
    for exe in candidates {
        var dir = exe
        // The test binary lives in .build/<triple>/debug/ (or inside an .xctest bundle there).
        for _ in 0..<4 {
            guard let slash = dir.lastIndex(of: "/") else { break }
            dir = String(dir[..<slash])
            let path = dir + "/strata"
            if access(path, X_OK) == 0 { return path }
        }
    }
    return nil
}

/// Starts `path` with `arguments`; returns the child's pid.
func spawn(_ path: String, _ arguments: [String]) throws -> pid_t {
    var pid: pid_t = 0
    var argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for p in argv { free(p) } }
    let rc = posix_spawn(&pid, path, nil, nil, &argv, environ)
    guard rc == 0 else { throw SystemCallError(call: "posix_spawn", path: path, errno: rc) }
    return pid
}

/// Waits for `pid`; returns its exit status, or 128 + signal.
func waitFor(_ pid: pid_t) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    if status & 0x7F == 0 { return (status >> 8) & 0xFF }
    return 128 + (status & 0x7F)
}

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

    @Test func aWriterKilledAtRandomMomentsNeverLeavesAWrongImage() throws {
        let exe = try #require(strataExecutable(), "the strata executable must be built next to the tests")
        let dir = TempDirectory()
        let entities = 24
        let format = ImageTableFormat(name: "t", family: "test", size: PixelSize(width: 48, height: 40), maximumCount: 16)
        var rng = SystemRandomNumberGenerator()
        var totalHits = 0
        var killedWhileRunning = 0
        for cycle in 0..<Self.cycles {
            // Every other cycle the child sleeps after each drawn row, so the kill lands mid-draw.
            let pid = try spawn(exe, ["table-writer", "--directory", dir.path, "--width", "48", "--height", "40",
                                      "--max-count", "16", "--entities", "\(entities)", "--seed", "\(cycle + 1)",
                                      "--row-delay-microseconds", cycle % 2 == 0 ? "0" : "100"])
            usleep(UInt32.random(in: 2_000...40_000, using: &rng))
            kill(pid, SIGKILL)
            if waitFor(pid) == 128 + SIGKILL { killedWhileRunning += 1 }
            // "Restart": a fresh instance opens (and repairs) the table, then serves what it can.
            let table = try ImageTable(directory: dir.path, format: format)
            var held: [(PixelImage, Int, UInt64)] = []
            let (hits, wrong) = verifyAllHits(table, entities: entities, held: &held)
            #expect(wrong == 0, "cycle \(cycle): \(wrong) wrong images")
            totalHits += hits
            if wrong > 0 { break }
        }
        #expect(killedWhileRunning == Self.cycles, "every child was killed, none exited on its own")
        #expect(totalHits > Self.cycles, "the writers stored entries (otherwise the test proves nothing)")
    }

    @Test func twoProcessesShareATableWithoutCorruptingIt() throws {
        let exe = try #require(strataExecutable(), "the strata executable must be built next to the tests")
        let dir = TempDirectory()
        let entities = 20
        let format = ImageTableFormat(name: "t", family: "test", size: PixelSize(width: 32, height: 32), maximumCount: 12)
        let table = try ImageTable(directory: dir.path, format: format)
        let writers = try (1...2).map { seed in
            try spawn(exe, ["table-writer", "--directory", dir.path, "--max-count", "12", "--entities", "\(entities)",
                            "--iterations", "1500", "--verify", "--seed", "\(seed)"])
        }
        // Meanwhile this process reads, holds images for a while (pinning their slots against
        // the other processes' evictions) and checks they never change under it.
        var rounds = 0, hits = 0
        var running = true
        var exits: [pid_t: Int32] = [:]
        while running {
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
