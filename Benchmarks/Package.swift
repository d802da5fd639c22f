// swift-tools-version: 6.1
// Strata's benchmarks, in a package of their own so that the shipped `strata` carries none and
// the main package's build and tests are untouched (as swift-nio keeps its benchmarks).
//
// - `strata-bench`: the measurements that were `strata bench <name>` (memory, disk, engine,
//   source, codecs, resample, locks, scroll, eighth, negative, gravity), with the same names,
//   options and output, and `s3-fetch` (S3Source's CPU per fetch, Scripts/bench-objectstorage.py
//   runs it). From the repository root (they read `Fixtures/`):
//       swift build -c release --package-path Benchmarks --scratch-path .build-bench
//       .build-bench/release/strata-bench memory --threads 1
// - `strata-floor`: a bare NIO HTTP/1.1 server, the floor beside nginx in Scripts/loadtest.sh.
// - `Benchmarks/<Name>/`: micro-benchmarks of the public API with ordo-one's package-benchmark
//   (memory tier, disk tier, engine), run by its plugin:
//       swift package --package-path Benchmarks --scratch-path .build-bench benchmark
//
// docs/Benchmarks.md says more.
import PackageDescription

// A path dependency's identity is its directory's name, which depends on the checkout.
let strataIdentity = String(Context.packageDirectory.split(separator: "/").dropLast().last ?? "strata")
let strata = Target.Dependency.product(name: "Strata", package: strataIdentity)
let strataS3 = Target.Dependency.product(name: "StrataS3", package: strataIdentity)
// The benches moved out of `strata` use Strata's `package` declarations (SplitMix64,
// DiskFileName, DiskFileEncoder, DirectoryScan, JPEGEighthReader, ImageDecoder.hevcDecodeThreads,
// ImageRenderer.lastSmartFocus…) as they did inside the root package, so `strata-bench` is
// compiled in the root package's `package` scope: SwiftPM's `-package-name` for it (its identity,
// lowercased, as a C99 identifier) instead of this package's. Only a root package may use
// unsafeFlags, which this one always is.
let strataPackageName: String = {
    let name = String(strataIdentity.lowercased().map { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") ? $0 : "_" })
    return name.first?.isNumber == true ? "_" + name : name
}()
let benchmark = Target.Dependency.product(name: "Benchmark", package: "benchmark")

let package = Package(
    name: "StrataBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        // `strata-bench locks` measures NIOLock beside Strata's own lock (the version the root
        // package resolves).
        .package(url: "https://github.com/apple/swift-nio", from: "2.100.0"),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.0", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "strata-bench",
            dependencies: [
                strata,
                // `strata-bench s3-fetch`: S3Source's own cost per fetch.
                strataS3,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            packageAccess: false,
            swiftSettings: [.unsafeFlags(["-package-name", strataPackageName])]
        ),
        // The floor of a warm answer: a bare NIO HTTP/1.1 server (no Strata), beside nginx and
        // Strata in Scripts/loadtest.sh.
        .executableTarget(
            name: "strata-floor",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
    ]
        // package-benchmark's suites: each an executable target under Benchmarks/<Name>, whose
        // `benchmarks` closure registers its benchmarks (the plugin writes the `main`).
        + [
            ("StrataMemoryTierBenchmarks", "MemoryTier"),
            ("StrataDiskTierBenchmarks", "DiskTier"),
            ("StrataEngineBenchmarks", "Engine"),
        ].map { name, folder in
            .executableTarget(
                name: name, dependencies: [strata, benchmark], path: "Benchmarks/\(folder)",
                plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")])
        },
    swiftLanguageModes: [.v6]
)
