// swift-tools-version: 6.2
import PackageDescription

// The pixel code is optimized in debug builds too, its `assert`s kept: StrataBase (the resampler,
// pixel buffers), StrataCodecs (pixel conversions, colour) and the tests' StrataTestSupport
// (test images, PSNR). Unoptimized, their SIMD and per-pixel loops run one to two orders of
// magnitude slower, and the tests that check renders against references spent most of their time
// there (`make test`'s suite took about twice as long). The other targets, the tests' own
// among them, stay unoptimized for the debugger. Only in this repository's own builds
// (Scripts/swift.sh, which the Makefile and every script use, sets
// SWIFTPM_STRATA_OPTIMIZED_DEBUG=1): a package that depends on Strata builds it with its own
// settings, and no unsafe flag of ours (SwiftPM 6.2 accepts a versioned dependency's unsafe
// flags from a 6.2 manifest, checked with a tagged clone; earlier versions refused them).
let optimizedInDebug: [SwiftSetting] =
    Context.environment["SWIFTPM_STRATA_OPTIMIZED_DEBUG"] == "1"
    ? [.unsafeFlags(["-O", "-assert-config", "Debug"], .when(configuration: .debug))] : []

let package = Package(
    name: "Strata",
    platforms: [.macOS(.v15)],
    products: [
        // Tiers, engine, codecs, pixels: swift-log, swift-metrics, swift-crypto and the C
        // libraries only (no NIO, no HTTP client, no configuration stack).
        .library(name: "Strata", targets: ["Strata"]),
        // HTTPSource, the HTTP origin (AsyncHTTPClient, NIO).
        .library(name: "StrataHTTPOrigin", targets: ["StrataHTTPOrigin"]),
        // S3Source and the shared tier: S3-compatible object storage (AWS Signature Version 4 on
        // swift-crypto, over StrataHTTPOrigin's client).
        .library(name: "StrataS3", targets: ["StrataS3"]),
        // StrataConfiguration: settings from a file, the environment and the command line,
        // reloading, ConfiguredImageCache (swift-configuration, Yams, ServiceLifecycle).
        .library(name: "StrataConfiguration", targets: ["StrataConfiguration"]),
        .library(name: "StrataService", targets: ["StrataService"]),
        .executable(name: "strata", targets: ["strata"]),
    ],
    // Two parts of the service that the first `make run` over Fixtures/ does not use and that
    // cost most of a release build (docs/Benchmarks.md "Build times"): `strata serve`'s OTLP/HTTP
    // span exporter (swift-otel, with swift-protobuf and the semantic conventions), and the
    // remote sources — `source.http.*`, `source.s3.*` and the shared tier on S3 — through
    // StrataHTTPOrigin and StrataS3 (AsyncHTTPClient, with swift-nio-ssl's BoringSSL and
    // swift-nio-http2). Both on by default, so every ordinary build (`swift build`, `make
    // release`, the container) has them; `make run` builds without them
    // (`--disable-default-traits`) to reach its first URL sooner, and there `tracing.enabled`,
    // `source.http.baseURL`, `source.s3.bucket` and `shared.s3.bucket` are refused naming the
    // key and the build that has them. CI's sanitizer builds leave out the exporter only
    // (`--traits RemoteSources`); its soak runs `make run`'s build.
    traits: [
        .trait(name: "OTLPExporter", description: "strata serve exports spans over OTLP/HTTP (swift-otel)"),
        .trait(
            name: "RemoteSources",
            description: "originals from an HTTP origin or an S3 bucket, and the shared tier on S3 (AsyncHTTPClient)"),
        .default(enabledTraits: ["OTLPExporter", "RemoteSources"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.0"),
        // StrataHTTPOrigin and the service; `strata-bench locks` (Benchmarks/) measures NIOLock beside our lock.
        .package(url: "https://github.com/apple/swift-nio", from: "2.100.0"),
        // Configuration: file (YAML/JSON, reloading), environment, command line.
        .package(
            url: "https://github.com/apple/swift-configuration", from: "1.0.0",
            traits: [.defaults, "YAML", "Reloading", "CommandLineArguments"]),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.8.0"),
        // The configuration file's keys, to refuse unknown ones (swift-configuration reads it too).
        .package(url: "https://github.com/jpsim/Yams", "5.4.0"..<"7.0.0"),
        // HTTPSource: the HTTP origin.
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // SHA-256 of cache keys (BoringSSL, with the CPU's SHA extensions).
        .package(url: "https://github.com/apple/swift-crypto", from: "3.12.0"),
        // `strata serve`: the HTTP service and its Prometheus metrics.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.20.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.0.0"),
        // NIOHTTPTypes: the warm path's channel handler speaks Hummingbird's HTTP parts.
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.20.0"),
        // `swift package generate-documentation` (Scripts/docs.sh): the DocC catalogs.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.4.0"),
        // Tracing: the engine's and the origin's spans (the API only: a no-op until a tracer is
        // bootstrapped); swift-otel exports them over OTLP/HTTP from `strata serve` (no gRPC).
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.0.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        // C libraries: one systemLibrary target each, a tiny shim header, found with pkg-config.
        .systemLibrary(
            name: "CTurboJPEG", pkgConfig: "libturbojpeg",
            providers: [.apt(["libturbojpeg0-dev"])]),
        // libjpeg's scanline API (the same libjpeg-turbo), for decodes that hand over rows as
        // they go; wrapped by CStrataJPEG, whose C sets libjpeg's longjmp landing points.
        .systemLibrary(
            name: "CJPEG", pkgConfig: "libjpeg",
            providers: [.apt(["libjpeg62-turbo-dev"])]),
        .target(name: "CStrataJPEG", dependencies: ["CJPEG"]),
        .systemLibrary(
            name: "CWebP", pkgConfig: "libwebp libwebpdemux libwebpmux",
            providers: [.apt(["libwebp-dev"])]),
        .systemLibrary(
            name: "CPNG", pkgConfig: "libpng",
            providers: [.apt(["libpng-dev"])]),
        // libpng's row API for decodes that hand over rows as they go; its C sets libpng's
        // longjmp landing points.
        .target(name: "CStrataPNG", dependencies: ["CPNG"]),
        // Little CMS 2: ICC profiles and colour transforms (Sources/Strata/Colour).
        .systemLibrary(
            name: "CLCMS2", pkgConfig: "lcms2",
            providers: [.apt(["liblcms2-dev"])]),
        // zlib: a PNG's iCCP chunk is deflated (read and written by Codecs/PNGColourChunks).
        .systemLibrary(
            name: "CZlib", pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]),
        // AVIF (libavif: dav1d decodes, aom encodes), HEIC/HEIF (libheif with libde265), GIF
        // (giflib, which ships no pkg-config file: its header and library are in the default paths;
        // libavif's pkg-config file adds -DAVIF_DLL, which SwiftPM refuses, so it is found the same way).
        .systemLibrary(
            name: "CAVIF",
            providers: [.apt(["libavif-dev"])]),
        .systemLibrary(
            name: "CHeif", pkgConfig: "libheif",
            providers: [.apt(["libheif-dev"])]),
        .systemLibrary(
            name: "CDe265", pkgConfig: "libde265",
            providers: [.apt(["libde265-dev"])]),
        // Strata's HEVC decoder for libheif: libde265 with worker threads, registered above
        // libheif's own libde265 plugin (which decodes one image on one thread).
        .target(name: "CStrataHEIF", dependencies: ["CHeif", "CDe265"]),
        .systemLibrary(
            name: "CGIF",
            providers: [.apt(["libgif-dev"])]),
        .systemLibrary(
            name: "CTIFF", pkgConfig: "libtiff-4",
            providers: [.apt(["libtiff-dev"])]),
        // libtiff over bytes in memory, its messages kept per file (its handlers take a va_list).
        .target(name: "CStrataTIFF", dependencies: ["CTIFF"]),
        .systemLibrary(
            name: "COpenJPEG", pkgConfig: "libopenjp2",
            providers: [.apt(["libopenjp2-7-dev"])]),
        // OpenJPEG over bytes in memory, its messages kept per file, its planes turned into BGRA.
        .target(name: "CStrataJP2", dependencies: ["COpenJPEG"]),
        // JPEG XL (libjxl 0.7): decode and encode; libjxl_threads' runner for large decodes. Found
        // like CAVIF, in the default paths: libjxl's pkg-config file adds -DHWY_SHARED_DEFINE,
        // which SwiftPM refuses (and which only highway's C++ headers read).
        .systemLibrary(
            name: "CJXL",
            providers: [.apt(["libjxl-dev"])]),
        .systemLibrary(
            name: "CXXHash", pkgConfig: "libxxhash",
            providers: [.apt(["libxxhash-dev"])]),
        // The project's Linux-only C (futex lock, eventfd, getdents64, _GNU_SOURCE constants).
        .target(name: "CStrataLinux"),
        // The resampler's AVX2 kernels (per-function target attributes, chosen at run time).
        .target(name: "CStrataSIMD"),
        // The library's layers, each importing only those below it (docs/Architecture.md, "Layers";
        // Scripts/check-layers.py refuses an import that breaks them). The base: syscalls, locks,
        // the pool and its lanes, pixels and the resampler, keys and the shared vocabulary.
        .target(
            name: "StrataBase",
            dependencies: [
                "CStrataLinux", "CStrataSIMD", "CXXHash",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: optimizedInDebug
        ),
        // Codecs, colour and the renderer (decode, colour, resample).
        .target(
            name: "StrataCodecs",
            dependencies: [
                "StrataBase",
                "CTurboJPEG", "CStrataJPEG", "CWebP", "CPNG", "CStrataPNG", "CAVIF", "CHeif", "CStrataHEIF", "CGIF", "CTIFF",
                "CStrataTIFF", "CStrataJP2", "CJXL", "CLCMS2", "CZlib", "CStrataSIMD",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: optimizedInDebug
        ),
        // The tiers: memory, disk, image tables, and the sources of originals.
        .target(
            name: "StrataTiers",
            dependencies: [
                "StrataBase", "StrataCodecs", "CXXHash",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The engine (ImageCache: the chain of tiers, coalescing, freshness) and tile pyramids.
        .target(
            name: "StrataEngine",
            dependencies: [
                "StrataBase", "StrataCodecs", "StrataTiers", "CStrataSIMD",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The product's module: re-exports the four layers, so `import Strata` is the whole library.
        .target(
            name: "Strata",
            dependencies: ["StrataBase", "StrataCodecs", "StrataTiers", "StrataEngine"]
        ),
        // The HTTP origin (HTTPSource).
        .target(
            name: "StrataHTTPOrigin",
            dependencies: [
                "Strata",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // Object storage: S3Source (originals in a bucket) and the shared tier (what a fleet
        // rendered, in a bucket), signed with AWS Signature Version 4.
        .target(
            name: "StrataS3",
            dependencies: [
                "Strata", "StrataHTTPOrigin",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // Settings from layers (file, environment, command line), reloading, ConfiguredImageCache.
        .target(
            name: "StrataConfiguration",
            dependencies: [
                "Strata",
                .target(name: "StrataHTTPOrigin", condition: .when(traits: ["RemoteSources"])),
                .target(name: "StrataS3", condition: .when(traits: ["RemoteSources"])),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
            ]
        ),
        // The HTTP service (`strata serve`): routes, encoded cache, signing, metrics.
        .target(
            name: "StrataService",
            dependencies: [
                "Strata", "StrataConfiguration",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                // `/stats`' `asyncExecutor`: whether async code runs on the event loops.
                .product(name: "NIOPosix", package: "swift-nio"),
                // The warm path: NIO's HTTP/1 parts, before their conversion to HTTP types.
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .executableTarget(
            name: "strata",
            dependencies: [
                "Strata", "StrataConfiguration", "StrataService", "CStrataLinux",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // `tracing.*`: spans exported over OTLP/HTTP, trace ids in log metadata (here,
                // not in StrataService, which only makes spans: embedders pick their backend).
                .product(name: "OTel", package: "swift-otel", condition: .when(traits: ["OTLPExporter"])),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The crash tests' child processes (`strata-test-helper disk-writer | table-writer`): built
        // with the tests, in no product.
        .executableTarget(
            name: "strata-test-helper",
            dependencies: [
                "Strata", "StrataTestSupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tests/StrataTestHelper"),
        // Helpers shared by the test targets (fixtures, child processes, the built `strata`,
        // polling, a capturing log handler, the tables' test pattern).
        .target(
            name: "StrataTestSupport",
            dependencies: [
                "Strata", "CLCMS2", "CTurboJPEG", "CZlib", "CHeif", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/StrataTestSupport", swiftSettings: optimizedInDebug),
        // Counts a thread's allocations in the test bundle (its own `malloc`, handing every call
        // to glibc's; under a sanitizer, its allocator's hook): WarmPathAllocationTests. In no
        // product.
        .target(name: "CStrataMallocCounter", path: "Tests/CStrataMallocCounter"),
        // The checks behind the libFuzzer harnesses (FuzzHarness): run over every corpus by
        // StrataFuzzingTests, and under libFuzzer by strata-fuzz (Scripts/fuzz.sh). In no product.
        .target(
            name: "StrataFuzzing",
            dependencies: [
                "Strata", "StrataConfiguration", "StrataService", "StrataTestSupport",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/StrataFuzzing"),
        // One harness by name under libFuzzer (built by Scripts/fuzz.sh with -DSTRATA_LIBFUZZER
        // and -sanitize=fuzzer), or, in an ordinary build, over the files it is given.
        .executableTarget(
            name: "strata-fuzz",
            dependencies: ["StrataFuzzing"],
            path: "Fuzz/Sources/strata-fuzz"),
        .testTarget(
            name: "StrataTests",
            dependencies: [
                "Strata", "StrataTestSupport", "CStrataLinux", "CHeif",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            resources: []
        ),
        .testTarget(
            name: "StrataHTTPOriginTests",
            dependencies: ["Strata", "StrataHTTPOrigin", "StrataTestSupport"]
        ),
        .testTarget(
            name: "StrataS3Tests",
            dependencies: [
                "Strata", "StrataHTTPOrigin", "StrataS3", "StrataTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        .testTarget(
            name: "StrataConfigurationTests",
            dependencies: [
                "Strata", "StrataHTTPOrigin", "StrataConfiguration", "StrataTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .testTarget(
            name: "StrataServiceTests",
            dependencies: [
                "Strata", "StrataConfiguration", "StrataService", "StrataTestSupport", "StrataS3",
                // WarmPathAllocationTests: the fuzz harness's warm fixture, and the counter.
                "StrataFuzzing", "CStrataMallocCounter",
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                // TracingTests' OTLP/HTTP receiver and origin.
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Every fuzz harness over its corpus and seeds (Fuzz/Corpus), in every test run.
        .testTarget(
            name: "StrataFuzzingTests",
            dependencies: ["StrataFuzzing", "StrataTestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The sanitizer builds (`SANITIZER=address` or `SANITIZER=thread` in `swift build`'s
// environment: Scripts/asan.sh, Scripts/tsan.sh): the sanitizer's flags on this package's targets
// only. Its dependencies compile exactly as in the plain build of the same configuration, so a
// sanitizer build in that build's folder reuses them and recompiles only Strata and its tests
// (on 2 cores, minutes instead of a whole build). Dependency code is not instrumented: the
// sanitizer still intercepts its memory functions and sees the locks it takes.
let sanitizer = Context.environment["SANITIZER"] ?? ""
precondition(["", "address", "thread"].contains(sanitizer), "SANITIZER must be address or thread, not \(sanitizer)")
// Test code (not what it checks), unoptimized in an optimized sanitizer build: optimizing the
// tests' expanded expectations took about a third of that build. StrataTestSupport (no
// expectations: test images, PSNR) is optimized there, as in the debug build.
let testCode: Set<String> = ["StrataFuzzing", "strata-test-helper", "strata-fuzz"]
if !sanitizer.isEmpty {
    for target in package.targets where target.type != .system && target.type != .binary {
        var swift: [SwiftSetting] = [.unsafeFlags(["-sanitize=\(sanitizer)"])]
        if sanitizer == "address" {
            // Optimized (`-c release`) as the shipped binary is, `assert`s kept and the tests'
            // `@testable` imports allowed; every pixel buffer from malloc (PixelMemory maps none),
            // so that ASan's redzones catch an overflow of one.
            swift += [
                .unsafeFlags(["-enable-testing", "-assert-config", "Debug"]), .define("STRATA_ADDRESS_SANITIZER"),
            ]
        }
        if target.type == .test || testCode.contains(target.name) {
            swift += [.unsafeFlags(["-Onone", "-no-whole-module-optimization"], .when(configuration: .release))]
        }
        target.swiftSettings = (target.swiftSettings ?? []) + swift
        target.cSettings = (target.cSettings ?? []) + [.unsafeFlags(["-fsanitize=\(sanitizer)"])]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"])]
    }
}
