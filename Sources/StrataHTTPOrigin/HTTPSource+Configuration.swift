import Strata

extension HTTPSource {
    /// The settings of an HTTP origin. Each property has a configuration key (named in its
    /// documentation and in ``HTTPSourceConfigurationError/key``); ``validate()`` checks them all.
    ///
    /// `description`, `debugDescription` and reflection (`dump`) show header names only, never
    /// their values (``redactedDescription``).
    public struct Configuration: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        /// `source.http.baseURL`: where originals live; a key `a/b.jpg` is fetched from
        /// `<baseURL>/a/b.jpg` (each key segment percent-encoded). `http` or `https`, a host, an
        /// optional port and path; no query, fragment or `user:password@`. A missing trailing
        /// `/` is added.
        public var baseURL: String
        /// `source.http.connectTimeout`: the longest wait for a connection. Default 5 s.
        public var connectTimeout: Duration = .seconds(5)
        /// `source.http.readTimeout`: the longest wait for the next byte (the response head, or
        /// more of the body). Default 15 s.
        public var readTimeout: Duration = .seconds(15)
        /// `source.http.totalTimeout`: the longest one fetch may take, redirects and the retry
        /// included. Default 60 s.
        public var totalTimeout: Duration = .seconds(60)
        /// `source.http.maxBodySize`: the largest original accepted, in bytes. A larger
        /// `Content-Length` is refused before reading; a body that grows past it while
        /// streaming is aborted there (never buffered whole). Default 256 MiB.
        public var maxBodyBytes: Int = 256 << 20
        /// `source.http.maxRedirects`: redirects followed per request (0 follows none).
        /// Default 3.
        public var maxRedirects: Int = 3
        /// `source.http.allowCrossHostRedirects`: whether a redirect may lead to another
        /// scheme, host or port. Default false. The static ``headers`` are sent to the base
        /// URL's origin only, never to another host.
        public var allowCrossHostRedirects = false
        /// `source.http.maxConcurrentRequests`: requests in flight to the origin at once; more
        /// wait their turn. Default 16.
        public var maxConcurrentRequests: Int = 16
        /// `source.http.headers`: headers sent with every request to the origin (an
        /// `Authorization` token, an API key). Values are secrets: never logged or printed.
        public var headers: [String: String] = [:]
        /// `source.http.retryBackoff`: the pause before the first retry of a 5xx, a broken
        /// connection or a timeout; each further retry doubles it, and each pause is cut by a
        /// random factor of up to a half (jitter). Default 200 ms.
        public var retryBackoff: Duration = .milliseconds(200)
        /// `source.http.maxRetries`: retries of a 5xx, a broken connection or a connect or read
        /// timeout (never of a 4xx), within ``totalTimeout``. Default 1.
        public var maxRetries: Int = 1
        /// `source.http.rememberedVersions`: how many keys' last validators (`ETag`,
        /// `Last-Modified`) are kept for conditional revalidation; the oldest is forgotten
        /// first. Default 100 000.
        public var rememberedVersions: Int = 100_000

        public init(baseURL: String) {
            self.baseURL = baseURL
        }

        /// Headers the source sets itself (or that would break the framing); refused in
        /// ``headers``.
        static let reservedHeaders: Set<String> = [
            "host", "content-length", "transfer-encoding", "connection", "upgrade", "te", "trailer", "keep-alive",
            "if-none-match", "if-modified-since", "range", "expect",
        ]

