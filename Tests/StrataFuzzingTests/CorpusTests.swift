import Foundation
import StrataFuzzing
import StrataTestSupport
import Testing

/// Every libFuzzer harness over its regression corpus (`Fuzz/Corpus/<harness>`: crashes fixed and
/// seeds) — and the decoder's over every fixture under 256 KiB, the seeds `Scripts/fuzz.sh` gives
/// it — so that each CI run checks what the long explorations found, under the address
/// sanitizer too (`Scripts/asan.sh`). An invariant that breaks traps, as under libFuzzer.
@Suite struct CorpusTests {
    @Test(arguments: FuzzHarness.allCases)
    func everyCorpusInputKeepsTheInvariants(_ harness: FuzzHarness) throws {
        let inputs = try Self.inputs(for: harness)
        #expect(!inputs.isEmpty, "no corpus for \(harness.rawValue)")
        for url in inputs {
            let bytes = try [UInt8](Data(contentsOf: url))
            bytes.withUnsafeBytes { harness.run($0) }
        }
    }

    /// The corpus folder's files (its README aside), and for the decoder the small fixtures.
    static func inputs(for harness: FuzzHarness) throws -> [URL] {
        let root = Fixtures.directory.deletingLastPathComponent()
        var folders = [root.appendingPathComponent("Fuzz/Corpus/\(harness.rawValue)")]
        if harness == .decode {
            folders += ["jpeg", "webp", "png", "broken"].map { Fixtures.directory.appendingPathComponent($0) }
        }
        var files: [URL] = []
        for folder in folders {
            let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            for name in names where !name.hasPrefix(".") && name != "README.md" {
                let url = folder.appendingPathComponent(name)
                let values = try url.resourceValues(forKeys: [.isRegularFileKey, .fileSizeKey])
                guard values.isRegularFile == true else { continue }
                if harness == .decode, !folder.path.hasSuffix(harness.rawValue), (values.fileSize ?? 0) >= 256 * 1024 { continue }
                files.append(url)
            }
        }
        return files
    }
}
