@_spi(Fuzzing) import StrataConfiguration
import StrataService

/// Configuration files: the key check, swift-configuration's YAML snapshot, every key's typed
/// parse, and a configuration written back reading the same
/// (``ConfigurationFuzzing/configurationFile(_:)``); then what `strata serve` reads of a
/// configuration beyond its keys: the presets (each parsed as `/images` parameters) and the
/// signing keys. Refusals are typed (`ConfigurationError`); nothing traps.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzConfigFile(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let configuration = ConfigurationFuzzing.configurationFile(UnsafeRawBufferPointer(start: start, count: count)) else {
        return 0
    }
    if let presets = try? ImagePresets(configuration) {
        if configuration.http.presetsOnly, presets.only == false { fatalError("http.presetsOnly was lost") }
    }
    let http = configuration.http
    let signer = URLSigner(keys: http.signingKeys, defaultKey: http.signingKey)
    if (signer == nil) != (http.signingKeys.isEmpty && http.signingKey == nil) { fatalError("signing keys were lost") }
    if let signer, let signed = signer.sign("/images/a.jpg?w=1", keyID: signer.preferredKeyID, expires: nil) {
        if (try? signer.verify(Substring(signed))) == nil { fatalError("a configured key's signature does not verify") }
    }
    return 0
}
