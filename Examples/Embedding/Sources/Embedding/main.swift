// Strata embedded in a plain executable: memory and disk tiers over a directory of originals.
//
//     swift run Embedding [ORIGINALS [KEY]]
//
// ORIGINALS defaults to the repository's Fixtures/, KEY to a photograph there (with another
// directory, its first JPEG, WebP or PNG). The disk tier lives in a temporary directory that is
// removed at the end. A third request goes to a new engine over the same disk directory, as
// another process would. Exits 0 when the first answer came from the source, the second from
// memory and the third from disk (an original smaller than the box too: the disk keeps the
// whole-original flag); 1 otherwise.
import Foundation
import Strata

/// The repository's `Fixtures/`: the first directory above this file that holds one.
func fixturesDirectory() -> String? {
    var directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    while directory.path != "/" {
        let candidate = directory.appendingPathComponent("Fixtures").path
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: candidate, isDirectory: &isDirectory), isDirectory.boolValue {
            return candidate
        }
        directory.deleteLastPathComponent()
    }
    return nil
}

/// The first JPEG, WebP or PNG under `root` in path order, relative to `root`.
func firstImage(under root: String) -> String? {
    let paths = (FileManager.default.subpaths(atPath: root) ?? []).sorted()
    return paths.first { ["jpg", "jpeg", "webp", "png"].contains(URL(fileURLWithPath: $0).pathExtension.lowercased()) }
}

/// Asks `cache` for `key` in a 256×256 box; prints where the pixels came from and how long it took.
func ask(_ cache: ImageCache, _ key: String, _ label: String) async throws -> ServingTier {
    let start = ContinuousClock.now
    let served = try await cache.image(for: ImageRequest(key: CacheKey(key), box: PixelSize(width: 256, height: 256)))
    let elapsed = start.duration(to: .now)
    let milliseconds = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
    print(
        "\(label) \(key) at \(served.image.width)×\(served.image.height) from \(served.tier) in \(String(format: "%.2f", milliseconds)) ms")
    return served.tier
}

/// The three requests; returns what went wrong, or `nil`.
func run(originals: String, key: String, scratch: String) async -> String? {
    do {
        let source = try DirectorySource(root: originals)
        let disk = try DiskTier(directory: scratch)
        // Stop the tiers' threads while their directory still exists.
        defer { disk.close() }
        let cache = try ImageCache(disk: disk, source: source)
        let first = try await ask(cache, key, "first request: ")
        let second = try await ask(cache, key, "second request:")
        disk.flush()
        let otherDisk = try DiskTier(directory: scratch)
        defer { otherDisk.close() }
        let other = try ImageCache(disk: otherDisk, source: source)
        let third = try await ask(other, key, "new engine:    ")
        return first == .source && second == .memory && third == .disk
            ? nil : "expected source, then memory, then disk; got \(first), \(second), \(third)"
    } catch {
        return "\(error)"
    }
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let originals = arguments.first ?? fixturesDirectory() else {
    FileHandle.standardError.write(Data("embedding: no Fixtures/ above \(#filePath); pass a directory of originals\n".utf8))
    exit(1)
}
let defaultKey: String? = arguments.isEmpty ? "jpeg/path-2560x1600.jpg" : firstImage(under: originals)
guard let key = arguments.count > 1 ? arguments[1] : defaultKey else {
    FileHandle.standardError.write(Data("embedding: no JPEG, WebP or PNG under \(originals)\n".utf8))
    exit(1)
}
let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("strata-embedding-\(UUID().uuidString)").path
let failure = await run(originals: originals, key: key, scratch: scratch)
try? FileManager.default.removeItem(atPath: scratch)
if let failure {
    FileHandle.standardError.write(Data("embedding: \(failure)\n".utf8))
    exit(1)
}
