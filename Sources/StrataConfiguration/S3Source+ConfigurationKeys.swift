#if RemoteSources
import Strata
import StrataS3

/// The keys every bucket has, under `source.s3` (originals) and `shared.s3` (the shared tier):
/// `bucket` (or `s3://bucket/prefix`), `prefix`, `region`, `endpoint`, `addressing` and the
/// credentials (`accessKeyID`, `secretAccessKey`, `sessionToken`, else the `AWS_…` variables).
package struct BucketSettings: Sendable, Equatable {
    package var endpoint: S3Endpoint
    package var prefix: String
    package var credentials: AWSCredentials

    /// `nil` when `<section>.bucket` is unset (every key is still read, for `strata config`).
    package static func read(_ section: String, from reader: inout KeyReader) throws(ConfigurationError) -> BucketSettings? {
        let bucketValue = try reader.string("\(section).bucket")
        var prefix = try reader.string("\(section).prefix") ?? ""
        let region = try reader.string("\(section).region") ?? "us-east-1"
        let endpointURL = try reader.string("\(section).endpoint")
        let addressing = try reader.choice(
            "\(section).addressing", S3Endpoint.Addressing.allCases.map { ($0.rawValue, $0) })
        let credentials = AWSCredentials(
            accessKeyID: try reader.string("\(section).accessKeyID") ?? "",
            secretAccessKey: try reader.string("\(section).secretAccessKey") ?? "",
            sessionToken: try reader.string("\(section).sessionToken"))
        guard var bucket = bucketValue else { return nil }
        // `s3://bucket/prefix` in one value.
        if bucket.hasPrefix("s3://") {
            let rest = bucket.dropFirst(5)
            let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            bucket = String(parts[0])
            if parts.count > 1, !parts[1].isEmpty {
                if !prefix.isEmpty {
                    throw reader.error("\(section).bucket", reason: "gives a prefix, and so does \(section).prefix: give one")
                }
                prefix = String(parts[1])
            }
        }
        let settings = BucketSettings(
            endpoint: S3Endpoint(bucket: bucket, region: region, endpoint: endpointURL, addressing: addressing),
            prefix: prefix, credentials: credentials)
        do {
            try settings.endpoint.validate(settings: section)
        } catch {
            throw reader.error(error.key, reason: "expected \(error.allowed)")
        }
        do {
            try credentials.validate(settings: section)
        } catch {
            throw reader.error(error.key, reason: "a bucket needs credentials: expected \(error.allowed)")
        }
        return settings
    }
}

extension S3Source.Configuration {
    /// Reads every `source.s3.*` key and checks them (``validate()``); `nil` when
    /// `source.s3.bucket` is unset.
    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> S3Source.Configuration? {
        let bucket = try BucketSettings.read("source.s3", from: &reader)
        var source = S3Source.Configuration(
            endpoint: bucket?.endpoint ?? S3Endpoint(bucket: "unset"),
            credentials: bucket?.credentials ?? AWSCredentials(accessKeyID: "", secretAccessKey: "", sessionToken: nil))
        source.prefix = bucket?.prefix ?? ""
        source.connectTimeout = try reader.duration("source.s3.connectTimeout")
        source.readTimeout = try reader.duration("source.s3.readTimeout")
        source.totalTimeout = try reader.duration("source.s3.totalTimeout")
        source.maxBodyBytes = try reader.bytes("source.s3.maxBodySize", min: 1)
        source.maxConcurrentRequests = try reader.integer("source.s3.maxConcurrentRequests", min: 1)
        source.maxRetries = try reader.integer("source.s3.maxRetries", min: 0)
        source.retryBackoff = try reader.duration("source.s3.retryBackoff")
        source.rememberedVersions = try reader.integer("source.s3.rememberedVersions", min: 0)
        guard bucket != nil else { return nil }
        do {
            try source.validate()
        } catch {
            throw reader.error(error.key, reason: "expected \(error.allowed)")
        }
        return source
    }
}
#endif
