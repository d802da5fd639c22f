@_spi(Fuzzing) import StrataService

/// Signed URLs: verification of arbitrary targets with arbitrary keys, `strata sign`'s
/// signatures verifying, and one changed byte refused (``ServiceFuzzing/urlSigner(_:)``).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzURLSigner(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    ServiceFuzzing.urlSigner(UnsafeRawBufferPointer(start: start, count: count))
    return 0
}
