import Crypto
import Strata

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A UTC instant, to the second, in the two forms AWS Signature Version 4 writes it: `amzDate`
/// (`20130524T000000Z`, the `x-amz-date` header) and `dateStamp` (`20130524`, the credential scope).
///
/// Make one per request with ``now()``, or from seconds since the Unix epoch for tests. The calendar
/// conversion is Howard Hinnant's `civil_from_days` (proleptic Gregorian), done once in the initialiser:
/// a few integer divisions, no allocation, no Foundation, no time zone database.
public struct SigV4Date: Sendable, Hashable, CustomStringConvertible {
    /// Seconds since 1970-01-01T00:00:00Z (negative before it).
    public let secondsSince1970: Int64
    /// The civil year (proleptic Gregorian).
    public let year: Int64
    /// 1...12.
    public let month: Int
    /// 1...31.
    public let day: Int
    /// 0...23.
    public let hour: Int
    /// 0...59.
    public let minute: Int
    /// 0...59 (no leap seconds, as in Unix time).
    public let second: Int

    /// The UTC instant `secondsSince1970` seconds after the Unix epoch.
    public init(secondsSince1970: Int64) {
        self.secondsSince1970 = secondsSince1970
        let secondsPerDay: Int64 = 86_400
        var days = secondsSince1970 / secondsPerDay
        var secondOfDay = secondsSince1970 % secondsPerDay
        if secondOfDay < 0 {
            days -= 1
            secondOfDay += secondsPerDay
        }
        hour = Int(secondOfDay / 3_600)
        minute = Int(secondOfDay % 3_600 / 60)
        second = Int(secondOfDay % 60)
        // civil_from_days, https://howardhinnant.github.io/date_algorithms.html#civil_from_days
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097  // [0, 146096]
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365  // [0, 399]
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)  // [0, 365], from March 1
        let monthFromMarch = (5 * dayOfYear + 2) / 153  // [0, 11]
        day = Int(dayOfYear - (153 * monthFromMarch + 2) / 5 + 1)
        month = Int(monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9)
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// The wall clock now (`clock_gettime(CLOCK_REALTIME)`), truncated to the second.
    public static func now() -> SigV4Date {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return SigV4Date(secondsSince1970: Int64(spec.tv_sec))
    }

    /// `YYYYMMDD'T'HHMMSS'Z'`, e.g. `20130524T000000Z`: the `x-amz-date` header and the string to sign.
    public var amzDate: String {
        dateStamp + "T" + Self.twoDigits(hour) + Self.twoDigits(minute) + Self.twoDigits(second) + "Z"
    }

    /// `YYYYMMDD`, e.g. `20130524`: the first part of the credential scope.
    public var dateStamp: String {
        Self.fourDigitYear(year) + Self.twoDigits(month) + Self.twoDigits(day)
    }

    public var description: String {
        amzDate
    }

    private static func twoDigits(_ value: Int) -> String {
        value < 10 ? "0" + String(value) : String(value)
    }

