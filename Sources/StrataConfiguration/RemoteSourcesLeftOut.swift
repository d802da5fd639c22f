#if !RemoteSources
import Strata

/// A build without the `RemoteSources` trait (`make run`: no AsyncHTTPClient, swift-nio-ssl or
/// swift-nio-http2 to compile): `source.http.baseURL`, `source.s3.bucket` and `shared.s3.bucket`
/// are refused naming the key and the build that has them; everything else is the same.
enum RemoteSourcesLeftOut {
    /// Throws when `key` is set; `nil` otherwise (the type of the setting it stands for).
    static func refuse(_ key: String, from reader: inout KeyReader) throws(ConfigurationError) -> Never? {
        guard try reader.string(key) != nil else { return nil }
        throw reader.error(
            key,
            reason: "this strata was built without its remote sources (the RemoteSources trait, left out by `make run`); "
                + "build it with `make release` or `swift build -c release --product strata` to read originals "
                + "from an HTTP origin or a bucket, or to share renders through one")
    }
}
#endif
