import Crypto
import Foundation

/// Signs and checks image URLs (imgproxy's model): the last query parameter, `sig`, is the
/// HMAC-SHA256 of everything before it — the path and the other parameters exactly as sent —
/// in unpadded base64url. With a signing key set, a URL whose signature is missing or wrong
/// is refused (403) before any work, so only sizes the signer chose can be asked for.
///
/// Cost: one HMAC-SHA256 over the target (about a microsecond); the check is constant-time.
public struct URLSigner: Sendable {
    /// The query parameter that carries the signature (always the last one).
    public static let parameter = "sig"

    /// Why a target is refused.
    public enum Refusal: Error, Sendable, Equatable {
        case missing
        case invalid
    }

    private let secret: Data
    private var key: SymmetricKey { SymmetricKey(data: secret) }

    public init(key: String) {
        secret = Data(key.utf8)
    }

    /// The signature of `target` (a path with its query, without `sig`).
    public func signature(for target: Substring) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Data(target.utf8), using: key)
        return Self.base64URL(Data(code))
    }

    /// `target` (a path and query, or a whole URL) with `sig` appended; an existing `sig` is
    /// replaced. Only the path and query are signed, so the same signature works behind any
    /// host name.
    public func sign(_ url: String) -> String {
        var text = Substring(url)
        if let range = Self.signatureRange(in: text) { text = text[..<range.lowerBound] }
        let (origin, target) = Self.split(text)
        let separator = target.contains("?") ? "&" : "?"
        return "\(origin)\(target)\(separator)\(Self.parameter)=\(signature(for: target))"
    }

    /// Checks a request target (`/images/…?…&sig=…`); returns the target without the
    /// signature.
    public func verify(_ target: Substring) throws(Refusal) -> Substring {
        guard let range = Self.signatureRange(in: target) else { throw .missing }
        let signed = target[..<range.lowerBound]
        let given = target[range].dropFirst(Self.parameter.count + 2)  // "&sig=" / "?sig="
        guard let code = Self.decodeBase64URL(given),
            HMAC<SHA256>.isValidAuthenticationCode(code, authenticating: Data(signed.utf8), using: key)
        else { throw .invalid }
        return signed
    }

    /// The range of `?sig=…` / `&sig=…` when it ends the target.
    static func signatureRange(in target: Substring) -> Range<Substring.Index>? {
        guard let question = target.firstIndex(of: "?") else { return nil }
        var search = target[question...]
        var found: Range<Substring.Index>?
        while let match = search.range(of: "\(parameter)=") {
            let before = target.index(before: match.lowerBound)
            if target[before] == "?" || target[before] == "&" { found = before..<target.endIndex }
            search = target[match.upperBound...]
        }
        guard let found, !target[found].dropFirst().contains("&") else { return nil }
        return found
    }

    /// `http://host:port` and `/path?query` of a URL (or `""` and the target itself).
    static func split(_ url: Substring) -> (origin: Substring, target: Substring) {
        guard let scheme = url.range(of: "://") else { return ("", url) }
        let afterHost = url[scheme.upperBound...].firstIndex(of: "/") ?? url.endIndex
        return (url[..<afterHost], url[afterHost...])
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func decodeBase64URL(_ text: Substring) -> Data? {
        guard text.count == 43, text.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else { return nil }
        let standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") + "="
        return Data(base64Encoded: standard)
    }
}
