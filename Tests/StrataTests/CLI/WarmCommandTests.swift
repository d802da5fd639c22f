import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// `strata warm` and `strata stats` as a user runs them: the built executable over a temporary
/// copy of a few fixtures and a temporary cache directory.
@Suite(.timeLimit(.minutes(3))) struct WarmCommandTests {
    /// A directory of originals and a cache directory, removed at the end.
    final class Setup {
        let root: String
        var originals: String { root + "/originals" }
        var cache: String { root + "/cache" }

        /// Copies `fixtures` (paths under Fixtures/, copied as `as` names) into the originals.
        init(_ fixtures: [(fixture: String, as: String)]) throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("strata-warm-\(UUID().uuidString)").path
            for (fixture, name) in fixtures {
                let target = originals + "/" + name
                try FileManager.default.createDirectory(
                    atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try FileManager.default.copyItem(atPath: Fixtures.url(fixture).path, toPath: target)
            }
        }

        deinit { try? FileManager.default.removeItem(atPath: root) }

        func cacheFiles() -> [String] {
            ((try? FileManager.default.contentsOfDirectory(atPath: cache)) ?? []).filter { $0.hasSuffix(".px") }
        }
    }

    /// Three photos larger than both boxes, one broken JPEG, a hidden photo and a text file.
    static let fewFixtures: [(fixture: String, as: String)] = [
        ("jpeg/kite-800x500-gray.jpg", "kite.jpg"),
        ("jpeg/cups-320x200-rgb-reference.jpg", "albums/cups.jpg"),
        ("jpeg/eveningglow-1024x640-progressive.jpg", "albums/2024/glow.jpg"),
        ("broken/truncated-baseline.jpg", "albums/broken.jpg"),
        ("jpeg/kite-800x500-gray.jpg", ".hidden.jpg"),
        ("README.md", "notes.txt"),
    ]

    @Test func warmCountsFailuresFillsTheDiskTierAndASecondRunFindsItCached() throws {
        let setup = try Setup(Self.fewFixtures)
        let arguments = ["warm", setup.originals, "--size", "64x64", "--size", "160x160", "--cache", setup.cache]
        let first = try runStrata(arguments)
        #expect(first.status == 1, "one original is broken: \(first.stdout) \(first.stderr)")
        let summary = first.summary
        #expect(summary["requests"]?.hasPrefix("8 (4 files × 2 sizes)") == true, "\(first.stdout)")
        #expect(summary["warmed"] == "6", "\(first.stdout)")
        #expect(summary["already cached"] == "0 (memory 0, disk 0, table 0)", "\(first.stdout)")
        #expect(summary["failed"] == "2", "\(first.stdout)")
        #expect(summary["skipped"]?.hasPrefix("2 files") == true, "the hidden file and the text file: \(first.stdout)")
        #expect(summary["elapsed"] != nil && summary["rate"]?.hasSuffix("images/s") == true)
        let reasons = first.stdout.split(separator: "\n").filter { $0.hasPrefix("  ") }
        #expect(reasons.count == 2 && reasons.allSatisfy { $0.contains("albums/broken.jpg") }, "\(first.stdout)")
        #expect(setup.cacheFiles().count == 6)

        // Another process with the same cache is served from disk.
        let get = try runStrata(["get", "albums/2024/glow.jpg", "--size", "160x160", "--source", setup.originals, "--cache", setup.cache])
        #expect(get.status == 0 && get.served?.tier == "disk", "\(get.stdout) \(get.stderr)")

        let second = try runStrata(arguments)
        #expect(second.status == 1, "\(second.stdout) \(second.stderr)")
        #expect(second.summary["warmed"] == "0", "\(second.stdout)")
        #expect(second.summary["already cached"] == "6 (memory 0, disk 6, table 0)", "\(second.stdout)")
        #expect(second.summary["failed"] == "2")
        #expect(setup.cacheFiles().count == 6)
    }

    @Test func warmRefusesBadUsageWithStatus2() throws {
        let setup = try Setup([("jpeg/kite-800x500-gray.jpg", "kite.jpg")])
        let missing = try runStrata(["warm", setup.root + "/nowhere", "--size", "64x64", "--cache", setup.cache])
        #expect(missing.status == 2 && missing.stderr.contains(setup.root + "/nowhere"), "\(missing.stderr)")
        let noSize = try runStrata(["warm", setup.originals, "--cache", setup.cache])
        #expect(noSize.status != 0 && noSize.stderr.contains("--size"), "\(noSize.stderr)")
        let noCache = try runStrata(["warm", setup.originals, "--size", "64x64"], environment: [:])
        #expect(noCache.status == 2 && noCache.stderr.contains("--cache"), "\(noCache.stderr)")
        let badKey = try runStrata(["warm", setup.originals, "--size", "64x64", "--cache", setup.cache, "--memory-cost-limit", "lots"])
        #expect(badKey.status == 2 && badKey.stderr.contains("memory.costLimit"), "\(badKey.stderr)")
        #expect(setup.cacheFiles().isEmpty)
    }

    @Test func sigintCancelsPrintsTheSummaryAndLeavesValidFiles() throws {
        // Far more work than a second: 12 photos × 40 sizes, interrupted after the first
        // progress line (which comes after a second, once the signal handlers are in place).
        let setup = try Setup((0..<12).map { ("jpeg/path-2560x1600.jpg", "photo-\($0).jpg") })
        let sizes = (0..<40).flatMap { ["--size", "\(400 + 17 * $0)x\(400 + 17 * $0)"] }
        let exe = try #require(strataExecutable())
        let process = Process()
        process.executableURL = URL(fileURLWithPath: exe)
        process.arguments = ["warm", setup.originals, "--cache", setup.cache] + sizes
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        var stderr = Data()
        while !String(decoding: stderr, as: UTF8.self).contains("strata: warm: ") {
            let chunk = err.fileHandleForReading.availableData
            if chunk.isEmpty { break }  // exited before any progress line
            stderr += chunk
        }
        #expect(kill(process.processIdentifier, SIGINT) == 0)
        let stdoutData = out.fileHandleForReading.readDataToEndOfFile()
        stderr += err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let stdout = String(decoding: stdoutData, as: UTF8.self)
        #expect(
            process.terminationReason == .exit && process.terminationStatus == 130, "\(stdout) \(String(decoding: stderr, as: UTF8.self))")
        let interrupted = try #require(stdout.summary["interrupted"], "\(stdout)")
        #expect(interrupted.hasPrefix("by SIGINT, ") && interrupted.hasSuffix(" of 480 requests done"), "\(stdout)")
        #expect(stdout.summary["not done"] != nil && stdout.summary["failed"] == "0", "\(stdout)")

        // Every published file is whole and valid, and a later get is served.
        let published = setup.cacheFiles()
        for name in published {
            let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: setup.cache + "/" + name)))
            let variant = try #require(DiskFileName(name)?.variant)
            let header = try bytes.withUnsafeBytes { try DiskFileHeader(validating: $0) }
            let valid = bytes.withUnsafeBytes { raw in
                DiskFileValidation.validate(
                    raw, variant: variant, key: UnsafeRawBufferPointer(rebasing: raw[64..<(64 + header.keyLength)]), verifyPixels: true)
            }
            guard case .valid = valid else {
                Issue.record("\(name) is not valid: \(valid)")
                continue
            }
        }
        let get = try runStrata(["get", "photo-0.jpg", "--size", "400x400", "--source", setup.originals, "--cache", setup.cache])
        #expect(get.status == 0, "\(get.stderr)")
    }

    @Test func statsCountsAWarmedCacheAndChangesNothing() throws {
        let setup = try Setup(Self.fewFixtures)
        let warm = try runStrata(["warm", setup.originals, "--size", "64x64", "--size", "160x160", "--cache", setup.cache])
        #expect(warm.status == 1)
        let foreign = try makeForeignTemporaryFile(in: setup.cache)
        let before = try DirectorySnapshot(of: setup.cache)

        let text = try runStrata(["stats", "--cache", setup.cache])
        #expect(text.status == 0, "\(text.stderr)")
        #expect(text.stdout.contains("disk tier \(setup.cache)"), "\(text.stdout)")
        #expect(text.stdout.contains("  files            6\n") && text.stdout.contains("  keys             3\n"), "\(text.stdout)")
        #expect(text.stdout.contains("  temporary files  1 "), "\(text.stdout)")

        let json = try runStrata(["stats", "--cache", setup.cache, "--json"])
        #expect(json.status == 0, "\(json.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any], "\(json.stdout)")
        let disk = try #require(object["disk"] as? [String: Any])
        #expect(disk["files"] as? Int == 6 && disk["keys"] as? Int == 3 && disk["temporaryFiles"] as? Int == 1)
        #expect(disk["path"] as? String == setup.cache)
        #expect((disk["chargedBytes"] as? Int ?? 0) > 0 && disk["byteLimit"] as? Int == 1 << 30)
        let variants = try #require(disk["variants"] as? [[String: Any]])
        #expect(variants.reduce(0) { $0 + ($1["files"] as? Int ?? 0) } == 6)
        let buckets = try #require(disk["longestSide"] as? [[String: Any]])
        #expect(buckets.reduce(0) { $0 + ($1["files"] as? Int ?? 0) } == 6)
        #expect(object["tables"] is NSNull)

        #expect(try DirectorySnapshot(of: setup.cache) == before, "stats changed the cache directory")
        #expect(FileManager.default.fileExists(atPath: setup.cache + "/" + foreign))
    }

    @Test func statsBesideALiveTierAndTablesReadsWithoutDisturbingThem() throws {
        let setup = try Setup([])
        let tablesPath = setup.root + "/tables"
        // A live disk tier (watching, as a server's does) and a table with entries.
        let tier = try DiskTier(directory: setup.cache, configuration: quietConfiguration())
        defer { tier.close() }
        for seed in 1...3 { try tier.storeSynchronously(patternImage(width: 30, height: 20, seed: UInt8(seed)), forKey: "k\(seed)") }
        let format = ImageTableFormat(name: "thumb", family: "thumbs", size: PixelSize(width: 64, height: 64), maximumCount: 16)
        let table = try ImageTable(directory: tablesPath, format: format)
        for n in 1...4 { try storePattern(table, n) }
        try table.flush()
        let diskBefore = try DirectorySnapshot(of: setup.cache)
        let tablesBefore = try DirectorySnapshot(of: tablesPath)

        let result = try runStrata(
            ["stats", "--cache", setup.cache, "--tables", tablesPath, "--tables-formats", "thumb thumbs 64x64 max=16", "--json"],
            environment: [:])
        #expect(result.status == 0, "\(result.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any], "\(result.stdout)")
        let disk = try #require(object["disk"] as? [String: Any])
        #expect(disk["files"] as? Int == 3 && disk["keys"] as? Int == 3)
        let tables = try #require(object["tables"] as? [String: Any])
        let formats = try #require(tables["formats"] as? [[String: Any]])
        #expect(formats.count == 1 && formats.first?["name"] as? String == "thumb", "\(result.stdout)")
        #expect(formats.first?["state"] as? String == "valid" && formats.first?["entries"] as? Int == 4, "\(result.stdout)")
        #expect(formats.first?["problem"] is NSNull)

        #expect(try DirectorySnapshot(of: setup.cache) == diskBefore)
        #expect(try DirectorySnapshot(of: tablesPath) == tablesBefore)
        // The live tier saw nothing happen: same entries, every file still a hit.
        #expect(tier.statistics.entries == 3 && tier.statistics.invalidFiles == 0)
        for seed in 1...3 { #expect(try tier.image(forKey: "k\(seed)", matching: SizeQuery(box: PixelSize(width: 30, height: 20))) != nil) }
        #expect(hit(table, 1) != nil && table.count == 4)
    }

    @Test func statsOnAMissingDirectoryExits2NamingIt() throws {
        let setup = try Setup([])
        let missing = setup.root + "/no-cache-here"
        let result = try runStrata(["stats", "--cache", missing])
        #expect(result.status == 2, "\(result.stdout) \(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains(missing), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: missing), "stats created the directory")
        let json = try runStrata(["stats", "--cache", missing, "--json"])
        #expect(json.status == 2 && json.stdout.isEmpty)
        let tables = try runStrata(["stats", "--tables", missing, "--tables-formats", "thumb thumbs 64x64"], environment: [:])
        #expect(tables.status == 2 && tables.stderr.contains(missing), "\(tables.stderr)")
        #expect(!FileManager.default.fileExists(atPath: missing))
    }
}

extension StrataRun {
    /// The `label: value` lines of `strata warm`'s summary.
    var summary: [String: String] { stdout.summary }
}

extension String {
    /// The `label: value` lines of `strata warm`'s summary (indented lines left out).
    var summary: [String: String] {
        var fields: [String: String] = [:]
        for line in split(separator: "\n") where !line.hasPrefix(" ") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[String(line[..<colon])] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return fields
    }
}
