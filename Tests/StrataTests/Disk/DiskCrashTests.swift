import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
import StrataTestSupport

/// What the `strata-test-helper disk-writer` children wrote to their logs during one cycle.
struct DiskWriterLogs {
    /// `ack n w h version` lines of the writer: durable stores that returned.
    var acknowledged: [(name: String, n: Int, size: PixelSize, version: UInt64)] = []
    /// Names the deleter deleted or replaced (or was about to), and whether it removed all.
    var touchedNames: Set<String> = []
    var removedAll = false
    var readyCount = 0

    static func read(_ path: String) -> [Substring] {
        guard let file = try? FileDescriptor(open: path, flags: O_RDONLY), let bytes = try? file.readAll() else { return [] }
        let text = String(decoding: bytes, as: UTF8.self)
        // A kill can leave the last line unterminated: ignore it.
        guard let lastNewline = text.lastIndex(of: "\n") else { return [] }
        return text[..<lastNewline].split(separator: "\n")
    }

    static func name(n: Int, size: PixelSize) -> String {
        DiskFileName(digest: ImageEntityID(hashing: "k\(n)"), variant: VariantDescriptor(size: size)).string
    }

    init(writer: String, deleter: String) {
        for line in Self.read(writer) {
            let f = line.split(separator: " ")
            if f.first == "ready" { readyCount += 1 }
            guard f.count == 5, f[0] == "ack", let n = Int(f[1]), let w = Int(f[2]), let h = Int(f[3]), let v = UInt64(f[4])
            else { continue }
            let size = PixelSize(width: w, height: h)
            acknowledged.append((Self.name(n: n, size: size), n, size, v))
        }
        for line in Self.read(deleter) {
            let f = line.split(separator: " ")
            switch f.first {
            case "ready": readyCount += 1
            case "all": removedAll = true
            case "evict" where f.count == 2: touchedNames.insert(String(f[1]))
            case "remove" where f.count == 2:
                if let n = Int(f[1]) {
                    for size in DiskWriterCommandSizes.all { touchedNames.insert(Self.name(n: n, size: size)) }
                }
            case "store" where f.count == 4:
                if let n = Int(f[1]), let w = Int(f[2]), let h = Int(f[3]) {
                    touchedNames.insert(Self.name(n: n, size: PixelSize(width: w, height: h)))
                }
            default: break
            }
        }
    }
}

/// The sizes `strata-test-helper disk-writer` stores (kept in step with `DiskWriterCommand.sizes`).
enum DiskWriterCommandSizes {
    static let all = [PixelSize(width: 24, height: 16), PixelSize(width: 40, height: 25), PixelSize(width: 300, height: 240)]
}

@Suite(.serialized) struct DiskCrashTests {
    static let cycles = Int(getenv("STRATA_DISK_KILL_CYCLES").flatMap { String(cString: $0) }.flatMap { Int($0) } ?? 200)
    static let keys = 12

    /// Names of temporary files in `directory`.
    static func temporaries(in directory: String) throws -> [String] {
        let dir = try FileDescriptor(directory: directory)
        var names: [String] = []
        try DirectoryScan.forEachName(in: dir) { bytes, _ in
            if bytes.starts(with: Array(DiskFileName.temporaryPrefix.utf8)) { names.append(String(decoding: bytes, as: UTF8.self)) }
        }
        return names
    }

