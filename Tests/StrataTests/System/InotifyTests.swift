import Foundation
import Testing
@testable import Strata

@Suite struct InotifyTests {
    /// The names of the events queued on `inotify` whose mask has any of `flags`.
    private func queuedNames(_ inotify: Inotify, _ flags: Int32) throws -> [String] {
        var names: [String] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let n = try inotify.readEvents(into: buffer)
            if n == 0 { return names }
            Inotify.forEachEvent(in: UnsafeRawBufferPointer(rebasing: buffer[..<n])) { event in
                if event.has(flags) { names.append(String(decoding: event.name, as: UTF8.self)) }
            }
        }
    }

    @Test("A second watch on the same inode through another path merges its mask instead of replacing it")
    func mergedWatchesKeepTheFirstMask() throws {
        let scratch = ScratchDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path, withIntermediateDirectories: true)
        let inotify = try Inotify()
        let first = try inotify.addWatch(scratch.path, mask: UInt32(IN_MOVED_TO))
        let second = try inotify.addWatch(scratch.path + "/.", mask: UInt32(IN_DELETE), merge: true)
        #expect(first == second)
        #expect(FileManager.default.createFile(atPath: scratch.parent + "/staged", contents: Data([1])))
        #expect(rename(scratch.parent + "/staged", scratch.path + "/moved") == 0)  // queued before rename returns
        #expect(unlink(scratch.path + "/moved") == 0)
        #expect(try queuedNames(inotify, IN_MOVED_TO | IN_DELETE) == ["moved", "moved"])

        // Without merge the kernel replaces the mask: the first watch's events stop.
        _ = try inotify.addWatch(scratch.path + "/.", mask: UInt32(IN_DELETE))
        #expect(FileManager.default.createFile(atPath: scratch.parent + "/staged", contents: Data([1])))
        #expect(rename(scratch.parent + "/staged", scratch.path + "/again") == 0)
        #expect(try queuedNames(inotify, IN_MOVED_TO).isEmpty)
    }

    @Test("Watch errors name the call and the path")
    func errorsNameThePath() throws {
        let inotify = try Inotify()
        #expect {
            _ = try inotify.addWatch("/nonexistent/strata-inotify-test", mask: UInt32(IN_MOVED_TO))
        } throws: { error in
            let error = error as? SystemCallError
            return error?.call == "inotify_add_watch" && error?.path == "/nonexistent/strata-inotify-test" && error?.errno == ENOENT
        }
    }

    @Test("Paths resolve to their canonical form; the parent of / is /")
    func resolvedPaths() throws {
        let scratch = ScratchDirectory()
        try FileManager.default.createDirectory(atPath: scratch.path + "/sub", withIntermediateDirectories: true)
        let canonical = try FileDescriptor.resolvedPath(scratch.path)
        for alias in ["/.", "/sub/..", "//", "/./sub/../"] {
            #expect(try FileDescriptor.resolvedPath(scratch.path + alias) == canonical)
        }
        #expect(FileDescriptor.splitParent(ofResolved: canonical).name == "cache")
        #expect(FileDescriptor.splitParent(ofResolved: "/") == ("/", ""))
        #expect(FileDescriptor.splitParent(ofResolved: "/a") == ("/", "a"))
    }
}
