import StrataHTTPOrigin

/// Where a bucket is reached: the service's endpoint, the bucket's region, and whether the
/// bucket goes in the host name (virtual-hosted, `https://bucket.s3.region.amazonaws.com/key`)
/// or in the path (path-style, `https://endpoint/bucket/key`, which MinIO, Ceph RGW and most
/// local servers expect). Value type; building a URL is a few string operations.
public struct S3Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// How the bucket is addressed.
    public enum Addressing: String, Sendable, Hashable, CaseIterable {
        /// Virtual-hosted for AWS's own endpoints when the bucket name is a valid host label
        /// (no dots: a dotted name would not match the wildcard TLS certificate), else path-style.
        case auto
        /// `https://endpoint/bucket/key`.
        case path
        /// `https://bucket.endpoint/key`.
        case virtual
    }

    /// The bucket's name.
    public var bucket: String
    /// The bucket's region (`us-east-1` for MinIO and most local servers; `auto` for R2).
    public var region: String
    /// The service's URL: `http(s)://host[:port]`, without a path; `nil` for AWS
    /// (`https://s3.<region>.amazonaws.com`).
    public var endpoint: String?
    public var addressing: Addressing

    public init(bucket: String, region: String = "us-east-1", endpoint: String? = nil, addressing: Addressing = .auto) {
        self.bucket = bucket
        self.region = region
        self.endpoint = endpoint
        self.addressing = addressing
    }

    /// The service URL in force.
    public var serviceURL: String { endpoint ?? "https://s3.\(region).amazonaws.com" }

    /// The addressing in force once `auto` is decided.
    public var effectiveAddressing: Addressing {
        switch addressing {
        case .path, .virtual: return addressing
        case .auto: return endpoint == nil && !bucket.contains(".") ? .virtual : .path
        }
    }

    /// Why a bucket, region or endpoint is refused, naming the key under `settings`.
    public func validate(settings: String) throws(S3ConfigurationError) {
        let b = bucket.utf8
        let validBucket =
            (3...63).contains(b.count)
            && b.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x2E }
            && b.first != 0x2D && b.first != 0x2E && b.last != 0x2D && b.last != 0x2E
        if !validBucket {
            throw .init(
                key: "\(settings).bucket", value: bucket,
                allowed: "a bucket name of 3 to 63 lower-case letters, digits, '-' and '.', starting and ending with a letter or digit")
        }
        if region.isEmpty || !region.utf8.allSatisfy({ OriginURL.isUnreserved($0) }) {
            throw .init(key: "\(settings).region", value: region, allowed: "a region name such as us-east-1")
        }
        let url: OriginURL
        do {
            url = try OriginURL.parse(serviceURL)
        } catch {
            throw .init(key: "\(settings).endpoint", value: serviceURL, allowed: "an http:// or https:// URL (\(error.reason))")
        }
        if url.pathAndQuery != "/" {
            throw .init(key: "\(settings).endpoint", value: serviceURL, allowed: "an http:// or https:// URL without a path")
        }
        if effectiveAddressing == .virtual && bucket.contains(".") {
            throw .init(
                key: "\(settings).addressing", value: "virtual",
                allowed: "path (a bucket name with dots cannot be a host name under the endpoint's TLS certificate)")
        }
    }

    /// The URL of the bucket's root (ending in `/`), below which keys are appended.
    package func bucketURL() throws(OriginURL.ParseError) -> OriginURL {
        var url = try OriginURL.parse(serviceURL)
        switch effectiveAddressing {
        case .virtual: url.host = bucket + "." + url.host
        case .path, .auto: url.pathAndQuery = "/" + bucket + "/"
        }
        if !url.pathAndQuery.hasSuffix("/") { url.pathAndQuery += "/" }
        return url
    }

    public var description: String { "s3://\(bucket) at \(serviceURL) (\(region), \(effectiveAddressing.rawValue)-style)" }
}

/// A bad S3 setting: the configuration key, the value given (never a secret) and what is
/// allowed. The same type as an HTTP origin's (``/StrataHTTPOrigin/HTTPSourceConfigurationError``):
/// a bucket is an origin with signed requests.
public typealias S3ConfigurationError = HTTPSourceConfigurationError