    /// Found by the kill test: a write-behind store queued before a synchronous store of the
    /// same variant was published after it, putting the older version back.
    @Test func aSynchronousStoreIsNotOverwrittenByOlderQueuedStores() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        let size = PixelSize(width: 64, height: 48)
        for round in 0..<20 {
            let base = UInt64(round * 100)
            for version in base + 1...base + 30 {
                var image = PixelImage(width: size.width, height: size.height)
                TableTestPattern.draw(&image, n: 1, version: version)
                tier.store(image, forKey: "k1", sourceVersion: version)
            }
            var newest = PixelImage(width: size.width, height: size.height)
            TableTestPattern.draw(&newest, n: 1, version: base + 99)
            try tier.storeSynchronously(newest, forKey: "k1", sourceVersion: base + 99)
            tier.flush()
            let hit = try #require(try tier.hit(forKey: "k1", matching: SizeQuery(box: size, tolerance: 0)))
            #expect(hit.sourceVersion == base + 99, "round \(round): an older write-behind store landed over the synchronous one")
            #expect(TableTestPattern.matches(hit.image, n: 1, version: hit.sourceVersion))
        }
    }

    /// What the kill loop saw: counts, and every broken promise.
    struct KillLoopResult: Sendable {
        var killed = 0, acknowledged = 0, hitsChecked = 0, temporariesLeft = 0, durableChecked = 0
        var problems: [String] = []
    }

    @Test func writersAndDeletersKilledAtRandomMomentsNeverLeaveAWrongImageOrLoseAnAcknowledgedStore() async throws {
        let exe = try #require(testHelperExecutable(), "strata-test-helper must be built next to the tests")
        // Minutes of spawning, sleeping and killing: on a thread of its own, not the pool's.
        let r = try await offThePool("disk-kill-loop") { try Self.killLoop(exe, cycles: Self.cycles) }
        print(
            "disk kill test: \(Self.cycles) cycles, \(r.killed) kills, \(r.acknowledged) durable stores acknowledged, "
                + "\(r.durableChecked) checks of acknowledged stores, \(r.hitsChecked) hits verified, "
                + "\(r.temporariesLeft) temporary files left by killed writers and cleaned, \(r.problems.count) problems")
        #expect(r.problems.isEmpty, "\(r.problems.count) broken promises, the first: \(r.problems.prefix(5))")
        #expect(r.killed == 2 * Self.cycles, "every child was killed, none exited on its own")
        #expect(r.acknowledged > 0 && r.durableChecked > 0, "durable stores were acknowledged and checked after kills")
        #expect(r.hitsChecked > Self.cycles, "the fresh tiers served images (otherwise the test proves nothing)")
        #expect(r.temporariesLeft > 0, "no kill landed between a temporary file's creation and its rename (the cleanup went untested)")
    }

    static func killLoop(_ exe: String, cycles: Int) throws -> KillLoopResult {
        let scratch = ScratchDirectory()
        let dir = scratch.path
        try FileDescriptor.makeDirectories(dir)
        let writerLog = scratch.parent + "/writer.log", deleterLog = scratch.parent + "/deleter.log"
        var rng = SystemRandomNumberGenerator()
        // Acknowledged durable stores that no deleter has touched since: name → smallest version
        // the file under that name may hold.
        var mustHold: [String: (n: Int, size: PixelSize, version: UInt64)] = [:]
        var r = KillLoopResult()
        for cycle in 0..<cycles {
            unlink(writerLog)
            unlink(deleterLog)
            let common = ["disk-writer", "--directory", dir, "--keys", "\(Self.keys)"]
            let writer = try spawn(exe, common + ["--role", "writer", "--log", writerLog, "--seed", "\(2 * cycle + 2)"])
            let deleter = try spawn(exe, common + ["--role", "deleter", "--log", deleterLog, "--seed", "\(2 * cycle + 1)"])
            try waitUntilSynchronously("both disk-writer children have opened the tier", seconds: 120) {
                DiskWriterLogs(writer: writerLog, deleter: deleterLog).readyCount == 2
                    || waitpid(writer, nil, WNOHANG) == writer || waitpid(deleter, nil, WNOHANG) == deleter
            }
            // Each child dies at its own random moment.
            let (first, second) = Bool.random(using: &rng) ? (writer, deleter) : (deleter, writer)
            usleep(UInt32.random(in: 1_000...25_000, using: &rng))
            kill(first, SIGKILL)
            usleep(UInt32.random(in: 0...10_000, using: &rng))
            kill(second, SIGKILL)
            for pid in [writer, deleter] where waitFor(pid) == 128 + SIGKILL { r.killed += 1 }

            let logs = DiskWriterLogs(writer: writerLog, deleter: deleterLog)
            r.acknowledged += logs.acknowledged.count
            for ack in logs.acknowledged where (mustHold[ack.name]?.version ?? 0) < ack.version {
                mustHold[ack.name] = (ack.n, ack.size, ack.version)
            }
            if logs.removedAll { mustHold = [:] }
            for name in logs.touchedNames { mustHold[name] = nil }
            r.temporariesLeft += try Self.temporaries(in: dir).count

            // "Restart": a fresh tier on the directory.
            let tier = try DiskTier(directory: dir, configuration: unwatchedConfiguration { $0.checksumPolicy = .everyHit })
            if try !Self.temporaries(in: dir).isEmpty { r.problems.append("cycle \(cycle): temporary files of killed writers were left") }
            for n in 0..<Self.keys {
                for size in DiskWriterCommandSizes.all {
                    let hit = try tier.hit(forKey: "k\(n)", matching: SizeQuery(box: size, tolerance: 0))
                    let name = DiskWriterLogs.name(n: n, size: size)
                    if let expected = mustHold[name] {
                        r.durableChecked += 1
                        if hit == nil {
                            r.problems.append(
                                "cycle \(cycle): the acknowledged durable store \(name) (version \(expected.version)) is gone")
                        } else if let hit, hit.sourceVersion < expected.version {
                            r.problems.append("cycle \(cycle): \(name) went back from version \(expected.version) to \(hit.sourceVersion)")
                        }
                    }
                    guard let hit else { continue }
                    r.hitsChecked += 1
                    if hit.variant.size != size || !TableTestPattern.matches(hit.image, n: n, version: hit.sourceVersion) {
                        r.problems.append("cycle \(cycle): \(name) holds a wrong or torn image")
                    }
                }
            }
            if tier.statistics.invalidFiles != 0 { r.problems.append("cycle \(cycle): files that fail verification were published") }
            tier.close()
        }
        return r
    }
}
