#if canImport(Glibc)
import Glibc
#endif
import Strata
import StrataConfiguration
import StrataService

/// Every libFuzzer harness of Strata, by the name of its corpus folder (`Fuzz/Corpus/<name>`).
/// `run` feeds one input through the harness and traps when an invariant breaks; a typed error
/// for bad input is fine. The `strata-fuzz` executable (Fuzz/) runs one under libFuzzer;
/// `StrataFuzzingTests` runs every one over its corpus and seeds in every test run.
package enum FuzzHarness: String, CaseIterable, Sendable {
    case decode = "FuzzDecode"
    case diskFile = "FuzzDiskFile"
    case imageTable = "FuzzImageTable"
    case sizing = "FuzzSizing"
    case avif = "FuzzAVIF"
    case heif = "FuzzHEIF"
    case gif = "FuzzGIF"
    case tiff = "FuzzTIFF"
    case jp2 = "FuzzJP2"
    case jxl = "FuzzJXL"
    case imageParameters = "FuzzImageParameters"
    case iiif = "FuzzIIIF"
    case urlSigner = "FuzzURLSigner"
    case configFile = "FuzzConfigFile"
    case warmPath = "FuzzWarmPath"
    case thumbor = "FuzzThumbor"

    /// Runs the harness over `bytes`.
    package func run(_ bytes: UnsafeRawBufferPointer) {
        switch self {
        case .decode: DecodeHarness.run(bytes)
        case .diskFile: Fuzzing.diskFile(bytes)
        case .imageTable: Fuzzing.imageTable(bytes, directory: Self.scratch)
        case .sizing: SizingHarness.run(bytes)
        // Each decoder through `Fuzzing.decode(_:as:)`: header, decodes at every size the
        // decoder picks, a render; every input decodes or throws `ImageDecodingError`, within
        // a 1-megapixel limit.
        case .avif: Fuzzing.decode(bytes, as: .avif)
        case .heif: Fuzzing.decode(bytes, as: .heic)
        case .gif: Fuzzing.decode(bytes, as: .gif)
        case .tiff: Fuzzing.decode(bytes, as: .tiff)
        case .jp2: Fuzzing.decode(bytes, as: .jp2)
        case .jxl: Fuzzing.decode(bytes, as: .jxl)
        case .imageParameters: ServiceFuzzing.imageParameters(bytes)
        case .iiif: ServiceFuzzing.iiif(bytes)
        case .urlSigner: ServiceFuzzing.urlSigner(bytes)
        case .configFile: ConfigFileHarness.run(bytes)
        case .warmPath: WarmPathHarness.run(bytes)
        case .thumbor: ThumborFuzzing.thumbor(bytes)
        }
    }

    /// The image-table harness's directory: `$STRATA_FUZZ_SCRATCH` (a tmpfs such as /dev/shm is
    /// fastest) or a fresh directory under /tmp.
    static let scratch: String = {
        if let given = getenv("STRATA_FUZZ_SCRATCH") { return String(cString: given) }
        var template = Array("/tmp/strata-fuzz-table-XXXXXX".utf8CString)
        return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }()
}

/// Configuration files: the key check, swift-configuration's YAML snapshot, every key's typed
/// parse, and a configuration written back reading the same
/// (`ConfigurationFuzzing.configurationFile(_:)`); then what `strata serve` reads of a
/// configuration beyond its keys: the presets (each parsed as `/images` parameters) and the
/// signing keys. Refusals are typed (`ConfigurationError`); nothing traps.
enum ConfigFileHarness {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        guard let configuration = ConfigurationFuzzing.configurationFile(bytes) else { return }
        if let presets = try? ImagePresets(configuration) {
            if configuration.http.presetsOnly, presets.only == false { fatalError("http.presetsOnly was lost") }
        }
        let http = configuration.http
        let signer = URLSigner(keys: http.signingKeys, defaultKey: http.signingKey)
        if (signer == nil) != (http.signingKeys.isEmpty && http.signingKey == nil) { fatalError("signing keys were lost") }
        if let signer, let signed = signer.sign("/images/a.jpg?w=1", keyID: signer.preferredKeyID, expires: nil) {
            if (try? signer.verify(Substring(signed))) == nil { fatalError("a configured key's signature does not verify") }
        }
    }
}
