import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1
import Strata
import Synchronization

/// Originals fetched from an HTTP origin: key `a/b.jpg` is `GET <baseURL>/a/b.jpg`.
///
/// - **Keys** are split on `/`; each segment is percent-encoded (everything outside
///   `A–Z a–z 0–9 - . _ ~`), so no key can change the scheme, the host, add a query or climb
///   out of the base path. Empty keys, absolute keys, `.`/`..` segments, NUL bytes and keys
///   over ``maxKeyBytes`` are refused (``SourceError/Reason/invalidKey(_:)``) before any I/O.
/// - **Version**: the response's `ETag`, else its `Last-Modified`, else a digest of the bytes.
///   ``version(key:)`` is a `HEAD`, conditional (`If-None-Match`/`If-Modified-Since`) when the
///   key's last validator is remembered: a 304 means unchanged.
/// - **Statuses**: 404 and 410 are ``SourceError/Reason/notFound``; 5xx, broken connections and
///   connect/read timeouts are retried once after ``Configuration/retryBackoff``; every other
///   failure is ``SourceError/Reason/origin(_:)`` with an ``HTTPOriginError`` saying what to do.
/// - **Limits**: connect, read and total timeouts; bodies over ``Configuration/maxBodyBytes``
///   are refused by `Content-Length` or aborted while streaming; at most
///   ``Configuration/maxRedirects`` redirects (same origin unless allowed); at most
///   ``Configuration/maxConcurrentRequests`` requests in flight, the others wait.
/// - **Headers** from ``Configuration/headers`` go with every request to the base URL's origin
///   (never to another host after a redirect) and never into a description or a log line.
///
/// One `HTTPClient` serves every request: pass the process's client (built with
/// ``clientConfiguration(for:)``, so that it follows no redirects itself) or let the source make
/// its own. Call ``shutdown()`` when done; it shuts the client down only if the source made it.
public final class HTTPSource: ImageSource, CustomStringConvertible {
    /// The longest key accepted (bytes of UTF-8), as for ``DirectorySource``.
    public static let maxKeyBytes = 4096

    public let configuration: Configuration
    let base: OriginURL
    let client: HTTPClient
    private let ownsClient: Bool
    private let isShutDown = Atomic<Bool>(false)
    let limiter: ConcurrencyLimit
    let validators: ValidatorMemory
    let logger: Logger
    /// Requests sent (each attempt and each redirect hop): for tests and statistics.
    package let requestsSent = Atomic<Int>(0)
    /// Signs each request to the base URL's origin (an S3 bucket's Signature Version 4).
    let signer: (any OriginRequestSigner)?
    /// The configuration keys' prefix that errors name (`source.http`, `source.s3`).
    let settingsPrefix: String

    /// A source for `configuration` (validated here). With `client` `nil` the source makes its
    /// own `HTTPClient` (connect and read timeouts, pool size from `configuration`) and shuts it
    /// down in ``shutdown()``; a given `client` stays the caller's, and must not follow
    /// redirects itself (build it with ``clientConfiguration(for:)``).
    public convenience init(
        configuration: Configuration, client: HTTPClient? = nil, logger: Logger = Logger(label: "strata.source.http")
    ) throws(HTTPSourceConfigurationError) {
        try self.init(configuration: configuration, client: client, logger: logger, signer: nil, settingsPrefix: "source.http")
    }

    /// A source whose requests `signer` signs, and whose errors name `settingsPrefix`'s keys (an
    /// S3 bucket: `S3Source`).
    package init(
        configuration: Configuration, client: HTTPClient?, logger: Logger, signer: (any OriginRequestSigner)?,
        settingsPrefix: String
    ) throws(HTTPSourceConfigurationError) {
        try configuration.validate()
        self.signer = signer
        self.settingsPrefix = settingsPrefix
        self.configuration = configuration
        self.base = try configuration.parsedBaseURL()
        self.limiter = ConcurrencyLimit(limit: configuration.maxConcurrentRequests)
        self.validators = ValidatorMemory(capacity: configuration.rememberedVersions)
        self.logger = logger
        if let client {
            self.client = client
            self.ownsClient = false
        } else {
            self.client = HTTPClient(
                eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: Self.clientConfiguration(for: configuration))
            self.ownsClient = true
        }
    }

