@_spi(Fuzzing) import Strata

/// The TIFF decoder (libtiff) over arbitrary bytes, through `Fuzzing.decode(_:as:)`: header,
/// decode, a render; every input either decodes or throws `ImageDecodingError`, within a
/// 1-megapixel limit. Seeds: small files made by `TIFFWriter` and `tiffcp` (`Fuzz/Corpus/FuzzTIFF`,
/// see its README).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTIFF(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    Fuzzing.decode(UnsafeRawBufferPointer(start: start, count: count), as: .tiff)
    return 0
}
