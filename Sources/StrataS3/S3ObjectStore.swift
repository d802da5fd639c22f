import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1
import Strata
import StrataHTTPOrigin
import Synchronization

/// Objects in a bucket, read, written and deleted with signed requests: what the shared tier
/// keeps (and what tests put into a bucket). Every call has one deadline (`timeout`), no retry:
/// a caller that can do without the store (the shared tier renders instead) must not wait on it.
/// A PUT's body is covered by its signature (`x-amz-content-sha256`), so the store refuses a
/// body that changed on the way. Cost: one HMAC chain per request, plus a SHA-256 of a PUT body.
public final class S3ObjectStore: Sendable, CustomStringConvertible {
    public let endpoint: S3Endpoint
    /// The longest one call may take, connection included.
    public let timeout: Duration
    /// The largest object read; a larger one is an error (nothing more is read).
    public let maxObjectBytes: Int
    let client: HTTPClient
    private let ownsClient: Bool
    private let isShutDown = Atomic<Bool>(false)
    let signer: S3RequestSigner
    let bucketURL: OriginURL

    /// A store for `endpoint` signed with `credentials`; with `client` `nil` it makes its own
    /// `HTTPClient` (shut down by ``shutdown()``).
    public init(
        endpoint: S3Endpoint, credentials: AWSCredentials, timeout: Duration, maxObjectBytes: Int = 256 << 20,
        maxConnections: Int = 32, client: HTTPClient? = nil, settings: String = "shared.s3"
    ) throws(S3ConfigurationError) {
        try endpoint.validate(settings: settings)
        try credentials.validate(settings: settings)
        do {
            bucketURL = try endpoint.bucketURL()
        } catch {
            throw .init(key: "\(settings).endpoint", value: endpoint.serviceURL, allowed: error.reason)
        }
        self.endpoint = endpoint
        self.timeout = timeout
        self.maxObjectBytes = maxObjectBytes
        self.signer = S3RequestSigner(signer: SigV4Signer(credentials: credentials, region: endpoint.region))
        if let client {
            self.client = client
            self.ownsClient = false
        } else {
            var configuration = HTTPClient.Configuration(
                redirectConfiguration: .disallow, timeout: .init(connect: timeout.timeAmount, read: timeout.timeAmount),
                decompression: .disabled)
            configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = maxConnections
            configuration.tracing.tracer = nil
            self.client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
            self.ownsClient = true
        }
    }

    deinit {
        if ownsClient && !isShutDown.load(ordering: .acquiring) { _ = client.shutdown() }
    }

    /// Shuts down the client if the store made it. Safe to call more than once.
    public func shutdown() async throws {
        guard !isShutDown.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if ownsClient { try await client.shutdown() }
    }

    public var description: String { "S3ObjectStore(\(endpoint))" }

    /// One object read: its bytes and `ETag`.
    public struct Object: Sendable {
        public var bytes: [UInt8]
        public var etag: String?
    }

    /// The object `key`, or `nil` when there is none (404). `deadline` replaces the store's
    /// timeout for this call.
    public func get(_ key: String, deadline: ContinuousClock.Instant? = nil) async throws(S3StoreError) -> Object? {
        try await send(.GET, key, deadline: deadline) { response, url throws(S3StoreError) -> Object? in
            switch response.status.code {
            case 200: return Object(bytes: response.body, etag: response.headers.first(name: "etag"))
            case 404: return nil
            default: throw Self.failure(response, key: key, url: url)
            }
        }
    }

    /// Writes `bytes` as the object `key` (replacing it).
    public func put(
        _ key: String, _ bytes: [UInt8], contentType: String = "application/octet-stream", deadline: ContinuousClock.Instant? = nil
    ) async throws(S3StoreError) {
        try await send(.PUT, key, body: bytes, contentType: contentType, deadline: deadline) { response, url throws(S3StoreError) in
            guard (200...299).contains(response.status.code) else { throw Self.failure(response, key: key, url: url) }
        }
    }

