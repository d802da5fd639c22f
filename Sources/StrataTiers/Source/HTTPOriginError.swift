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

    public init(kind: Kind, url: String, attempts: Int = 1) {
        self.kind = kind
        self.url = url
        self.attempts = attempts
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
        switch kind {
        case .status(let code) where (500...599).contains(code):
            return "origin \(url) answered HTTP \(code)\(tries); the origin server is failing — check its logs and health"
        case .status(let code) where code == 401 || code == 403:
            return "origin \(url) answered HTTP \(code)\(tries); check the credentials in source.http.headers"
        case .status(let code):
            return "origin \(url) answered HTTP \(code)\(tries); expected 200, 404 or 410"
        case .connection(let why):
            return
                "cannot reach origin \(url)\(tries): \(why); check that the origin is up and source.http.baseURL names it"
        case .timeout(let which):
            return "origin \(url) timed out (\(which.rawValue) timeout, source.http.\(which.rawValue)Timeout)\(tries); "
                + "the origin is slow or unreachable — raise the timeout if that is expected"
        case .bodyTooLarge(let limit, let declared?):
            return "origin \(url) declares \(declared) bytes, over the \(limit)-byte limit (source.http.maxBodySize); "
                + "nothing was read — raise the limit if such originals are expected"
        case .bodyTooLarge(let limit, nil):
            return "origin \(url) sent more than \(limit) bytes (source.http.maxBodySize); the transfer was aborted — "
                + "raise the limit if such originals are expected"
        case .tooManyRedirects(let limit):
            return "origin \(url) redirected more than \(limit) times (source.http.maxRedirects); a redirect loop, "
                + "or point source.http.baseURL at the final location"
        case .redirectRefused(let location, let reason):
            return "origin \(url) redirected to \(location), not followed: \(reason)"
        case .invalidResponse(let why):
            return "origin \(url) sent an invalid response: \(why)"
        }
    }
}
