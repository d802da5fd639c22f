@_spi(Fuzzing) import StrataService

/// `/images` targets: presets, ``ImageParameters`` and their canonical re-parse
/// (``ServiceFuzzing/imageParameters(_:)``). The first byte picks `http.maxDimension` and the
/// presets; the rest is the target after `/images/`.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzImageParameters(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    ServiceFuzzing.imageParameters(UnsafeRawBufferPointer(start: start, count: count))
    return 0
}
