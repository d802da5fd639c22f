@_spi(Fuzzing) import Strata

/// The GIF decoder (giflib) over arbitrary bytes, through `Fuzzing.decode(_:as:)`: header,
/// decodes at every size the decoder picks, a render; every input either decodes or throws
/// `ImageDecodingError`, within a 1-megapixel limit. Seeds: small files the Debian tools made
/// (`Fuzz/Corpus/FuzzGIF`, see its README).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzGIF(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    Fuzzing.decode(UnsafeRawBufferPointer(start: start, count: count), as: .gif)
    return 0
}
