import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// `strata decode` as a user runs it: the built executable, real files, exit status and stderr.
@Suite struct DecodeCommandTests {
    func temporaryPath(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("strata-cli-\(UUID().uuidString)-\(name)").path
    }

    @Test(arguments: ["png", "webp", "jpg"])
    func writesTheFormatOfTheExtension(ext: String) throws {
        let out = temporaryPath("thumb.\(ext)")
        defer { unlink(out) }
        let result = try runStrata([
            "decode", Fixtures.url("jpeg/path-2560x1600.jpg").path, "--size", "200x200", "--mode", "fill", "--out", out,
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "200x200\n")
        let written = Array(try Data(contentsOf: URL(fileURLWithPath: out)))
        #expect(ImageFormatDetector.detect(written) == (ext == "jpg" ? .jpeg : ImageFormat(rawValue: ext)))
        #expect(try ImageDecoder().decode(written).size == PixelSize(width: 200, height: 200))
    }

    @Test func badInputGivesOneLineAStatusBelow64AndNoFile() throws {
        let broken = try FileManager.default.contentsOfDirectory(atPath: Fixtures.url("broken").path).sorted()
        for name in broken {
            let input = Fixtures.url("broken/\(name)").path
            let out = temporaryPath("never.png")
            let result = try runStrata(["decode", input, "--size", "64x64", "--out", out])
            #expect(result.status > 0 && result.status < 64, "\(name): status \(result.status)")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].contains(input), "\(name): \(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out), "\(name): an output file was written")
            #expect(result.stdout.isEmpty)
        }
    }

    @Test func unreadableInputAndUnwritableOutput() throws {
        let missing = try runStrata(["decode", "/nonexistent/x.jpg", "--size", "64x64"])
        #expect(missing.status == 2 && missing.stderr.contains("/nonexistent/x.jpg"))
        let unwritable = try runStrata([
            "decode", Fixtures.url("jpeg/orientation-1.jpg").path, "--size", "64x64",
            "--out", "/nonexistent-dir/out.png",
        ])
        #expect(unwritable.status == 2 && unwritable.stderr.contains("/nonexistent-dir/out.png"))
    }
}
