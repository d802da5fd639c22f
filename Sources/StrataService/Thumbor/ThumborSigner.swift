import Crypto
import Foundation

/// thumbor's URL signature: the HMAC-SHA1 of the path after `/SIGNATURE/` (as sent, still
/// percent-encoded) with `thumbor.securityKey`, in URL-safe base64 with its padding (libthumbor's
/// `Base64HmacSha1UrlSigner`). The check is constant-time. Cost: one HMAC over the path.
package struct ThumborSigner: Sendable {
    private let secret: Data

    package init(key: String) {
        secret = Data(key.utf8)
    }

    /// The signature of `url` (the path after the signature, without its leading `/`).
    package func signature(_ url: Substring) -> String {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: Data(url.utf8), using: SymmetricKey(data: secret))
        return Data(mac).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    /// Whether `signature` (percent-decoded, as thumbor unquotes it) signs `url`.
    package func isValid(_ signature: Substring, for url: Substring) -> Bool {
        let given = Array((PercentDecoding.decode(signature) ?? String(signature)).utf8)
        let expected = Array(self.signature(url).utf8)
        guard given.count == expected.count else { return false }
        var difference: UInt8 = 0
        for (a, b) in zip(given, expected) { difference |= a ^ b }
        return difference == 0
    }
}