    /// The `HTTPClient` settings this source expects: no redirects followed by the client (the
    /// source follows them, bounded), no decompression, the connect and read timeouts, and a
    /// connection pool as large as the concurrency cap, and no spans of the client's own: the
    /// source makes the request's client span and sends its `traceparent` itself, without the
    /// URL (AsyncHTTPClient's span would record `url.full`, which holds the key).
    public static func clientConfiguration(for configuration: Configuration) -> HTTPClient.Configuration {
        var client = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: configuration.connectTimeout.timeAmount, read: configuration.readTimeout.timeAmount),
            decompression: .disabled)
        client.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = configuration.maxConcurrentRequests
        client.tracing.tracer = nil
        return client
    }

    /// Shuts down the client if the source made it (waiting for its connections to close);
    /// later fetches fail. Safe to call more than once.
    public func shutdown() async throws {
        guard !isShutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if ownsClient { try await client.shutdown() }
    }

    var isShutDownNow: Bool { isShutDown.load(ordering: .acquiring) }

    deinit {
        // A forgotten shutdown(): close the client's connections in the background (the
        // shutdown keeps the client alive until it is done).
        if ownsClient && !isShutDown.load(ordering: .acquiring) { _ = client.shutdown() }
    }

    public var description: String { "HTTPSource(\(base))" }

    // MARK: - ImageSource

    public func fetch(key: String) async throws(SourceError) -> SourceData {
        try await fetch(key: key, url: try requestURL(for: key), prefix: nil)
    }

    /// The first `maxBytes` bytes (a ranged GET, `Range: bytes=0-…`): a header read of a large
    /// original transfers only its start. An origin that ignores the range answers 200, and the
    /// transfer is stopped after `maxBytes`.
    public func fetchPrefix(key: String, maxBytes: Int) async throws(SourceError) -> SourceData {
        try await fetch(key: key, url: try requestURL(for: key), prefix: max(1, maxBytes))
    }

    /// Up to `maxBytes` bytes from `offset` with a ranged GET (206 and its `Content-Range`);
    /// `nil` when the origin answers the first part with the whole file (it ignores `Range`)
    /// or without a validator (the parts could not be proved of one version).
    public func fetchRange(key: String, offset: Int, maxBytes: Int) async throws(SourceError) -> SourceRange? {
        try await fetchRange(key: key, url: try requestURL(for: key), offset: offset, maxBytes: maxBytes)
    }

    /// A GET of `url` for `key` (its first `prefix` bytes when given), its validator remembered.
    package func fetch(key: String, url: OriginURL, prefix: Int?) async throws(SourceError) -> SourceData {
        let window = prefix.map { ByteWindow(offset: 0, count: $0) }
        let response = try await perform(key: key, url: url, method: .GET, conditional: nil, window: window)
        switch response.outcome {
        case .body(let bytes):
            let validator = response.validator
            validators.remember(validator, forKey: key)
            return SourceData(bytes: bytes, version: validator?.version ?? Self.contentVersion(of: bytes))
        case .notModified:
            throw SourceError(
                key: key,
                reason: .origin(HTTPOriginError(kind: .invalidResponse("304 Not Modified to an unconditional GET"), url: "\(url)")))
        case .headOnly, .headNotSupported:
            preconditionFailure("a GET has a body")
        }
    }

    /// A `HEAD` to the origin: conditional on the last validator seen for `key`, so that an
    /// unchanged original answers 304 (the remembered version is returned). `nil` when the
    /// origin answers the `HEAD` with no validator, or does not allow `HEAD` (405, 501): the
    /// engine then fetches.
    public func version(key: String) async throws(SourceError) -> String? {
        try await version(key: key, url: try requestURL(for: key))
    }

    /// A conditional HEAD of `url` for `key` (``version(key:)``).
    package func version(key: String, url: OriginURL) async throws(SourceError) -> String? {
        let remembered = validators.validator(forKey: key)
        let response = try await perform(key: key, url: url, method: .HEAD, conditional: remembered)
        switch response.outcome {
        case .notModified:
            guard let remembered else {
                throw SourceError(
                    key: key,
                    reason: .origin(HTTPOriginError(kind: .invalidResponse("304 Not Modified to an unconditional HEAD"), url: "\(url)")))
            }
            return remembered.version
        case .headOnly:
            validators.remember(response.validator, forKey: key)
            return response.validator?.version
        case .headNotSupported:
            return nil
        case .body:
            preconditionFailure("a HEAD has no body")
        }
    }

    // MARK: - Keys

    /// The URL of `key`'s original, refusing keys that could leave the base path.
    package func requestURL(for key: String) throws(SourceError) -> OriginURL {
        base.appending(encodedSegments: try Self.validatedSegments(of: key))
    }

    /// Splits `key` on `/` (empty segments dropped), refusing empty, absolute, over-long keys,
    /// NUL bytes and `.`/`..` segments.
    package static func validatedSegments(of key: String) throws(SourceError) -> [String] {
        func refuse(_ why: String) -> SourceError { SourceError(key: key, reason: .invalidKey(why)) }
        if key.isEmpty { throw refuse("empty key") }
        if key.utf8.count > maxKeyBytes { throw refuse("longer than \(maxKeyBytes) bytes") }
        if key.utf8.contains(0) { throw refuse("contains a NUL byte") }
        if key.hasPrefix("/") { throw refuse("absolute paths are not allowed; give a path relative to the origin's base URL") }
        let segments = key.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if segments.isEmpty { throw refuse("no file name") }
        for segment in segments where segment == "." || segment == ".." {
            throw refuse("'\(segment)' path segments are not allowed")
        }
        return segments
    }

    /// The version of a body whose response had no validator: a digest of its bytes.
    package static func contentVersion(of bytes: [UInt8]) -> String {
        "sha256:" + bytes.withUnsafeBytes { KeyHash.sha256Hex($0) }.prefix(32)
    }
}

extension Duration {
    /// As a NIO `TimeAmount` (nanoseconds, saturating).
    package var timeAmount: TimeAmount {
        let (seconds, attoseconds) = components
        let (ns, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return .nanoseconds(seconds < 0 ? .min : .max) }
        return .nanoseconds(ns.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue)
    }
}
