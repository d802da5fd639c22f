import AsyncHTTPClient
import Logging
import Strata
import StrataHTTPOrigin

/// Originals from an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, Cloudflare R2, GCS's XML
/// API): key `a/b.jpg` is the object `<prefix>/a/b.jpg`, fetched with a GET signed with AWS
/// Signature Version 4.
///
/// Built on ``/StrataHTTPOrigin/HTTPSource``, so it has the same limits and behaviour: keys
/// refused before any I/O when they could leave the prefix; connect, read and total timeouts; a
/// bounded body; a concurrency cap; retries with jittered backoff of 5xx, broken connections and
/// timeouts only; conditional HEADs (`If-None-Match` on the object's `ETag`) for
/// revalidation; ranged GETs for header reads (``fetchPrefix(key:maxBytes:)``) and for a
/// pyramid build's copy of a large object (``fetchRange(key:offset:maxBytes:)``). A 404 is
/// ``/StrataTiers/SourceError/Reason/notFound``; a 403 is an origin error that carries S3's
/// code (`SignatureDoesNotMatch`, `AccessDenied`, `RequestTimeTooSkewed`…) and names the bucket
/// and the key in its URL. Credentials never appear in a description or a log line.
///
/// Cost per fetch: one HMAC-SHA256 chain (five HMACs and a SHA-256 of the canonical request)
/// beside the HTTP exchange. Call ``shutdown()`` when done.
public final class S3Source: ImageSource, SourceHealthProbe, CustomStringConvertible {
    public let configuration: Configuration
    let origin: HTTPSource
    let signer: S3RequestSigner
    let bucketURL: OriginURL

    /// A source for `configuration` (validated here, naming the first bad key). With `client`
    /// `nil` the source makes its own `HTTPClient`; a given one must not follow redirects
    /// (``/StrataHTTPOrigin/HTTPSource/clientConfiguration(for:)``).
    public init(
        configuration: Configuration, client: HTTPClient? = nil, logger: Logger = Logger(label: "strata.source.s3")
    ) throws(S3ConfigurationError) {
        try configuration.validate()
        self.configuration = configuration
        do {
            bucketURL = try configuration.endpoint.bucketURL()
        } catch {
            throw S3ConfigurationError(
                key: "\(configuration.settings).endpoint", value: configuration.endpoint.serviceURL, allowed: error.reason)
        }
        signer = S3RequestSigner(
            signer: SigV4Signer(credentials: configuration.credentials, region: configuration.endpoint.region))
        do {
            origin = try HTTPSource(
                configuration: configuration.originConfiguration(base: bucketURL), client: client, logger: logger,
                signer: signer, settingsPrefix: configuration.settings)
        } catch {
            let key = error.key.replacingPrefix("source.http", with: configuration.settings)
            throw S3ConfigurationError(key: key, value: error.value, allowed: error.allowed)
        }
    }

    /// Shuts down the client if the source made it. Safe to call more than once.
    public func shutdown() async throws { try await origin.shutdown() }

    public var description: String { "S3Source(\(configuration.endpoint), prefix \(configuration.prefix.debugDescription))" }

    // MARK: - ImageSource

    public func fetch(key: String) async throws(SourceError) -> SourceData {
        try await origin.fetch(key: key, url: try objectURL(for: key), prefix: nil)
    }

    /// The object's first `maxBytes` bytes, with a ranged GET.
    public func fetchPrefix(key: String, maxBytes: Int) async throws(SourceError) -> SourceData {
        try await origin.fetch(key: key, url: try objectURL(for: key), prefix: max(1, maxBytes))
    }

    /// Up to `maxBytes` bytes of the object from `offset`, with a ranged GET: its ETag is the
    /// version, so parts of an object replaced midway are told apart.
    public func fetchRange(key: String, offset: Int, maxBytes: Int) async throws(SourceError) -> SourceRange? {
        try await origin.fetchRange(key: key, url: try objectURL(for: key), offset: offset, maxBytes: maxBytes)
    }

    /// A conditional HEAD (`If-None-Match` on the last `ETag` seen): a 304 is "unchanged".
    public func version(key: String) async throws(SourceError) -> String? {
        try await origin.version(key: key, url: try objectURL(for: key))
    }

    /// For `/healthz?deep=1`: a signed GET of the first byte of a key that should not exist
    /// (`<prefix>/.strata-health`). A 404 or 200 proves the credentials and the bucket; so does
    /// `AccessDenied` (S3 checks the signature first, so the credentials are good and the
    /// policy only lacks `s3:ListBucket`). A bad signature, an unknown key id, a skewed clock,
    /// a missing bucket or an unreachable store throws, naming the origin.
    public func checkHealth() async throws(SourceError) {
        do {
            _ = try await fetchPrefix(key: ".strata-health", maxBytes: 1)
        } catch {
            if case .notFound = error.reason { return }
            if case .origin(let origin) = error.reason, origin.serverCode == "AccessDenied", origin.clockSkewSeconds == nil {
                return
            }
            throw error
        }
    }

    /// The object URL of `key`: the prefix's segments, then the key's, each percent-encoded.
    func objectURL(for key: String) throws(SourceError) -> OriginURL {
        let segments = try HTTPSource.validatedSegments(of: key)
        return bucketURL.appending(encodedSegments: configuration.prefixSegments + segments)
    }

    /// Requests sent (each attempt): for tests.
    package var requestsSent: Int { origin.requestsSent.load(ordering: .relaxed) }
}

extension String {
    /// This string with `prefix` (a settings prefix in a key name) replaced.
    func replacingPrefix(_ prefix: String, with replacement: String) -> String {
        hasPrefix(prefix) ? replacement + dropFirst(prefix.count) : self
    }
}
