import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// `strata get` as a user runs it: the built executable, a real source directory and a real disk
/// tier directory shared by separate processes.
@Suite(.timeLimit(.minutes(4))) struct GetCommandTests {

    func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("strata-get-\(UUID().uuidString)-\(name)").path
    }

    func files(in directory: String) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).filter { !$0.hasPrefix(".") }
    }

    @Test func aSecondProcessWithTheSameCacheIsServedFromDisk() throws {
        let cache = temporaryPath("cache")
        let out = temporaryPath("first.png")
        defer {
            try? FileManager.default.removeItem(atPath: cache)
            unlink(out)
        }
        let arguments = ["get", "jpeg/fallenleaf-2048x1280-420.jpg", "--size", "512x512", "--source", Fixtures.directory.path]
        let first = try runStrata(arguments + ["--cache", cache, "--out", out])
        #expect(first.status == 0, "\(first.stderr)")
        let served = try #require(first.served, "one line `TIER MS ms WxH`, got \(first.stdout.debugDescription)")
        #expect(served.tier == "source" && served.size == "512x320" && served.ms > 0)
        #expect(files(in: cache).count == 1, "the render reached the disk tier before exit: \(files(in: cache))")
        let written = Array(try Data(contentsOf: URL(fileURLWithPath: out)))
        #expect(ImageFormatDetector.detect(written) == .png)
        let decoded = try ImageDecoder().decode(written)
        #expect(decoded.size == PixelSize(width: 512, height: 320))

        // A new process: its memory tier is empty, the disk tier has the variant (within the
        // default tolerance of a 500×500 box).
        let second = try runStrata([
            "get", "jpeg/fallenleaf-2048x1280-420.jpg", "--size", "500x500", "--source", Fixtures.directory.path, "--cache", cache,
        ])
        #expect(second.status == 0, "\(second.stderr)")
        let again = try #require(second.served, "got \(second.stdout.debugDescription)")
        #expect(again.tier == "disk" && again.size == "512x320")
        #expect(second.stderr.isEmpty)

        // Without a disk tier every process renders from the source.
        let third = try runStrata(arguments)
        #expect(third.status == 0 && third.served?.tier == "source")
    }

    @Test func toleranceZeroAsksTheSourceForAnotherSize() throws {
        let cache = temporaryPath("cache")
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let base = ["get", "jpeg/fallenleaf-2048x1280-420.jpg", "--source", Fixtures.directory.path, "--cache", cache]
        #expect(try runStrata(base + ["--size", "512x512"]).served?.tier == "source")
        let exact = try runStrata(base + ["--size", "500x500", "--tolerance", "0"])
        #expect(exact.served?.tier == "source" && exact.served?.size == "500x313")
        #expect(files(in: cache).count == 2)
    }

    @Test func theSourceDefaultsToTheCurrentDirectory() throws {
        let result = try runStrata(["get", "jpeg/kite-800x500-gray.jpg", "--size", "200x200", "--mode", "fill"], in: Fixtures.directory)
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("source ") && result.stdout.hasSuffix(" ms 200x200\n"), "\(result.stdout)")
    }

    @Test func aMissingKeyIsOneLineNamingIt() throws {
        let cache = temporaryPath("cache")
        defer { try? FileManager.default.removeItem(atPath: cache) }
        let result = try runStrata([
            "get", "jpeg/no-such-photo.jpg", "--size", "64x64", "--source", Fixtures.directory.path, "--cache", cache,
        ])
        #expect(result.status != 0)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("jpeg/no-such-photo.jpg") && lines[0].contains("no such image"), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
        #expect(files(in: cache).isEmpty)
    }

    @Test func brokenFixturesAreOneLineNamingTheKeyAndTheReason() throws {
        let broken = try FileManager.default.contentsOfDirectory(atPath: Fixtures.url("broken").path).sorted()
        #expect(broken.count >= 8)
        let cache = temporaryPath("cache")
        defer { try? FileManager.default.removeItem(atPath: cache) }
        for name in broken {
            let key = "broken/" + name
            let out = temporaryPath("never.png")
            let result = try runStrata(["get", key, "--size", "64x64", "--source", Fixtures.directory.path, "--cache", cache, "--out", out])
            #expect(result.status == 1, "\(name): status \(result.status)")
            let lines = result.stderr.split(separator: "\n")
            // The key, then the decoder's reason after it.
            #expect(lines.count == 1 && lines[0].contains("\"\(key)\": ") && lines[0].count > key.count + 20, "\(name): \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(name)")
            #expect(!FileManager.default.fileExists(atPath: out), "\(name): an output file was written")
        }
        #expect(files(in: cache).isEmpty)
    }

    @Test func badArgumentsAreRefusedBeforeAnyWork() throws {
        let result = try runStrata(["get", "jpeg/orientation-1.jpg", "--size", "64x64", "--tolerance", "1.5"])
        #expect(result.status != 0 && result.stderr.contains("--tolerance"))
        let format = try runStrata(["get", "jpeg/orientation-1.jpg", "--size", "64x64", "--out", "x.gif"])
        #expect(format.status != 0 && format.stderr.contains("--out"))
    }
}

extension StrataRun {
    /// `strata get`'s output line's fields: tier, milliseconds, size.
    var served: (tier: String, ms: Double, size: String)? {
        let fields = stdout.split(separator: " ")
        guard stdout.hasSuffix("\n"), stdout.filter({ $0 == "\n" }).count == 1, fields.count == 4, fields[2] == "ms",
            let ms = Double(fields[1])
        else { return nil }
        return (String(fields[0]), ms, String(fields[3].dropLast()))
    }
}
