/// Entry points for the libFuzzer harnesses of the `Fuzz/` package (a separate package, so it
/// sees only public API): each runs one parser of this module over arbitrary bytes and traps
/// when an invariant breaks. Not for any other use; `@_spi(Fuzzing) import Strata` to reach
/// them. The parts live beside what they exercise (`Disk/DiskFuzzing.swift`,
/// `Tables/TableFuzzing.swift`).
@_spi(Fuzzing) public enum Fuzzing {
    /// `precondition` whose message survives a release build (the harnesses run optimized).
    static func require(_ condition: Bool, _ message: @autoclosure () -> String = "") {
        if !condition { fatalError(message()) }
    }

    static func fail(_ message: String) -> Never { fatalError(message) }
}

/// Reads the fuzzer's bytes as a stream of small decisions; past the end every read is 0.
struct FuzzInput {
    let bytes: UnsafeRawBufferPointer
    var position = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    var isAtEnd: Bool { position >= bytes.count }

    mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func uint32() -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(byte()) << (8 * $1) } }
    mutating func uint64() -> UInt64 { (0..<8).reduce(0) { $0 | UInt64(byte()) << (8 * $1) } }

    /// A number in `0..<bound` (bound ≥ 1).
    mutating func below(_ bound: Int) -> Int { Int(uint32() % UInt32(bound)) }

    /// The next `count` bytes (fewer at the end).
    mutating func take(_ count: Int) -> UnsafeRawBufferPointer {
        let start = min(position, bytes.count), end = min(position + max(0, count), bytes.count)
        position = end
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }
}
