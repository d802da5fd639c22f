import Strata
import StrataHTTPOrigin

extension S3Source {
    /// The settings of a bucket of originals (`source.s3.*`). ``validate()`` checks them all and
    /// names the first bad key; `description`, `debugDescription` and `dump` never show the
    /// secret key or the session token.
    public struct Configuration: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible,
        CustomReflectable
    {
        /// `source.s3.bucket`, `.region`, `.endpoint`, `.addressing`.
        public var endpoint: S3Endpoint
        /// `source.s3.prefix`: the folder of the bucket that keys are relative to (`""`: the
        /// whole bucket). Leading and trailing `/` are ignored.
        public var prefix: String = ""
        /// `source.s3.accessKeyID`, `.secretAccessKey`, `.sessionToken`, else the
        /// `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` variables.
        public var credentials: AWSCredentials
        /// `source.s3.connectTimeout`. Default 5 s.
        public var connectTimeout: Duration = .seconds(5)
        /// `source.s3.readTimeout`: the longest wait for the next byte. Default 15 s.
        public var readTimeout: Duration = .seconds(15)
        /// `source.s3.totalTimeout`: one fetch, retries included. Default 60 s.
        public var totalTimeout: Duration = .seconds(60)
        /// `source.s3.maxBodySize`: the largest original accepted. Default 256 MiB.
        public var maxBodyBytes: Int = 256 << 20
        /// `source.s3.maxConcurrentRequests`: requests in flight at once. Default 32.
        public var maxConcurrentRequests: Int = 32
        /// `source.s3.maxRetries`: retries of a 5xx (S3's `SlowDown` and `InternalError`
        /// among them), a broken connection or a timeout, never of a 4xx. Default 2.
        public var maxRetries: Int = 2
        /// `source.s3.retryBackoff`: the first retry's pause, doubled per retry, jittered.
        /// Default 100 ms.
        public var retryBackoff: Duration = .milliseconds(100)
        /// `source.s3.rememberedVersions`: keys whose last `ETag` is kept for revalidation.
        /// Default 100 000.
        public var rememberedVersions: Int = 100_000
        /// The configuration keys' prefix that errors name.
        public var settings = "source.s3"

        public init(endpoint: S3Endpoint, credentials: AWSCredentials) {
            self.endpoint = endpoint
            self.credentials = credentials
        }

        /// The prefix's segments (empty ones dropped).
        var prefixSegments: [String] { prefix.split(separator: "/").map(String.init) }

        /// Checks every setting; throws naming the first bad key.
        public func validate() throws(S3ConfigurationError) {
            try endpoint.validate(settings: settings)
            try credentials.validate(settings: settings)
            for segment in prefixSegments where segment == "." || segment == ".." {
                throw .init(key: "\(settings).prefix", value: prefix, allowed: "a folder without '.' or '..' segments")
            }
            if prefix.utf8.contains(0) || prefix.utf8.count > 1024 {
                throw .init(key: "\(settings).prefix", value: prefix, allowed: "at most 1024 bytes, without NUL")
            }
            let placeholder = OriginURL(scheme: "http", host: "validate.invalid", port: nil, pathAndQuery: "/")
            do {
                try originConfiguration(base: placeholder).validate()
            } catch {
                throw .init(key: error.key.replacingPrefix("source.http", with: settings), value: error.value, allowed: error.allowed)
            }
        }

        /// The HTTP origin's settings for the bucket at `base`.
        package func originConfiguration(base: OriginURL) -> HTTPSource.Configuration {
            var origin = HTTPSource.Configuration(baseURL: base.description)
            origin.connectTimeout = connectTimeout
            origin.readTimeout = readTimeout
            origin.totalTimeout = totalTimeout
            origin.maxBodyBytes = maxBodyBytes
            origin.maxRedirects = 0
            origin.maxConcurrentRequests = maxConcurrentRequests
            origin.maxRetries = maxRetries
            origin.retryBackoff = retryBackoff
            origin.rememberedVersions = rememberedVersions
            return origin
        }

        /// Every setting with its key, one per line, secrets redacted.
        public var redactedDescription: String {
            [
                "\(settings).bucket = \(endpoint.bucket)",
                "\(settings).prefix = \(prefix)",
                "\(settings).region = \(endpoint.region)",
                "\(settings).endpoint = \(endpoint.serviceURL)",
                "\(settings).addressing = \(endpoint.addressing.rawValue) (\(endpoint.effectiveAddressing.rawValue))",
                "\(settings).credentials = \(credentials)",
                "\(settings).connectTimeout = \(connectTimeout)",
                "\(settings).readTimeout = \(readTimeout)",
                "\(settings).totalTimeout = \(totalTimeout)",
                "\(settings).maxBodySize = \(maxBodyBytes)",
                "\(settings).maxConcurrentRequests = \(maxConcurrentRequests)",
                "\(settings).maxRetries = \(maxRetries)",
                "\(settings).retryBackoff = \(retryBackoff)",
                "\(settings).rememberedVersions = \(rememberedVersions)",
            ].joined(separator: "\n")
        }

        public var description: String { redactedDescription }
        public var debugDescription: String { redactedDescription }
        public var customMirror: Mirror {
            Mirror(
                self,
                children: [
                    "endpoint": endpoint, "prefix": prefix, "credentials": credentials, "connectTimeout": connectTimeout,
                    "readTimeout": readTimeout, "totalTimeout": totalTimeout, "maxBodyBytes": maxBodyBytes,
                    "maxConcurrentRequests": maxConcurrentRequests, "maxRetries": maxRetries, "retryBackoff": retryBackoff,
                    "rememberedVersions": rememberedVersions,
                ])
        }
    }
}
