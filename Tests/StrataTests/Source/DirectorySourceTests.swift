import Foundation
import Testing
@testable import Strata
import StrataTestSupport

@Suite struct DirectorySourceTests {
    /// A fresh root with `inside/a.jpg`, plus a secret file next to the root and symlinks that
    /// point out of it.
    final class Sandbox {
        let base: String
        let root: String
        init() throws {
            base = FileManager.default.temporaryDirectory.appendingPathComponent("strata-src-\(UUID().uuidString)").path
            root = base + "/root"
            let fm = FileManager.default
            try fm.createDirectory(atPath: root + "/inside", withIntermediateDirectories: true)
            try Data(Fixtures.bytes("jpeg/orientation-1.jpg")).write(to: URL(fileURLWithPath: root + "/inside/a.jpg"))
            try Data("secret".utf8).write(to: URL(fileURLWithPath: base + "/secret.txt"))
            try fm.createSymbolicLink(atPath: root + "/link-out.jpg", withDestinationPath: base + "/secret.txt")
            try fm.createSymbolicLink(atPath: root + "/dir-out", withDestinationPath: base)
            try fm.createSymbolicLink(atPath: root + "/link-in.jpg", withDestinationPath: root + "/inside/a.jpg")
        }
        deinit { try? FileManager.default.removeItem(atPath: base) }
    }

    func invalidKeyReason(_ source: DirectorySource, _ key: String) async -> String? {
        do {
            _ = try await source.fetch(key: key)
            return nil
        } catch {
            if case .invalidKey(let why) = error.reason { return why }
            return "other: \(error)"
        }
    }

    @Test func readsAFileAndVersionsIt() async throws {
        let box = try Sandbox()
        let source = try DirectorySource(root: box.root)
        let data = try await source.fetch(key: "inside/a.jpg")
        #expect(data.bytes == Fixtures.bytes("jpeg/orientation-1.jpg"))
        #expect(!data.version.isEmpty)
        // Rewriting the file changes the version.
        try Data(Fixtures.bytes("jpeg/orientation-2.jpg")).write(to: URL(fileURLWithPath: box.root + "/inside/a.jpg"))
        let again = try await source.fetch(key: "inside/a.jpg")
        #expect(again.version != data.version)
    }

    @Test func partsCoverTheFileWithItsVersionAndLength() async throws {
        let box = try Sandbox()
        let source = try DirectorySource(root: box.root)
        let whole = Fixtures.bytes("jpeg/orientation-1.jpg")
        let version = try await source.fetch(key: "inside/a.jpg").version
        var parts: [UInt8] = []
        while parts.count < whole.count {
            let part = try #require(try await source.fetchRange(key: "inside/a.jpg", offset: parts.count, maxBytes: 1000))
            #expect(part.version == version && part.totalBytes == whole.count)
            #expect(part.bytes.count == min(1000, whole.count - parts.count))
            parts += part.bytes
        }
        #expect(parts == whole)
        let past = try source.fetchRangeBlocking(key: "inside/a.jpg", offset: whole.count + 5, maxBytes: 10)
        #expect(past.bytes.isEmpty && past.totalBytes == whole.count)
        // A file rewritten between parts shows another version.
        try Data(Fixtures.bytes("jpeg/orientation-2.jpg")).write(to: URL(fileURLWithPath: box.root + "/inside/a.jpg"))
        #expect(try source.fetchRangeBlocking(key: "inside/a.jpg", offset: 0, maxBytes: 10).version != version)
        // Parts of a file over maxFileBytes are read (a pyramid build copies it to disk): the
        // whole fetch alone is refused, and the caller bounds the whole by its length.
        let small = try DirectorySource(root: box.root, maxFileBytes: 100)
        let head = try small.fetchRangeBlocking(key: "inside/a.jpg", offset: 0, maxBytes: 10)
        #expect(head.bytes.count == 10 && head.totalBytes > 100)
        #expect(try small.fetchPrefixBlocking(key: "inside/a.jpg", maxBytes: 10).bytes.count == 10)
        #expect { try small.fetchBlocking(key: "inside/a.jpg") } throws: { Self.isTooLarge($0) }
    }

