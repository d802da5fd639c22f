#if canImport(Glibc)
import Glibc
#endif
import StrataFuzzing

#if STRATA_LIBFUZZER
/// The harness libFuzzer drives: `$STRATA_FUZZ_HARNESS`, a `FuzzHarness` name such as
/// `FuzzDecode` (Scripts/fuzz.sh sets it).
let harness: FuzzHarness = {
    guard let name = getenv("STRATA_FUZZ_HARNESS").map({ String(cString: $0) }), let harness = FuzzHarness(rawValue: name) else {
        let names = FuzzHarness.allCases.map(\.rawValue).joined(separator: " ")
        fatalError("strata-fuzz: set STRATA_FUZZ_HARNESS to one of: \(names)")
    }
    return harness
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    harness.run(UnsafeRawBufferPointer(start: start, count: count))
    return 0
}
#else
/// `strata-fuzz HARNESS FILE…`: runs one harness over the given inputs (a crash found by
/// libFuzzer, a corpus file) in an ordinary build — a debugger can attach, no fuzzer needed.
@main
enum StrataFuzz {
    static func main() {
        let arguments = CommandLine.arguments.dropFirst()
        guard let name = arguments.first, let harness = FuzzHarness(rawValue: name), arguments.count > 1 else {
            let names = FuzzHarness.allCases.map(\.rawValue).joined(separator: " ")
            print("usage: strata-fuzz HARNESS FILE...   (HARNESS: \(names))")
            exit(2)
        }
        for path in arguments.dropFirst() {
            guard let file = fopen(path, "rb") else {
                print("strata-fuzz: cannot open \(path)")
                exit(1)
            }
            var bytes: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 65_536)
            while true {
                let n = fread(&chunk, 1, chunk.count, file)
                if n <= 0 { break }
                bytes += chunk[0..<n]
            }
            fclose(file)
            bytes.withUnsafeBytes { harness.run($0) }
            print("strata-fuzz: \(name) \(path): \(bytes.count) bytes, no invariant broken")
        }
    }
}
#endif
