import Foundation
import Testing
@testable import Strata
import StrataTestSupport

#if canImport(Glibc)
import Glibc
#endif

@Suite("SpoolFile")
struct SpoolFileTests {
    /// The resident bytes of this process's mapping that starts at `base` (its `Rss:` line in
    /// `/proc/self/smaps`): for a file mapping, the pages mapped into this process, which
    /// `mincore` cannot tell (it reports the page cache).
    static func residentBytes(ofMappingAt base: UnsafeRawPointer) throws -> Int {
        let start = String(UInt(bitPattern: base), radix: 16)
        // Read to its end (its size says 0).
        let smaps = String(decoding: try FileDescriptor(open: "/proc/self/smaps", flags: O_RDONLY).readAll(), as: UTF8.self)
        var inMapping = false
        for line in smaps.split(separator: "\n") {
            if let dash = line.firstIndex(of: "-"), line[..<dash].allSatisfy(\.isHexDigit) {
                inMapping = line[..<dash].drop { $0 == "0" } == start.drop { $0 == "0" }
            } else if inMapping, line.hasPrefix("Rss:") {
                return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1])! << 10
            }
        }
        throw CocoaError(.fileReadUnknown)
    }

    @Test("parts written in any order read back as one mapped buffer, and no name is left in the directory")
    func partsReadBackAsOneBuffer() throws {
        let scratch = TempDirectory()
        let spool = try SpoolFile(directory: scratch.path)
        let first = (0..<5000).map { UInt8(truncatingIfNeeded: $0) }
        let second = (0..<3000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try second.withUnsafeBytes { try spool.write($0, at: first.count) }
        try first.withUnsafeBytes { try spool.write($0, at: 0) }
        let file = try spool.mapped(count: first.count + second.count)
        #expect(file.count == 8000)
        #expect(file.withUnsafeBytes { Array($0) } == first + second)
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty)
    }

    @Test("a file is copied in the kernel, up to its end, and where the kernel will not, through a buffer")
    func copiesAFile() throws {
        let scratch = TempDirectory()
        let bytes = (0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        try Data(bytes).write(to: URL(fileURLWithPath: scratch.path + "/original"))
        let source = try FileDescriptor(open: scratch.path + "/original", flags: O_RDONLY)
        let spool = try SpoolFile(directory: scratch.path)
        #expect(try spool.copy(from: source, offset: 0, count: 1_000_000) == 1_000_000)
        // Past the end: what there is.
        #expect(try spool.copy(from: source, offset: 1_000_000, count: 5_000_000) == 2_000_000)
        #expect(try spool.mapped(count: bytes.count).withUnsafeBytes { Array($0) } == bytes)
        // copy_file_range refused (EXDEV: another filesystem on an older kernel): pread and pwrite.
        let again = try SpoolFile(directory: scratch.path)
        let rule = SyscallFaults.Rule(call: "copy_file_range", pathContains: scratch.path + "/original", errno: EXDEV)
        let (copied, failures) = try SyscallFaults.injecting(rule) { () throws(SystemCallError) in
            try again.copy(from: source, offset: 0, count: bytes.count)
        }
        #expect(copied == bytes.count && failures == 1)
        #expect(try again.mapped(count: bytes.count).withUnsafeBytes { Array($0) } == bytes)
    }

    @Test("released pages leave the process's resident set and read back the same")
    func releasedPagesLeaveTheResidentSet() throws {
        let scratch = TempDirectory()
        let spool = try SpoolFile(directory: scratch.path)
        let count = 16 << 20
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 / 4096 &+ $0) }
        try bytes.withUnsafeBytes { try spool.write($0, at: 0) }
        let file = try spool.mapped(count: count)
        var sum = 0
        file.withUnsafeBytes { raw in for i in stride(from: 0, to: raw.count, by: 4096) { sum &+= Int(raw[i]) } }
        let base = file.withUnsafeBytes { $0.baseAddress! }
        #expect(try Self.residentBytes(ofMappingAt: base) == count)
        // 12 MiB less a page dropped (the partial pages at either end stay; the kernel may
        // count one of them out).
        file.release(100..<(12 << 20) + 100)
        let afterPart = try Self.residentBytes(ofMappingAt: base)
        #expect(afterPart >= count - (12 << 20) && afterPart <= count - (12 << 20) + 4096, "\(afterPart)")
        file.release(0..<count)
        #expect(try Self.residentBytes(ofMappingAt: base) == 0)
        #expect(file.withUnsafeBytes { Array($0) } == bytes)
        #expect(sum != 0)
    }
}