        /// Checks every setting; throws an error naming the first bad key, its value (header
        /// values redacted) and what is allowed.
        public func validate() throws(HTTPSourceConfigurationError) {
            _ = try parsedBaseURL()
            try Self.checkPositive(connectTimeout, key: "source.http.connectTimeout")
            try Self.checkPositive(readTimeout, key: "source.http.readTimeout")
            try Self.checkPositive(totalTimeout, key: "source.http.totalTimeout")
            if maxBodyBytes < 1 {
                throw .init(key: "source.http.maxBodySize", value: "\(maxBodyBytes)", allowed: "at least 1 byte")
            }
            if !(0...20).contains(maxRedirects) {
                throw .init(key: "source.http.maxRedirects", value: "\(maxRedirects)", allowed: "0...20")
            }
            if !(1...4096).contains(maxConcurrentRequests) {
                throw .init(key: "source.http.maxConcurrentRequests", value: "\(maxConcurrentRequests)", allowed: "1...4096")
            }
            if retryBackoff < .zero || retryBackoff > .seconds(60) {
                throw .init(key: "source.http.retryBackoff", value: "\(retryBackoff)", allowed: "0 s...60 s")
            }
            if !(0...10).contains(maxRetries) {
                throw .init(key: "source.http.maxRetries", value: "\(maxRetries)", allowed: "0...10")
            }
            if rememberedVersions < 0 {
                throw .init(key: "source.http.rememberedVersions", value: "\(rememberedVersions)", allowed: "0 or more")
            }
            for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
                let shown = "\(name): <redacted>"
                if name.isEmpty || !name.utf8.allSatisfy(Self.isTokenByte) {
                    throw .init(
                        key: "source.http.headers", value: shown,
                        allowed: "a header name of letters, digits and !#$%&'*+-.^_`|~")
                }
                if Self.reservedHeaders.contains(name.lowercased()) {
                    throw .init(
                        key: "source.http.headers", value: shown,
                        allowed: "any header but \(Self.reservedHeaders.sorted().joined(separator: ", ")) (the source sets those)")
                }
                if value.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }) {
                    throw .init(
                        key: "source.http.headers", value: shown, allowed: "a value without control characters (CR, LF, NUL, …)")
                }
            }
        }

        /// The base URL parsed, its path ending in `/`.
        func parsedBaseURL() throws(HTTPSourceConfigurationError) -> OriginURL {
            var url: OriginURL
            do {
                url = try OriginURL.parse(baseURL)
            } catch {
                throw .init(
                    key: "source.http.baseURL", value: baseURL,
                    allowed: "an http:// or https:// URL with a host and an optional path (\(error.reason))")
            }
            if !url.pathAndQuery.hasSuffix("/") { url.pathAndQuery += "/" }
            return url
        }

        private static func checkPositive(_ value: Duration, key: String) throws(HTTPSourceConfigurationError) {
            if value <= .zero { throw .init(key: key, value: "\(value)", allowed: "a duration above zero") }
        }

        /// RFC 9110 `tchar`.
        private static func isTokenByte(_ b: UInt8) -> Bool {
            if OriginURL.isUnreserved(b) { return true }
            return "!#$%&'*+^`|".utf8.contains(b)
        }

        /// Every setting with its key, one per line; header values replaced by `<redacted>`
        /// (for `strata config` and logs).
        public var redactedDescription: String {
            let headerList = headers.keys.sorted().map { "\($0): <redacted>" }.joined(separator: ", ")
            return [
                "source.http.baseURL = \(baseURL)",
                "source.http.connectTimeout = \(connectTimeout)",
                "source.http.readTimeout = \(readTimeout)",
                "source.http.totalTimeout = \(totalTimeout)",
                "source.http.maxBodySize = \(maxBodyBytes)",
                "source.http.maxRedirects = \(maxRedirects)",
                "source.http.allowCrossHostRedirects = \(allowCrossHostRedirects)",
                "source.http.maxConcurrentRequests = \(maxConcurrentRequests)",
                "source.http.headers = [\(headerList)]",
                "source.http.retryBackoff = \(retryBackoff)",
                "source.http.maxRetries = \(maxRetries)",
                "source.http.rememberedVersions = \(rememberedVersions)",
            ].joined(separator: "\n")
        }

        /// The header values as shown anywhere outside the request itself.
        public var redactedHeaders: [String: String] { headers.mapValues { _ in "<redacted>" } }

        public var description: String { redactedDescription }
        public var debugDescription: String { redactedDescription }
        public var customMirror: Mirror {
            Mirror(
                self,
                children: [
                    "baseURL": baseURL, "connectTimeout": connectTimeout, "readTimeout": readTimeout,
                    "totalTimeout": totalTimeout, "maxBodyBytes": maxBodyBytes, "maxRedirects": maxRedirects,
                    "allowCrossHostRedirects": allowCrossHostRedirects, "maxConcurrentRequests": maxConcurrentRequests,
                    "headers": redactedHeaders, "retryBackoff": retryBackoff, "maxRetries": maxRetries,
                    "rememberedVersions": rememberedVersions,
                ])
        }
    }
}

/// A bad ``HTTPSource/Configuration`` value: the configuration key, the value given (header
/// values never shown) and what is allowed.
public struct HTTPSourceConfigurationError: Error, Hashable, Sendable, CustomStringConvertible {
    public var key: String
    public var value: String
    public var allowed: String

    public init(key: String, value: String, allowed: String) {
        self.key = key
        self.value = value
        self.allowed = allowed
    }

    public var description: String { "\(key): \(value.debugDescription) is not allowed; expected \(allowed)" }
}
