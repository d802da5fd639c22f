// swift-tools-version: 6.1
// libFuzzer harnesses for Strata, in a package of their own so that the main package's build
// and tests are untouched. Build and run them with `Scripts/fuzz.sh [SECONDS]` (it passes
// `-sanitize=fuzzer,address`); each harness is an executable whose entry point is
// `LLVMFuzzerTestOneInput`. They take the `Strata` product only, so their build compiles no
// NIO, AsyncHTTPClient or configuration stack (SwiftPM still clones those packages to resolve).
import PackageDescription

// A path dependency's identity is its directory's name, which depends on the checkout.
let strataIdentity = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "strata")
let strata = Target.Dependency.product(name: "Strata", package: strataIdentity)

let package = Package(
    name: "StrataFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "..")],
    targets: ["FuzzDecode", "FuzzDiskFile", "FuzzImageTable", "FuzzSizing", "FuzzAVIF", "FuzzHEIF", "FuzzGIF"].map {
        .executableTarget(name: $0, dependencies: [strata])
    },
    swiftLanguageModes: [.v6]
)
