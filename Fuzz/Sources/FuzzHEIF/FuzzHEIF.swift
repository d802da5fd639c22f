@_spi(Fuzzing) import Strata

/// The HEIF decoder (libheif (libde265)) over arbitrary bytes, through `Fuzzing.decode(_:as:)`: header,
/// decodes at every size the decoder picks, a render; every input either decodes or throws
/// `ImageDecodingError`, within a 1-megapixel limit. Seeds: small files the Debian tools made
/// (`Fuzz/Corpus/FuzzHEIF`, see its README).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHEIF(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    Fuzzing.decode(UnsafeRawBufferPointer(start: start, count: count), as: .heic)
    return 0
}
