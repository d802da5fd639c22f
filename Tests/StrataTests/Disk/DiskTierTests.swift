import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// A fresh directory under the system temp dir, deleted at the end.
final class ScratchDirectory {
    let parent: String
    let path: String
    init() {
        var template = Array((NSTemporaryDirectory() + "strata-disk-test-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        precondition(made != nil, "mkdtemp failed")
        parent = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        path = parent + "/cache"
    }
    deinit { try? FileManager.default.removeItem(atPath: parent) }

    func names() -> [String] { (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] }
}

/// An image whose every byte depends on (seed, position), so that mixed-up files show.
func patternImage(width: Int, height: Int, seed: UInt8, style: PixelStyle = .bgra32Premultiplied) -> PixelImage {
    var image = PixelImage(width: width, height: height, style: style)
    image.withUnsafeMutableBytes { raw in
        for i in raw.indices { raw[i] = UInt8(truncatingIfNeeded: i &* 31 &+ Int(seed) &* 17 &+ i >> 9) }
    }
    return image
}

/// Polls `condition` every 2 ms until it holds or `seconds` pass; returns the time it took.
@discardableResult
func waitUntil(seconds: Double = 30, _ condition: () -> Bool) -> Duration? {
    let clock = ContinuousClock()
    let start = clock.now
    while clock.now - start < .milliseconds(Int(seconds * 1000)) {
        if condition() { return clock.now - start }
        usleep(2000)
    }
    return condition() ? clock.now - start : nil
}

/// Runs a program as a child process (`posix_spawn`) and waits for it. (Not Foundation's
/// `Process`, whose `run()` leaks a weak-reference side table that LeakSanitizer reports.)
func run(_ executable: String, _ arguments: [String]) throws {
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid = pid_t()
    let spawned = posix_spawn(&pid, executable, nil, nil, argv, environ)
    try #require(spawned == 0, "posix_spawn \(executable): \(String(cString: strerror(spawned)))")
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    #expect(status == 0, "\(executable) \(arguments) exited with wait status \(status)")
}

func quietConfiguration(_ edit: (inout DiskTier.Configuration) -> Void = { _ in }) -> DiskTier.Configuration {
    var configuration = DiskTier.Configuration()
    configuration.durable = false  // tests do not need crash durability; keeps them fast
    edit(&configuration)
    return configuration
}

/// ``quietConfiguration(_:)`` without a watcher (no inotify, no periodic rescan): the index
/// learns only what the tier itself does, or what an explicit `rescanNow()` finds.
func unwatchedConfiguration(_ edit: (inout DiskTier.Configuration) -> Void = { _ in }) -> DiskTier.Configuration {
    quietConfiguration {
        $0.useInotify = false
        $0.rescanInterval = .seconds(3600)
        edit(&$0)
    }
}

@Suite("Disk tier", .serialized)
struct DiskTierTests {
    let box = SizeQuery(box: PixelSize(width: 600, height: 600))

    @Test("A stored image comes back with the same pixels, mapped when large and read when small")
    func roundTrip() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        let large = patternImage(width: 600, height: 400, seed: 1)
        let small = patternImage(width: 60, height: 40, seed: 2)
        try tier.storeSynchronously(large, forKey: "large", sourceVersion: 7)
        try tier.storeSynchronously(small, forKey: "small")
        let hit = try #require(try tier.hit(forKey: "large", matching: box))
        #expect(hit.image.hasSamePixels(as: large))
        #expect(hit.image.storageKind == .fileMapping)
        #expect(hit.image.isRowAligned)
        #expect(hit.sourceVersion == 7)
        let smallHit = try #require(try tier.image(forKey: "small", matching: SizeQuery(box: PixelSize(width: 60, height: 60))))
        #expect(smallHit.hasSamePixels(as: small))
        #expect(smallHit.storageKind == .heap)
        #expect(smallHit.isRowAligned)
        // Tolerance: 600 px in a 700 px box is q = 0.857 (inside 20 %), in a 800 px box q = 0.75 (outside).
        #expect(try tier.image(forKey: "large", matching: SizeQuery(box: PixelSize(width: 700, height: 700))) != nil)
        #expect(try tier.image(forKey: "large", matching: SizeQuery(box: PixelSize(width: 800, height: 800))) == nil)
        #expect(try tier.image(forKey: "large", matching: SizeQuery(box: PixelSize(width: 600, height: 600), mode: .fill)) == nil)
        #expect(try tier.image(forKey: "other", matching: box) == nil)
        // Mapped pixels outlive the tier and an unlink of the file.
        tier.remove(key: "large")
        tier.close()
        #expect(hit.image.hasSamePixels(as: large))
        #expect(scratch.names().count == 1)
    }

    @Test("Write-behind stores land after flush; a full queue drops instead of blocking")
    func writeBehind() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: quietConfiguration {
                $0.writeQueueCapacity = 1
                $0.durable = true
            })
        let image = patternImage(width: 1000, height: 1000, seed: 3)
        var accepted = 0
        for i in 0..<20 where tier.store(image, forKey: "k\(i)") { accepted += 1 }
        tier.flush()
        let stats = tier.statistics
        #expect(stats.droppedStores == 20 - accepted)
        #expect(stats.droppedStores > 0)
        #expect(stats.stores == accepted)
        #expect(stats.entries == accepted)
        #expect(scratch.names().count == accepted)
    }

    @Test("A file published by another process appears; a deleted one disappears")
    func externalPublishAndDelete() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        let image = patternImage(width: 300, height: 200, seed: 4)
        let box = SizeQuery(box: image.size)
        let name = DiskFileName(digest: ImageEntityID(hashing: "ext"), variant: VariantDescriptor(size: image.size)).string
        let staged = scratch.parent + "/" + name
        try Data(DiskFileEncoder.encode(image, key: "ext", mode: .fit, sourceVersion: 1)).write(to: URL(fileURLWithPath: staged))
        #expect(!tier.contains(key: "ext", matching: box))
        try run("/bin/mv", [staged, scratch.path + "/" + name])
        let latency = try #require(waitUntil { tier.contains(key: "ext", matching: box) })
        print("disk tier: external publish visible after \(latency)")
        #expect(try #require(try tier.image(forKey: "ext", matching: box)).hasSamePixels(as: image))
        try run("/bin/rm", [scratch.path + "/" + name])
        #expect(waitUntil { !tier.contains(key: "ext", matching: box) } != nil)
        #expect(try tier.image(forKey: "ext", matching: box) == nil)
    }

    @Test("Partial, truncated, garbage and wrong-header files are never served and get removed")
    func invalidFiles() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.checksumPolicy = .everyHit })
        let image = patternImage(width: 300, height: 200, seed: 5)
        let box = SizeQuery(box: image.size)
        let good = DiskFileEncoder.encode(image, key: "bad", mode: .fit, sourceVersion: 1)
        let pixelOffset = DiskFileHeader.pixelOffset(keyLength: 3)
        var cases: [(String, [UInt8])] = [
            ("truncated", Array(good.prefix(good.count - 100))),
            ("header only", Array(good.prefix(pixelOffset))),
            ("empty", []),
            ("garbage", (0..<good.count).map { UInt8(truncatingIfNeeded: $0 &* 13) }),
            ("too long", good + [0]),
        ]
        var badMagic = good
        badMagic[0] = 0
        cases.append(("bad magic", badMagic))
        var badHeader = good
        badHeader[20] ^= 1
        cases.append(("bad header field", badHeader))
        var badPixels = good
        badPixels[pixelOffset + 1234] ^= 0x40
        cases.append(("bad pixels", badPixels))
        // A valid header of another size than the name says.
        let other = DiskFileEncoder.encode(patternImage(width: 200, height: 300, seed: 5), key: "bad", mode: .fit, sourceVersion: 1)
        cases.append(("other size", other))
        let name = DiskFileName(digest: ImageEntityID(hashing: "bad"), variant: VariantDescriptor(size: image.size)).string
        for (label, bytes) in cases {
            // Staged by a child `cp`: a descriptor this process wrote through could be held
            // open by a child that another test spawns at that moment, and its last close,
            // after the rename, is an IN_CLOSE_WRITE under the cache name (one invalid file
            // written in place, counted as such: seen once in CI).
            let written = scratch.parent + "/written", staged = scratch.parent + "/staged"
            try Data(bytes).write(to: URL(fileURLWithPath: written))
            try run("/bin/cp", [written, staged])
            #expect(rename(staged, scratch.path + "/" + name) == 0)
            #expect(waitUntil { tier.contains(key: "bad", matching: box) } != nil, "\(label)")
            #expect(try tier.image(forKey: "bad", matching: box) == nil, "\(label) was served")
            #expect(!scratch.names().contains(name), "\(label) was not deleted")
            #expect(!tier.contains(key: "bad", matching: box))
        }
        #expect(tier.statistics.invalidFiles == cases.count)
        // Written in place (no rename): only a valid file is indexed on IN_CLOSE_WRITE.
        try Data(Array(good.prefix(500))).write(to: URL(fileURLWithPath: scratch.path + "/" + name))
        try Data(good).write(
            to: URL(
                fileURLWithPath: scratch.path + "/"
                    + DiskFileName(digest: ImageEntityID(hashing: "inplace"), variant: VariantDescriptor(size: image.size)).string))
        let inPlace = DiskFileEncoder.encode(image, key: "inplace", mode: .fit, sourceVersion: 1)
        try Data(inPlace).write(
            to: URL(
                fileURLWithPath: scratch.path + "/"
                    + DiskFileName(digest: ImageEntityID(hashing: "inplace"), variant: VariantDescriptor(size: image.size)).string))
        #expect(waitUntil { tier.contains(key: "inplace", matching: box) } != nil)
        #expect(!tier.contains(key: "bad", matching: box))
        #expect(try tier.image(forKey: "inplace", matching: box)?.hasSamePixels(as: image) == true)
        // A symlink planted at a published name is not followed. The watched tier is closed
        // first: its watcher, still handling the unlink and the symlink's creation, could
        // otherwise drop the name from the index after the rescan (a race seen once in `make
        // test`); a tier without a watcher indexes the name when it opens and keeps it.
        tier.close()
        let target = scratch.parent + "/target"
        try Data(good).write(to: URL(fileURLWithPath: target))
        _ = unlink(scratch.path + "/" + name)
        #expect(symlink(target, scratch.path + "/" + name) == 0)
        let reopened = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration { $0.checksumPolicy = .everyHit })
        defer { reopened.close() }
        #expect(reopened.contains(key: "bad", matching: box))
        #expect(try reopened.image(forKey: "bad", matching: box) == nil)
        #expect(FileManager.default.fileExists(atPath: target))
    }

    @Test("A key collision (same digest, other key) is a miss, not a wrong image")
    func keyMismatch() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        let image = patternImage(width: 300, height: 200, seed: 6)
        let box = SizeQuery(box: image.size)
        // A file for key "AAA" placed under the name of key "BBB" (same key length): as if the digests collided.
        let name = DiskFileName(digest: ImageEntityID(hashing: "BBB"), variant: VariantDescriptor(size: image.size)).string
        try Data(DiskFileEncoder.encode(image, key: "AAA", mode: .fit, sourceVersion: 1)).write(
            to: URL(fileURLWithPath: scratch.parent + "/s"))
        #expect(rename(scratch.parent + "/s", scratch.path + "/" + name) == 0)
        #expect(waitUntil { tier.contains(key: "BBB", matching: box) } != nil)
        #expect(try tier.image(forKey: "BBB", matching: box) == nil)
        #expect(tier.statistics.misses == 1)
    }

    @Test("An inotify queue overflow triggers a rescan that converges to the directory")
    func overflowConverges() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        let image = patternImage(width: 16, height: 16, seed: 7)
        for i in 0..<10 { try tier.storeSynchronously(image, forKey: "keep\(i)") }
        tier.pauseWatcher(true)
        // Delete five files behind the watcher's back...
        for i in 0..<5 {
            let name = DiskFileName(digest: ImageEntityID(hashing: "keep\(i)"), variant: VariantDescriptor(size: image.size)).string
            #expect(unlink(scratch.path + "/" + name) == 0)
        }
        // ...and publish more than max_queued_events events (create + rename = 3 events each).
        let limit =
            (try? String(contentsOfFile: "/proc/sys/fs/inotify/max_queued_events", encoding: .utf8))
            .flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? 16384
        let count = limit / 3 + 100
        for i in 0..<count {
            let name = DiskFileName(digest: ImageEntityID(hashing: "new\(i)"), variant: VariantDescriptor(size: image.size)).string
            let temp = scratch.path + "/.strata-tmp-test"
            let fd = open(temp, O_CREAT | O_WRONLY | O_TRUNC, 0o644)
            #expect(fd >= 0)
            close(fd)
            #expect(rename(temp, scratch.path + "/" + name) == 0)
        }
        let before = tier.statistics.rescans
        tier.pauseWatcher(false)
        #expect(waitUntil(seconds: 30) { tier.statistics.rescans > before && tier.statistics.entries == count + 5 } != nil)
        #expect(tier.contains(key: "keep7", matching: SizeQuery(box: image.size)))
        #expect(!tier.contains(key: "keep2", matching: SizeQuery(box: image.size)))
        #expect(tier.contains(key: "new\(count - 1)", matching: SizeQuery(box: image.size)))
        // The explicit rescan path converges too (no change now).
        try tier.rescanNow()
        #expect(tier.statistics.entries == count + 5)
    }

    @Test("A cache directory deleted under a running tier is recreated and watched again")
    func directoryDeleted() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        let image = patternImage(width: 64, height: 64, seed: 8)
        try tier.storeSynchronously(image, forKey: "a")
        try run("/bin/rm", ["-rf", scratch.path])
        #expect(waitUntil { tier.statistics.recoveries >= 1 && FileManager.default.fileExists(atPath: scratch.path) } != nil)
        #expect(try tier.image(forKey: "a", matching: SizeQuery(box: image.size)) == nil)
        #expect(tier.statistics.entries == 0)
        try tier.storeSynchronously(image, forKey: "b")
        #expect(try tier.image(forKey: "b", matching: SizeQuery(box: image.size))?.hasSamePixels(as: image) == true)
        // Still watched: an external publish shows up.
        let name = DiskFileName(digest: ImageEntityID(hashing: "c"), variant: VariantDescriptor(size: image.size)).string
        try Data(DiskFileEncoder.encode(image, key: "c", mode: .fit, sourceVersion: 0)).write(
            to: URL(fileURLWithPath: scratch.parent + "/c"))
        try run("/bin/mv", [scratch.parent + "/c", scratch.path + "/" + name])
        #expect(waitUntil { tier.contains(key: "c", matching: SizeQuery(box: image.size)) } != nil)
        #expect(tier.statistics.watching)
    }

    @Test("Two instances on one directory see each other's writes and deletions")
    func twoInstances() throws {
        let scratch = ScratchDirectory()
        let first = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        let second = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        let one = patternImage(width: 120, height: 80, seed: 9)
        let two = patternImage(width: 80, height: 120, seed: 10)
        try first.storeSynchronously(one, forKey: "from-first")
        second.store(two, forKey: "from-second")
        second.flush()
        let q = SizeQuery(box: PixelSize(width: 120, height: 120))
        #expect(waitUntil { second.contains(key: "from-first", matching: q) } != nil)
        #expect(waitUntil { first.contains(key: "from-second", matching: q) } != nil)
        #expect(try second.image(forKey: "from-first", matching: q)?.hasSamePixels(as: one) == true)
        #expect(try first.image(forKey: "from-second", matching: q)?.hasSamePixels(as: two) == true)
        first.remove(key: "from-second")
        #expect(waitUntil { !second.contains(key: "from-second", matching: q) } != nil)
    }

    @Test("Hostile keys all land inside the directory and round-trip")
    func hostileKeys() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration())
        let keys = [
            "../../etc/passwd", "/abs/path", "a\u{0}b", "\u{0}", String(repeating: "k", count: DiskTier.maximumKeyLength),
            String(repeating: "é", count: 5_000), String(repeating: "x", count: 10_000),
            "日本語/キー", "emoji 🧱/../x", "", ".", "..", "%2e%2e%2f", "line\nbreak",
        ]
        for (i, key) in keys.enumerated() {
            try tier.storeSynchronously(patternImage(width: 32, height: 20, seed: UInt8(i)), forKey: key)
        }
        let names = scratch.names()
        #expect(names.count == keys.count)
        #expect(names.allSatisfy { DiskFileName($0) != nil })
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.parent) == ["cache"])
        for (i, key) in keys.enumerated() {
            let hit = try tier.image(forKey: key, matching: SizeQuery(box: PixelSize(width: 32, height: 32)))
            #expect(hit?.hasSamePixels(as: patternImage(width: 32, height: 20, seed: UInt8(i))) == true, "\(key.prefix(20))")
        }
    }

    @Test("The byte limit holds after every store, evicting the least recently used")
    func byteLimit() throws {
        let scratch = ScratchDirectory()
        let image = patternImage(width: 100, height: 100, seed: 11)
        let charge = DiskIndexEntry(digest: ImageEntityID(hashing: "x"), variant: VariantDescriptor(size: image.size)).chargedBytes
        let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = charge * 3 })
        let q = SizeQuery(box: image.size)
        for key in ["a", "b", "c"] { try tier.storeSynchronously(image, forKey: key) }
        _ = try tier.image(forKey: "a", matching: q)  // "b" is now the least recently used
        try tier.storeSynchronously(image, forKey: "d")
        // "b" goes first; the 1/128 slack may take the next oldest ("c") too, never "a" or "d".
        #expect(tier.statistics.bytes <= charge * 3)
        #expect((1...2).contains(tier.statistics.evictions))
        #expect(!tier.contains(key: "b", matching: q))
        #expect(tier.contains(key: "a", matching: q) && tier.contains(key: "d", matching: q))
        #expect(scratch.names().count == 4 - tier.statistics.evictions)
        for i in 0..<10 {
            try tier.storeSynchronously(image, forKey: "more\(i)")
            #expect(tier.statistics.bytes <= charge * 3)
            #expect(scratch.names().count <= 3)
        }
        #expect(throws: DiskTierError.self) {
            try tier.storeSynchronously(patternImage(width: 300, height: 300, seed: 0), forKey: "huge")
        }
    }

    @Test("Checksum policies: every hit catches corruption; never serves it")
    func checksumPolicies() throws {
        let image = patternImage(width: 300, height: 200, seed: 12)
        let box = SizeQuery(box: image.size)
        var corrupt = DiskFileEncoder.encode(image, key: "k", mode: .fit, sourceVersion: 0)
        corrupt[DiskFileHeader.pixelOffset(keyLength: 1) + 99] ^= 1
        let name = DiskFileName(digest: ImageEntityID(hashing: "k"), variant: VariantDescriptor(size: image.size)).string
        for policy in DiskTier.ChecksumPolicy.allCases {
            let scratch = ScratchDirectory()
            try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
            try Data(corrupt).write(to: URL(fileURLWithPath: scratch.path + "/" + name))
            let tier = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.checksumPolicy = policy })
            let served = try tier.image(forKey: "k", matching: box)
            #expect((served == nil) == (policy != .never), "\(policy)")
        }
    }

    @Test("Files another writer publishes past the byte limit are evicted by the watching tier")
    func foreignFilesPastTheLimitAreEvicted() throws {
        // Found by Scripts/soak.sh: with `strata warm` (no watcher) storing beside a server, the
        // server indexed the warm's files but enforced its limit only when it stored itself, so
        // the directory stayed over the limit while the server only served hits.
        let scratch = ScratchDirectory()
        let image = patternImage(width: 100, height: 100, seed: 21)
        let charge = DiskIndexEntry(DiskFileName(digest: ImageEntityID(hashing: "w0"), variant: VariantDescriptor(size: image.size)))
            .chargedBytes
        let limit = 4 * charge
        let watching = try DiskTier(directory: scratch.path, configuration: quietConfiguration { $0.byteLimit = limit })
        #expect(watching.statistics.watching)
        let writer = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration { $0.byteLimit = 16 * charge })
        for i in 0..<10 { try writer.storeSynchronously(image, forKey: "w\(i)") }
        func bytes() -> Int {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: scratch.path)) ?? []
            return names.reduce(0) { total, name in
                total + ((try? FileManager.default.attributesOfItem(atPath: scratch.path + "/" + name)[.size] as? Int) ?? 0)
            }
        }
        #expect(waitUntil(seconds: 10) { bytes() <= limit } != nil, "\(bytes()) bytes in the directory, limit \(limit)")
        // The most recently published survive.
        #expect(try writer.image(forKey: "w9", matching: SizeQuery(box: image.size)) != nil)
    }

    @Test("Without inotify the tier rescans periodically")
    func pollingFallback() throws {
        let scratch = ScratchDirectory()
        let tier = try DiskTier(
            directory: scratch.path,
            configuration: quietConfiguration {
                $0.useInotify = false
                $0.rescanInterval = .milliseconds(50)
            })
        #expect(!tier.statistics.watching)
        let image = patternImage(width: 40, height: 40, seed: 13)
        let name = DiskFileName(digest: ImageEntityID(hashing: "p"), variant: VariantDescriptor(size: image.size)).string
        try Data(DiskFileEncoder.encode(image, key: "p", mode: .fit, sourceVersion: 0)).write(
            to: URL(fileURLWithPath: scratch.parent + "/p"))
        try run("/bin/mv", [scratch.parent + "/p", scratch.path + "/" + name])
        #expect(waitUntil { tier.contains(key: "p", matching: SizeQuery(box: image.size)) } != nil)
    }
}
