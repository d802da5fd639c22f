import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif
@testable import Strata

@Suite(.serialized) struct OSThreadTests {
    /// Virtual memory of this process in KiB (VmSize from /proc/self/status).
    func virtualMemoryKiB() throws -> Int {
        let text = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("VmSize:") })
        return try #require(Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" })[1]))
    }

    /// Starts `count` threads that return at once and drops them without joining.
    func startAndDrop(_ count: Int) throws {
        let done = Atomic<Int>(0)
        for _ in 0..<count { _ = try OSThread(name: "leak-check") { done.add(1, ordering: .relaxed) } }
        while done.load(ordering: .relaxed) < count { usleep(1000) }
        usleep(20_000)
    }

    // A joinable thread nobody joins keeps its 8 MiB stack mapped. The first batch warms up
    // what the C library keeps for reuse (malloc arenas, its stack cache); a second batch of
    // 128 would then add 1 GiB if stacks leaked, and adds little when they are detached.
    @Test func unjoinedThreadsDoNotLeakTheirStacks() throws {
        try startAndDrop(64)
        let before = try virtualMemoryKiB()
        try startAndDrop(128)
        let grown = try virtualMemoryKiB() - before
        #expect(grown < 256 * 1024, "VmSize grew by \(grown) KiB")
    }

    @Test func poolsThatShutDownGiveTheirThreadsBack() throws {
        for _ in 0..<8 { try BlockingPool(width: 4, name: "pool") {}.shutdown() }
        let before = try virtualMemoryKiB()
        for _ in 0..<32 { try BlockingPool(width: 4, name: "pool") {}.shutdown() }
        usleep(20_000)
        let grown = try virtualMemoryKiB() - before
        #expect(grown < 256 * 1024, "VmSize grew by \(grown) KiB")
    }

    @Test(arguments: ["short", "exactly-15-byte", "pool-日本語日本語-0", "ééééééééé", String(repeating: "x", count: 40)])
    func namesAreCutAtACharacterBoundary(name: String) throws {
        let named = Atomic<Int>(0)
        let thread = try OSThread(name: name) {
            let comm = (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
            let got = comm.hasSuffix("\n") ? String(comm.dropLast()) : comm
            if name.hasPrefix(got) && got.utf8.count <= 15 && !got.isEmpty { named.store(1, ordering: .relaxed) } else { named.store(2, ordering: .relaxed) }
        }
        thread.join()
        #expect(named.load(ordering: .relaxed) == 1)
    }
}
