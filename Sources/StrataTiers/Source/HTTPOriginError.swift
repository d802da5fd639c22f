import StrataBase
/// Why an HTTP origin did not deliver an original (carried by
/// ``SourceError/Reason/origin(_:)``). Every case says what to check; none carries the
/// request's headers (they may hold credentials).
///
/// It lives here, not in StrataHTTPOrigin, because ``SourceError`` carries it (and the service
/// maps it to 502/504 without depending on the HTTP client); the limits named below are those of
/// StrataHTTPOrigin's `HTTPSource.Configuration`.
public struct HTTPOriginError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Which limit a timeout hit.
    public enum Timeout: String, Sendable, Equatable {
        /// No connection within `connectTimeout`.
        case connect
        /// No byte for `readTimeout`.
        case read
        /// The whole fetch took longer than `totalTimeout`.
        case total
    }

    public enum Kind: Sendable, Equatable {
        /// The origin answered with a status that is neither success, not-found nor a redirect
        /// (a 5xx after the retry, a 403, …).
        case status(Int)
        /// The connection could not be made or broke (refused, reset, closed early, TLS).
        case connection(String)
        /// A timeout fired.
        case timeout(Timeout)
        /// The body is larger than `maxBodyBytes`: `declared` is the
        /// `Content-Length` when that was over the limit (nothing was read), `nil` when the
        /// limit was crossed while streaming (the transfer was aborted there).
        case bodyTooLarge(limit: Int, declared: Int?)
        /// More than `maxRedirects` redirects in a row.
        case tooManyRedirects(limit: Int)
        /// A redirect was not followed: to another host, another scheme, or to an unreadable
        /// `Location`.
        case redirectRefused(location: String, reason: String)
        /// The response broke the protocol (a redirect without `Location`, a 304 to a plain GET).
        case invalidResponse(String)
    }

    public var kind: Kind
    /// The URL that failed (base URL and encoded key; never headers).
    public var url: String
    /// How many attempts were made (2 when the failure was retried once).
    public var attempts: Int
    /// The configuration keys' prefix that the advice names: `source.http` for an HTTP origin,
    /// `source.s3` for a bucket.
    public var settings: String
    /// What the server said about a refusal, when its body said it the way S3 does
    /// (`<Code>` and `<Message>`): `SignatureDoesNotMatch`, `AccessDenied`,
    /// `RequestTimeTooSkewed`, `NoSuchBucket`…
    public var serverCode: String?
    public var serverMessage: String?
    /// How far this machine's clock is from the server's `Date` header, in seconds (positive
    /// when the server is ahead), when a refusal came with one more than 15 minutes off:
    /// request signatures (AWS Signature Version 4) are refused past that skew.
    public var clockSkewSeconds: Int?

    public init(
        kind: Kind, url: String, attempts: Int = 1, settings: String = "source.http", serverCode: String? = nil,
        serverMessage: String? = nil, clockSkewSeconds: Int? = nil
    ) {
        self.kind = kind
        self.url = url
        self.attempts = attempts
        self.settings = settings
        self.serverCode = serverCode
        self.serverMessage = serverMessage
        self.clockSkewSeconds = clockSkewSeconds
    }

    /// Whether one more attempt after a short backoff may succeed: 5xx statuses, broken
    /// connections, connect and read timeouts. The total timeout is not (no time is left).
    public var isRetryable: Bool {
        switch kind {
        case .status(let code): return (500...599).contains(code)
        case .connection: return true
        case .timeout(let which): return which != .total
        case .bodyTooLarge, .tooManyRedirects, .redirectRefused, .invalidResponse: return false
        }
    }

    public var description: String {
        let tries = attempts > 1 ? " (after \(attempts) attempts)" : ""
        let said = serverCode.map { code in " (\(code)" + (serverMessage.map { ": \($0)" } ?? "") + ")" } ?? ""
        switch kind {
        case .status(let code) where (500...599).contains(code):
            return "origin \(url) answered HTTP \(code)\(said)\(tries); the origin server is failing — check its logs and health"
        case .status(let code) where code == 401 || code == 403:
            return "origin \(url) answered HTTP \(code)\(said)\(tries); " + refusalAdvice
        case .status(let code):
            return "origin \(url) answered HTTP \(code)\(said)\(tries); expected 200, 404 or 410"
        case .connection(let why):
            return "cannot reach origin \(url)\(tries): \(why); check that the origin is up and \(locationKey) names it"
        case .timeout(let which):
            return "origin \(url) timed out (\(which.rawValue) timeout, \(settings).\(which.rawValue)Timeout)\(tries); "
                + "the origin is slow or unreachable — raise the timeout if that is expected"
        case .bodyTooLarge(let limit, let declared?):
            return "origin \(url) declares \(declared) bytes, over the \(limit)-byte limit (\(settings).maxBodySize); "
                + "nothing was read — raise the limit if such originals are expected"
        case .bodyTooLarge(let limit, nil):
            return "origin \(url) sent more than \(limit) bytes (\(settings).maxBodySize); the transfer was aborted — "
                + "raise the limit if such originals are expected"
        case .tooManyRedirects(let limit):
            return "origin \(url) redirected more than \(limit) times (\(settings).maxRedirects); a redirect loop, "
                + "or point \(locationKey) at the final location"
        case .redirectRefused(let location, let reason):
            return "origin \(url) redirected to \(location), not followed: \(reason)"
        case .invalidResponse(let why):
            return "origin \(url) sent an invalid response: \(why)"
        }
    }

    /// The key that says where the origin is.
    private var locationKey: String { settings == "source.http" ? "source.http.baseURL" : "\(settings).endpoint" }

    /// What to do about a 401 or 403: the clock when it is skewed, else the credentials.
    private var refusalAdvice: String {
        if serverCode == "RequestTimeTooSkewed" || clockSkewSeconds != nil {
            let by = clockSkewSeconds.map { " (by \(abs($0)) s)" } ?? ""
            return "this machine's clock differs from the server's\(by), and signed requests are refused beyond "
                + "15 minutes — synchronise the clock (NTP)"
        }
        if settings == "source.http" { return "check the credentials in source.http.headers" }
        return "check \(settings).accessKeyID and \(settings).secretAccessKey (or AWS_ACCESS_KEY_ID and "
            + "AWS_SECRET_ACCESS_KEY), \(settings).region, and the bucket's policy"
    }
}
