@_spi(Fuzzing) import StrataService

/// IIIF Image API paths: the route grammar, region and size resolution against an original
/// and limits, and canonical URIs as fixed points (``ServiceFuzzing/iiif(_:)``). Eight bytes
/// of sizes and limits, then the path.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzIIIF(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    ServiceFuzzing.iiif(UnsafeRawBufferPointer(start: start, count: count))
    return 0
}
