// swift-tools-version: 6.1
// libFuzzer harnesses for Strata, in a package of their own so that the main package's build
// and tests are untouched. Build and run them with `Scripts/fuzz.sh [SECONDS]` (it passes
// `-sanitize=fuzzer,address`); each harness is an executable whose entry point is
// `LLVMFuzzerTestOneInput`. The codec and storage harnesses take the `Strata` product only; the
// request parsers' harnesses (FuzzImageParameters, FuzzIIIF, FuzzURLSigner, FuzzConfigFile,
// FuzzWarmPath) take `StrataService` (and `StrataConfiguration`, NIO's embedded channel), so
// the fuzz build compiles NIO, Hummingbird and the configuration stack too.
import PackageDescription

// A path dependency's identity is its directory's name, which depends on the checkout.
let strataIdentity = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "strata")
let strata = Target.Dependency.product(name: "Strata", package: strataIdentity)
let service = Target.Dependency.product(name: "StrataService", package: strataIdentity)
let configuration = Target.Dependency.product(name: "StrataConfiguration", package: strataIdentity)
let nio = ["NIOCore", "NIOEmbedded", "NIOHTTP1"].map { Target.Dependency.product(name: $0, package: "swift-nio") }

let package = Package(
    name: "StrataFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        // The version the root package resolves (FuzzWarmPath's EmbeddedChannel).
        .package(url: "https://github.com/apple/swift-nio", from: "2.100.0"),
    ],
    targets: ["FuzzDecode", "FuzzDiskFile", "FuzzImageTable", "FuzzSizing", "FuzzAVIF", "FuzzHEIF", "FuzzGIF", "FuzzTIFF"].map {
        .executableTarget(name: $0, dependencies: [strata])
    }
        + ["FuzzImageParameters", "FuzzIIIF", "FuzzURLSigner"].map {
            .executableTarget(name: $0, dependencies: [service])
        } + [
            .executableTarget(name: "FuzzConfigFile", dependencies: [configuration, service]),
            .executableTarget(name: "FuzzWarmPath", dependencies: [service] + nio),
        ],
    swiftLanguageModes: [.v6]
)
