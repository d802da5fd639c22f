@_spi(Fuzzing) import Strata

/// Disk-tier file names, temporary names and file headers (``Fuzzing/diskFile(_:)``).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDiskFile(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    Fuzzing.diskFile(UnsafeRawBufferPointer(start: start, count: count))
    return 0
}