    private static func fourDigitYear(_ value: Int64) -> String {
        guard value >= 0 else {
            return String(value)
        }
        let digits = String(value)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

/// Signs HTTP requests with AWS Signature Version 4 (`AWS4-HMAC-SHA256`) in the `Authorization` header,
/// the way S3 and S3-compatible stores (MinIO, R2, Ceph…) expect; presigned URLs are not covered.
///
/// Make one per set of credentials, region and service and call
/// ``sign(method:path:query:headers:payloadHash:date:addContentSHA256Header:)`` per request. Each step
/// (canonical request, string to sign, signing key, signature) is exposed so that a `SignatureDoesNotMatch`
/// can be traced to the line that differs. Cost per request: two SHA-256 hashes of a few hundred bytes and
/// one HMAC-SHA256 plus the string building; the signing key (four more HMACs) is derived once per day and
/// kept, shared by the signer's copies. Hashing the body is the caller's (``sha256Hex(_:)``, or
/// `UNSIGNED-PAYLOAD`).
public struct SigV4Signer: Sendable {
    /// The key pair (and session token) that signs.
    public var credentials: AWSCredentials
    /// The signing region, e.g. `us-east-1` (`auto` for R2).
    public var region: String
    /// The signing service name: `s3` for S3.
    public var service: String

    /// The algorithm name, first word of the `Authorization` header and first line of the string to sign.
    public static let algorithm = "AWS4-HMAC-SHA256"
    /// The payload hash that says the body is not signed (S3 only).
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"
    /// The SHA-256 of no bytes, the payload hash of a request without a body.
    public static let emptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

    /// The last signing key derived, shared by this signer's copies.
    private let keyMemo = SigningKeyMemo()

    /// A signer for `service` in `region`.
    public init(credentials: AWSCredentials, region: String, service: String = "s3") {
        self.credentials = credentials
        self.region = region
        self.service = service
    }

    // MARK: Signing

    /// The headers to add to the request so that it is signed: `x-amz-date`, `x-amz-content-sha256` when
    /// `addContentSHA256Header` (S3 requires it), `x-amz-security-token` when the credentials have a session
    /// token, and `Authorization`, in that order.
    ///
    /// - Parameters:
    ///   - method: the HTTP method, e.g. `GET`.
    ///   - path: the absolute path, already percent-encoded (``encodePath(_:)``), used as is as the canonical URI
    ///     (S3 does not encode it a second time nor normalise it); empty means `/`.
    ///   - query: the query parameters, decoded; they are encoded and sorted here.
    ///   - headers: the request's headers to sign; must include `host`. Any `x-amz-date`, `authorization`,
    ///     `x-amz-security-token` (and `x-amz-content-sha256` when `addContentSHA256Header`) among them are
    ///     ignored, as the signer sets those itself.
    ///   - payloadHash: the lower-case hex SHA-256 of the body, or `UNSIGNED-PAYLOAD`.
    ///   - date: the signing time; S3 refuses requests more than 15 minutes off its clock.
    public func sign(
        method: String, path: String, query: [(String, String)], headers: [(String, String)], payloadHash: String,
        date: SigV4Date, addContentSHA256Header: Bool = true
    ) -> [(String, String)] {
        let signedHeaders = headersToSign(
            headers, payloadHash: payloadHash, date: date, addContentSHA256Header: addContentSHA256Header)
        let canonical = canonicalRequest(
            method: method, path: path, query: query, headers: signedHeaders, payloadHash: payloadHash)
        let toSign = stringToSign(canonicalRequest: canonical, date: date)
        let authorization = authorizationHeader(
            signedHeaderNames: Self.canonicalHeaders(signedHeaders).signedHeaders,
            signature: signature(stringToSign: toSign, date: date),
            date: date)
        var added: [(String, String)] = [("x-amz-date", date.amzDate)]
        if addContentSHA256Header {
            added.append(("x-amz-content-sha256", payloadHash))
        }
        if let token = credentials.sessionToken {
            added.append(("x-amz-security-token", token))
        }
        added.append(("Authorization", authorization))
        return added
    }

    /// The headers ``sign(method:path:query:headers:payloadHash:date:addContentSHA256Header:)`` signs: `headers`
    /// without those the signer sets, then `x-amz-date`, `x-amz-content-sha256` when asked and
    /// `x-amz-security-token` when the credentials have one.
    public func headersToSign(
        _ headers: [(String, String)], payloadHash: String, date: SigV4Date, addContentSHA256Header: Bool = true
    ) -> [(String, String)] {
        var own: Set<String> = ["x-amz-date", "authorization", "x-amz-security-token"]
        if addContentSHA256Header {
            own.insert("x-amz-content-sha256")
        }
        var result = headers.filter { !own.contains(Self.lowercased($0.0)) }
        result.append(("x-amz-date", date.amzDate))
        if addContentSHA256Header {
            result.append(("x-amz-content-sha256", payloadHash))
        }
        if let token = credentials.sessionToken {
            result.append(("x-amz-security-token", token))
        }
        return result
    }

    /// The `Authorization` header's value:
    /// `AWS4-HMAC-SHA256 Credential=<key id>/<scope>, SignedHeaders=<names>, Signature=<hex>`.
    public func authorizationHeader(signedHeaderNames: String, signature: String, date: SigV4Date) -> String {
        Self.algorithm + " Credential=" + credentials.accessKeyID + "/" + credentialScope(date: date)
            + ", SignedHeaders=" + signedHeaderNames + ", Signature=" + signature
    }

    // MARK: Steps

    /// Step 1, the canonical request: method, canonical URI, canonical query string, canonical headers, a blank
    /// line, the signed header names and the payload hash, joined by newlines. `headers` are all the headers
    /// signed, `x-amz-date` included (see ``headersToSign(_:payloadHash:date:addContentSHA256Header:)``).
    public func canonicalRequest(
        method: String, path: String, query: [(String, String)], headers: [(String, String)], payloadHash: String
    ) -> String {
        let canonical = Self.canonicalHeaders(headers)
        return method + "\n" + (path.isEmpty ? "/" : path) + "\n" + Self.canonicalQueryString(query) + "\n"
            + canonical.canonicalHeaders + "\n" + canonical.signedHeaders + "\n" + payloadHash
    }

    /// `<dateStamp>/<region>/<service>/aws4_request`.
    public func credentialScope(date: SigV4Date) -> String {
        date.dateStamp + "/" + region + "/" + service + "/aws4_request"
    }

    /// Step 2, the string to sign: the algorithm, the `amzDate`, the credential scope and the hex SHA-256 of the
    /// canonical request, joined by newlines.
    public func stringToSign(canonicalRequest: String, date: SigV4Date) -> String {
        Self.algorithm + "\n" + date.amzDate + "\n" + credentialScope(date: date) + "\n"
            + Self.sha256Hex(canonicalRequest.utf8)
    }

    /// Step 3, the signing key of this signer's secret, region and service on `date`'s day (32 bytes): derived
    /// once per day (and again when the secret, the region or the service changes), then kept.
    public func signingKey(date: SigV4Date) -> [UInt8] {
        let inputs = SigningKeyMemo.Inputs(
            secretAccessKey: credentials.secretAccessKey, dateStamp: date.dateStamp, region: region, service: service)
        if let key = keyMemo.key(for: inputs) { return key }
        let key = Self.signingKey(
            secretAccessKey: inputs.secretAccessKey, dateStamp: inputs.dateStamp, region: inputs.region, service: inputs.service)
        keyMemo.keep(key, for: inputs)
        return key
    }

    /// The signing key: HMAC-SHA256 of `dateStamp` under `"AWS4" + secret`, then of `region`, `service` and
    /// `aws4_request`, each under the previous result.
    public static func signingKey(secretAccessKey: String, dateStamp: String, region: String, service: String) -> [UInt8] {
        var key = Array(("AWS4" + secretAccessKey).utf8)
        for part in [dateStamp, region, service, "aws4_request"] {
            key = hmacSHA256(key: key, message: Array(part.utf8))
        }
        return key
    }

    /// Step 4, the signature: the lower-case hex HMAC-SHA256 of `stringToSign` under the signing key.
    public func signature(stringToSign: String, date: SigV4Date) -> String {
        Self.hex(Self.hmacSHA256(key: signingKey(date: date), message: Array(stringToSign.utf8)))
    }

    // MARK: Canonical forms

    /// The canonical headers (`name:value\n` for each name, lower-cased and sorted; values trimmed, inner runs of
    /// spaces collapsed to one, several values of one name joined by `,` in their order) and the signed header
    /// names (`host;range;x-amz-date`).
    public static func canonicalHeaders(_ headers: [(String, String)]) -> (canonicalHeaders: String, signedHeaders: String) {
        var names: [String] = []
        var values: [String: [String]] = [:]
        for (name, value) in headers {
            let lower = lowercased(name)
            if values[lower] == nil {
                names.append(lower)
            }
            values[lower, default: []].append(trimAll(value))
        }
        names.sort { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        var canonical = ""
        for name in names {
            canonical += name + ":" + (values[name] ?? []).joined(separator: ",") + "\n"
        }
        return (canonical, names.joined(separator: ";"))
    }

    /// The canonical query string: each name and value ``uriEncode(_:encodeSlash:)``d, sorted by encoded name
    /// then encoded value, written `name=value` (`name=` for an empty value) and joined by `&`.
    public static func canonicalQueryString(_ query: [(String, String)]) -> String {
        let encoded = query.map { (uriEncode($0.0), uriEncode($0.1)) }
        let sorted = encoded.sorted { left, right in
            if left.0 != right.0 {
                return left.0.utf8.lexicographicallyPrecedes(right.0.utf8)
            }
            return left.1.utf8.lexicographicallyPrecedes(right.1.utf8)
        }
        return sorted.map { $0.0 + "=" + $0.1 }.joined(separator: "&")
    }

    /// SigV4's URI encoding of the UTF-8 bytes of `string`: `A-Z a-z 0-9 - . _ ~` kept, `/` kept unless
    /// `encodeSlash`, every other byte written `%XX` in upper-case hex (a space is `%20`, never `+`).
    public static func uriEncode(_ string: String, encodeSlash: Bool = true) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(string.utf8.count)
        for byte in string.utf8 {
            if isUnreserved(byte) || (byte == UInt8(ascii: "/") && !encodeSlash) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(upperHexDigits[Int(byte >> 4)])
                out.append(upperHexDigits[Int(byte & 0x0F)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// An S3 object path from its decoded form: each segment encoded, the `/` between them kept, a leading `/`
    /// added when missing (`bucket/test$file.text` → `/bucket/test%24file.text`).
    public static func encodePath(_ decodedPath: String) -> String {
        let encoded = uriEncode(decodedPath, encodeSlash: false)
        return encoded.hasPrefix("/") ? encoded : "/" + encoded
    }

    // MARK: Hashing

    /// The lower-case hex SHA-256 of `bytes`: the payload hash of a body (``emptyPayloadHash`` for none).
    public static func sha256Hex(_ bytes: some Collection<UInt8>) -> String {
        var hasher = SHA256()
        let done: Void? = bytes.withContiguousStorageIfAvailable { buffer in
            hasher.update(bufferPointer: UnsafeRawBufferPointer(buffer))
        }
        if done == nil {
            let copy = Array(bytes)
            copy.withUnsafeBytes { hasher.update(bufferPointer: $0) }
        }
        return hex(hasher.finalize())
    }

    static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var mac = HMAC<SHA256>(key: SymmetricKey(data: key))
        mac.update(data: message)
        return Array(mac.finalize())
    }

    // MARK: Text helpers

    private static let lowerHexDigits: [UInt8] = Array("0123456789abcdef".utf8)
    private static let upperHexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)

    static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        for byte in bytes {
            out.append(lowerHexDigits[Int(byte >> 4)])
            out.append(lowerHexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
            UInt8(ascii: "~"):
            return true
        default:
            return false
        }
    }

    /// ASCII lower-casing (header names are ASCII tokens; other bytes are left alone).
    static func lowercased(_ string: String) -> String {
        let bytes = string.utf8.map { byte in
            byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte + 32 : byte
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Leading and trailing spaces and tabs removed, each inner run of them written as one space.
    static func trimAll(_ string: String) -> String {
        var out: [UInt8] = []
        var pendingSpace = false
        for byte in string.utf8 {
            if byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") {
                pendingSpace = !out.isEmpty
            } else {
                if pendingSpace {
                    out.append(UInt8(ascii: " "))
                    pendingSpace = false
                }
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The last signing key a ``SigV4Signer`` derived and what it was derived from. A signer signs every
/// request of a day with one key; deriving it takes four of the five HMACs of a signature.
final class SigningKeyMemo: Sendable {
    struct Inputs: Equatable {
        var secretAccessKey: String
        var dateStamp: String
        var region: String
        var service: String
    }

    private let last = Lock<(inputs: Inputs, key: [UInt8])?>(nil)

    /// The key kept for exactly these inputs, if any.
    func key(for inputs: Inputs) -> [UInt8]? {
        last.withLock { last in last.flatMap { $0.inputs == inputs ? $0.key : nil } }
    }

    /// Keeps `key`, derived from `inputs`, in place of the last one.
    func keep(_ key: [UInt8], for inputs: Inputs) {
        last.withLock { $0 = (inputs, key) }
    }
}
