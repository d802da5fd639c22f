import Strata

/// The checks behind the libFuzzer harnesses (`FuzzHarness`): each runs one parser over
/// arbitrary bytes and traps when an invariant breaks. The parts for each concern are in the
/// files beside this one (`DiskFuzzing.swift`, `TableFuzzing.swift`, `CodecFuzzing.swift`).
package enum Fuzzing {
    /// `precondition` whose message survives a release build (the harnesses run optimized).
    package static func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
        if !condition { fatalError(message()) }
    }

    package static func fail(_ message: String) -> Never { fatalError(message) }
}

/// Reads the fuzzer's bytes as a stream of small decisions; past the end every read is 0.
package struct FuzzInput {
    package let bytes: UnsafeRawBufferPointer
    package var position = 0

    package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    package var isAtEnd: Bool { position >= bytes.count }

    package mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    package mutating func uint32() -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(byte()) << (8 * $1) } }
    package mutating func uint64() -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(byte()) << (8 * $1) } }

    /// A number in `0..<bound` (bound ≥ 1).
    package mutating func below(_ bound: Int) -> Int { Int(uint32() % UInt32(bound)) }

    /// The next `count` bytes (fewer at the end).
    package mutating func take(_ count: Int) -> UnsafeRawBufferPointer {
        let start = min(position, bytes.count), end = min(position + max(0, count), bytes.count)
        position = end
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }
}