    /// Deletes the object `key` (a missing one is not an error: S3 answers 204 either way).
    public func delete(_ key: String, deadline: ContinuousClock.Instant? = nil) async throws(S3StoreError) {
        try await send(.DELETE, key, deadline: deadline) { response, url throws(S3StoreError) in
            guard (200...299).contains(response.status.code) || response.status.code == 404 else {
                throw Self.failure(response, key: key, url: url)
            }
        }
    }

    /// The URL of the object `key` (each `/`-separated segment percent-encoded).
    package func url(of key: String) -> OriginURL {
        bucketURL.appending(encodedSegments: key.split(separator: "/", omittingEmptySubsequences: false).map(String.init))
    }

    /// Sends one signed request and collects its answer (a 2xx's body within
    /// ``maxObjectBytes``) on the client's event loop, then hands it to `handle`.
    private func send<T>(
        _ method: HTTPMethod, _ key: String, body: [UInt8]? = nil, contentType: String? = nil,
        deadline: ContinuousClock.Instant? = nil, _ handle: (CollectedResponse, OriginURL) throws(S3StoreError) -> T
    ) async throws(S3StoreError) -> T {
        if isShutDown.load(ordering: .acquiring) { throw S3StoreError(key: key, kind: .shutDown) }
        let url = url(of: key)
        var headers = HTTPHeaders()
        var payloadHash = SigV4Signer.emptyPayloadHash
        if let body {
            payloadHash = SigV4Signer.sha256Hex(body)
            headers.replaceOrAdd(name: "content-length", value: "\(body.count)")
            if let contentType { headers.replaceOrAdd(name: "content-type", value: contentType) }
        }
        signer.sign(&headers, method: method, url: url, payloadHash: payloadHash)
        let response: CollectedResponse
        do {
            let request = try HTTPClient.Request(
                url: url.description, method: method, headers: headers, body: body.map { .bytes($0) })
            let remaining = deadline.map { max($0 - ContinuousClock.now, .zero) } ?? timeout
            response = try await client.collect(request, bound: BodyBound(limit: maxObjectBytes), deadline: .now() + remaining.timeAmount)
        } catch CollectFailure.bodyTooLarge {
            throw S3StoreError(key: key, kind: .tooLarge(limit: maxObjectBytes), url: "\(url)")
        } catch {
            if Task.isCancelled { throw S3StoreError(key: key, kind: .cancelled) }
            throw S3StoreError(key: key, kind: .unreachable(HTTPSource.failureKind(of: error)), url: "\(url)")
        }
        return try handle(response, url)
    }

    private static func failure(_ response: CollectedResponse, key: String, url: OriginURL) -> S3StoreError {
        // The origin's reader of S3's error bodies (the first 8 KiB, `<Code>`).
        let said = ServerRefusal.read(headers: response.headers, body: response.body, sentAt: WallClock.secondsSince1970())
        return S3StoreError(key: key, kind: .status(Int(response.status.code), code: said?.code), url: "\(url)")
    }
}

/// Why an object store call failed: the object key, what happened, and the URL (never headers).
public struct S3StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// The store answered an unexpected status, with S3's error code when its body had one.
        case status(Int, code: String?)
        /// No connection, a broken one, or the deadline passed.
        case unreachable(HTTPOriginError.Kind)
        /// The object is larger than the store's `maxObjectBytes`.
        case tooLarge(limit: Int)
        case cancelled
        case shutDown
    }

    public var key: String
    public var kind: Kind
    public var url: String = ""

    public init(key: String, kind: Kind, url: String = "") {
        self.key = key
        self.kind = kind
        self.url = url
    }

    public var description: String {
        switch kind {
        case .status(let status, let code):
            return "object store \(url) answered HTTP \(status)" + (code.map { " (\($0))" } ?? "")
        case .unreachable(let why): return "object store \(url) unreachable: \(why)"
        case .tooLarge(let limit): return "object \(key.debugDescription) is larger than \(limit) bytes"
        case .cancelled: return "object store call for \(key.debugDescription) cancelled"
        case .shutDown: return "the object store is shut down"
        }
    }
}
