import Crypto
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Signs and checks image URLs (imgproxy's model): the last query parameter, `sig`, is the
/// HMAC-SHA256 of everything before it — the path and the other parameters exactly as sent —
/// in unpadded base64url. With signing keys set, a URL whose signature is missing or wrong is
/// refused (403) before any work, so only sizes the signer chose can be asked for.
///
/// Keys rotate: `http.signingKeys` lists keys by id, and a URL names its key with `kid=` (a URL
/// without `kid` is checked with `http.signingKey`), so a new key is added, URLs move over, and
/// the old key is removed. An optional `exp=` (Unix seconds) makes a URL expire. Both are
/// inside the signed part: changing either breaks the signature.
///
/// Cost: one HMAC-SHA256 over the target (about a microsecond); the check is constant-time.
public struct URLSigner: Sendable {
    /// The query parameter that carries the signature (always the last one).
    public static let parameter = "sig"
    /// The query parameter naming the key a URL is signed with (signed itself).
    public static let keyIDParameter = "kid"
    /// The query parameter holding a URL's expiry, in Unix seconds (signed itself).
    public static let expiryParameter = "exp"

    /// Why a target is refused.
    public enum Refusal: Error, Sendable, Equatable {
        case missing
        case invalid
        /// The URL names a key id this signer does not have (or none, and there is no key
        /// without an id).
        case unknownKey(String?)
        /// The URL's `exp` has passed.
        case expired
    }

    /// The keys by id; `""` is the key of URLs without `kid`.
    private let secrets: [String: Data]

    /// A signer with one key, for URLs without `kid`.
    public init(key: String) {
        secrets = ["": Data(key.utf8)]
    }

    /// A signer with `keys` by id, and `defaultKey` for URLs without `kid`; `nil` when there
    /// is no key at all (unsigned URLs are served).
    public init?(keys: [String: String], defaultKey: String?) {
        var secrets = keys.mapValues { Data($0.utf8) }
        if let defaultKey { secrets[""] = Data(defaultKey.utf8) }
        guard !secrets.isEmpty else { return nil }
        self.secrets = secrets
    }

    /// The key to sign with when none is named: the key without id, else the first id in
    /// sorted order (`nil`).
    public var preferredKeyID: String? {
        secrets[""] != nil ? nil : secrets.keys.sorted().first
    }

    /// The signature of `target` (a path with its query, without `sig`) with key `keyID`
    /// (`nil`: the key of URLs without `kid`).
    public func signature(for target: Substring, keyID: String? = nil) -> String? {
        guard let secret = secrets[keyID ?? ""] else { return nil }
        let code = HMAC<SHA256>.authenticationCode(for: Data(target.utf8), using: SymmetricKey(data: secret))
        return Self.base64URL(Data(code))
    }

    /// `url` signed with the ``preferredKeyID`` key, never expiring (a signer always has a key).
    public func sign(_ url: String) -> String {
        sign(url, keyID: preferredKeyID, expires: nil)!
    }

    /// `target` (a path and query, or a whole URL) with `kid` (when `keyID` is given), `exp`
    /// (when `expires` is given, in Unix seconds) and `sig` appended; an existing `sig` is
    /// replaced, and existing `kid` and `exp` parameters are removed (``verify(_:now:)`` reads the
    /// first of each, so a URL signed again must carry only the ones of this signature). Only
    /// the path and query are signed, so the same signature works behind any host name. `nil`
    /// when this signer has no key `keyID`.
    public func sign(_ url: String, keyID: String? = nil, expires: Int? = nil) -> String? {
        var text = Substring(url)
        if let range = Self.signatureRange(in: text) { text = text[..<range.lowerBound] }
        var (origin, target) = Self.split(text)
        target = Self.removingSignerParameters(target)
        for (name, value) in [(Self.keyIDParameter, keyID), (Self.expiryParameter, expires.map(String.init))] {
            guard let value else { continue }
            target += "\(target.utf8.contains(UInt8(ascii: "?")) ? "&" : "?")\(name)=\(value)"
        }
        guard let signature = signature(for: target, keyID: keyID) else { return nil }
        let separator = target.utf8.contains(UInt8(ascii: "?")) ? "&" : "?"
        origin += target
        return "\(origin)\(separator)\(Self.parameter)=\(signature)"
    }

    /// Checks a request target (`/images/…?…[&kid=…][&exp=…]&sig=…`) at `now` (Unix seconds);
    /// returns the target without the signature and its expiry (`nil`: it never expires).
    public func verify(_ target: Substring, now: Int = Int(time(nil))) throws(Refusal) -> (target: Substring, expires: Int?) {
        guard let range = Self.signatureRange(in: target) else { throw .missing }
        let signed = target[..<range.lowerBound]
        let given = Substring(target[range].utf8.dropFirst(Self.parameter.utf8.count + 2))  // "&sig=" / "?sig="
        let keyID = Self.value(of: Self.keyIDParameter, in: signed)
        guard let secret = secrets[keyID.map(String.init) ?? ""] else { throw .unknownKey(keyID.map(String.init)) }
        guard let code = Self.decodeBase64URL(given),
            HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: Data(signed.utf8), using: SymmetricKey(data: secret))
        else { throw .invalid }
        // Signed: `exp` is what the signer wrote. A malformed one never came from a signer.
        guard let text = Self.value(of: Self.expiryParameter, in: signed) else { return (signed, nil) }
        guard let expires = Int(text) else { throw .invalid }
        guard now <= expires else { throw .expired }
        return (signed, expires)
    }

    /// The value of the query parameter `name` in `target` (the first, undecoded), or `nil`.
    /// Bytes, not Characters: a `&` after a prepended character (U+0600) is still a separator.
    package static func value(of name: String, in target: Substring) -> Substring? {
        let bytes = target.utf8
        guard let question = bytes.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        for pair in bytes[bytes.index(after: question)...].split(separator: UInt8(ascii: "&")) where isParameter(name, pair) {
            return Substring(pair.dropFirst(name.utf8.count + 1))
        }
        return nil
    }

    /// Whether the query pair `pair` is `name=…`.
    package static func isParameter(_ name: String, _ pair: Substring.UTF8View) -> Bool {
        pair.starts(with: name.utf8) && pair.dropFirst(name.utf8.count).first == UInt8(ascii: "=")
    }

    /// `target` without its `kid=` and `exp=` parameters (as ``value(of:in:)`` finds them),
    /// the rest of its query as it was; without `?` when nothing is left of the query.
    package static func removingSignerParameters(_ target: Substring) -> Substring {
        let bytes = target.utf8
        guard let question = bytes.firstIndex(of: UInt8(ascii: "?")) else { return target }
        let pairs = bytes[bytes.index(after: question)...].split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false)
        let kept = pairs.filter { pair in !isParameter(keyIDParameter, pair) && !isParameter(expiryParameter, pair) }
        guard kept.count < pairs.count else { return target }
        let path = target[..<question]
        return kept.isEmpty ? path : Substring(String(path) + "?" + kept.map { String(Substring($0)) }.joined(separator: "&"))
    }

    /// The range of `?sig=…` / `&sig=…` when it is the last parameter of the target (bytes, as
    /// ``value(of:in:)``).
    package static func signatureRange(in target: Substring) -> Range<Substring.Index>? {
        let bytes = target.utf8
        guard let question = bytes.firstIndex(of: UInt8(ascii: "?")) else { return nil }
        let separator = bytes[question...].lastIndex(of: UInt8(ascii: "&")) ?? question
        guard isParameter(parameter, bytes[bytes.index(after: separator)...]) else { return nil }
        return separator..<target.endIndex
    }

    /// `http://host:port` and `/path?query` of a URL (or `""` and the target itself).
    package static func split(_ url: Substring) -> (origin: Substring, target: Substring) {
        guard let scheme = url.range(of: "://") else { return ("", url) }
        let afterHost = url[scheme.upperBound...].firstIndex(of: "/") ?? url.endIndex
        return (url[..<afterHost], url[afterHost...])
    }

    package static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    package static func decodeBase64URL(_ text: Substring) -> Data? {
        guard text.count == 43 else { return nil }
        return decodeBase64URL(anyLength: text)
    }

    /// Unpadded base64url of any length (ASCII letters, digits, `-`, `_`).
    package static func decodeBase64URL(anyLength text: Substring) -> Data? {
        guard
            text.utf8.allSatisfy({
                switch $0 {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "_"):
                    true
                default: false
                }
            })
        else { return nil }
        let standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return Data(base64Encoded: standard + String(repeating: "=", count: (4 - standard.utf8.count % 4) % 4))
    }
}
