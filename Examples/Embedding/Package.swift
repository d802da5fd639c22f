// swift-tools-version: 6.1
// An embedder's view of Strata: a plain executable that takes only the `Strata` product (memory,
// disk, decode). Its build must compile no NIO, AsyncHTTPClient, Hummingbird or
// swift-configuration; `Scripts/embedding-check.sh` builds it, runs it and checks that.
import PackageDescription

// A path dependency's identity is its directory's name, which depends on the checkout.
let strataIdentity = String(
    Context.packageDirectory.split(separator: "/").dropLast(2).last ?? "strata")

let package = Package(
    name: "Embedding",
    platforms: [.macOS(.v15)],
    dependencies: [.package(path: "../..")],
    targets: [
        .executableTarget(
            name: "Embedding",
            dependencies: [.product(name: "Strata", package: strataIdentity)])
    ],
    swiftLanguageModes: [.v6]
)