    @Test(arguments: [
        "../secret.txt", "inside/../../secret.txt", "/etc/passwd", "inside/./a.jpg",
        "a\u{0}.jpg", "", "///", String(repeating: "x", count: 5000),
    ])
    func refusesEscapes(key: String) async throws {
        let box = try Sandbox()
        let why = await invalidKeyReason(try DirectorySource(root: box.root), key)
        #expect(why != nil && !why!.hasPrefix("other"), "key \(key.prefix(40).debugDescription) gave \(String(describing: why))")
    }

    @Test(arguments: ["link-out.jpg", "dir-out/secret.txt", "link-in.jpg"])
    func refusesSymlinks(key: String) async throws {
        let box = try Sandbox()
        let why = await invalidKeyReason(try DirectorySource(root: box.root), key)
        #expect(why == "a path component is a symbolic link", "key \(key) gave \(String(describing: why))")
    }

    @Test func missingFileIsNotFound() async throws {
        let box = try Sandbox()
        let source = try DirectorySource(root: box.root)
        await #expect {
            _ = try await source.fetch(key: "inside/nope.jpg")
        } throws: { error in
            guard let error = error as? SourceError, case .notFound = error.reason else { return false }
            return error.key == "inside/nope.jpg"
        }
    }

    @Test func directoryIsNotAnImage() async throws {
        let box = try Sandbox()
        let why = await invalidKeyReason(try DirectorySource(root: box.root), "inside")
        #expect(why == "not a regular file")
    }

    @Test func closureSourceWrapsErrors() async throws {
        struct Boom: Error {}
        let source = ClosureSource { key in
            if key == "ok" { return SourceData(bytes: [1, 2, 3], version: "v1") }
            throw Boom()
        }
        #expect(try await source.fetch(key: "ok").bytes == [1, 2, 3])
        await #expect(throws: SourceError.self) { try await source.fetch(key: "bad") }
    }
}

// MARK: - maxFileBytes

extension DirectorySourceTests {
    /// Whether `error` is the source's "over the byte limit" refusal.
    static func isTooLarge(_ error: any Error) -> Bool {
        guard let error = error as? SourceError, case .tooLarge = error.reason else { return false }
        return error.description.contains("-byte limit")
    }

    /// Writes `count` bytes (a repeating pattern) to `path`.
    static func writeFile(_ path: String, count: Int) throws {
        try Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 7) }).write(to: URL(fileURLWithPath: path))
    }

    @Test func aFileOverTheLimitIsRefusedAndOneAtTheLimitIsRead() async throws {
        let box = try Sandbox()
        try Self.writeFile(box.root + "/at.bin", count: 4096)
        try Self.writeFile(box.root + "/over.bin", count: 4097)
        let source = try DirectorySource(root: box.root, maxFileBytes: 4096)
        #expect(try await source.fetch(key: "at.bin").bytes.count == 4096)
        await #expect { _ = try await source.fetch(key: "over.bin") } throws: { Self.isTooLarge($0) }
    }

    /// A file that grows after its `fstat` (or one whose `fstat` size says nothing, as in
    /// procfs) must not be read without limit: the read itself stops past `maxFileBytes`.
    @Test(arguments: [0, 10, 4095])
    func theReadStopsOnceMoreThanTheLimitHasArrived(claimedSize: Int) throws {
        let box = try Sandbox()
        let path = box.root + "/grown.bin"
        try Self.writeFile(path, count: 1 << 20)
        let file = try FileDescriptor(open: path, flags: O_RDONLY)
        #expect {
            _ = try DirectorySource.readContents(of: file, expectedSize: claimedSize, key: "grown.bin", maxFileBytes: 4096)
        } throws: { Self.isTooLarge($0) }
        // Up to the limit, whatever the claimed size, everything is read.
        try Self.writeFile(path, count: 4096)
        let atLimit = try FileDescriptor(open: path, flags: O_RDONLY)
        let bytes = try DirectorySource.readContents(of: atLimit, expectedSize: claimedSize, key: "grown.bin", maxFileBytes: 4096)
        #expect(bytes == (0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 7) })
    }

    @Test func aNamedPipeIsRefusedWithoutBlocking() async throws {
        let box = try Sandbox()
        #expect(mkfifo(box.root + "/pipe.jpg", 0o600) == 0)
        let why = await invalidKeyReason(try DirectorySource(root: box.root), "pipe.jpg")
        #expect(why == "not a regular file")
    }
}
