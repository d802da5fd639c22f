#if canImport(Glibc)
import Glibc
#endif
@_spi(Fuzzing) import Strata

/// Image tables opened on hostile table and metadata files (``Fuzzing/imageTable(_:directory:)``),
/// in `$STRATA_FUZZ_SCRATCH` (a tmpfs such as /dev/shm is fastest) or a fresh directory under /tmp.
let scratch: String = {
    if let given = getenv("STRATA_FUZZ_SCRATCH") { return String(cString: given) }
    var template = Array("/tmp/strata-fuzz-table-XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzImageTable(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    Fuzzing.imageTable(UnsafeRawBufferPointer(start: start, count: count), directory: scratch)
    return 0
}
