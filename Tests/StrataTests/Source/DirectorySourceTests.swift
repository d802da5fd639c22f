import Foundation
import Testing
@testable import Strata

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

    @Test(arguments: ["../secret.txt", "inside/../../secret.txt", "/etc/passwd", "inside/./a.jpg",
                      "a\u{0}.jpg", "", "///", String(repeating: "x", count: 5000)])
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
