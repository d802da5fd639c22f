import Crypto
import Foundation

/// A signed, expiring credential of one access service: the cookie the access service sets,
/// the access token the token service gives a viewer, or the ticket a login page sends back.
///
/// Written `PAYLOAD.MAC`, both unpadded base64url: the payload is
/// `v1␤KIND␤SERVICE␤EXPIRY␤SUBJECT` (expiry in Unix seconds), the MAC its HMAC-SHA256 with
/// `iiif.auth.key` after the context `strata-iiif-auth␤`. A credential of one kind is never
/// accepted as another, nor for another service; the check is constant-time. Stateless: it
/// cannot be revoked before it expires (`iiif.auth.lifetime`). Cost: one HMAC over ~60 bytes.
package struct AccessCredential: Sendable, Equatable {
    package enum Kind: String, Sendable {
        case cookie, token, ticket
    }

    package var kind: Kind
    package var service: String
    /// Unix seconds after which it is refused.
    package var expiry: Int
    /// Who logged in, as the login page named them (empty for a click-through or kiosk).
    package var subject: String

    package init(kind: Kind, service: String, expiry: Int, subject: String = "") {
        self.kind = kind
        self.service = service
        self.expiry = expiry
        self.subject = subject
    }

    /// Why a credential was refused: the IIIF `AuthAccessTokenError2` profile it maps to.
    package enum Refusal: Error, Equatable {
        /// Not a credential of this server (malformed, or the MAC does not match).
        case invalid
        /// Valid but past its expiry.
        case expired
        /// A credential of another kind or service.
        case misplaced
    }

    /// The signing key.
    package struct Signer: Sendable {
        private let secret: Data

        package init(key: String) {
            secret = Data(key.utf8)
        }

        private var key: SymmetricKey { SymmetricKey(data: secret) }

        private static let context = Array("strata-iiif-auth\n".utf8)

        private func mac(_ payload: [UInt8]) -> Data {
            var hmac = HMAC<SHA256>(key: key)
            hmac.update(data: Self.context)
            hmac.update(data: payload)
            return Data(hmac.finalize())
        }

        /// The credential's text.
        package func sign(_ credential: AccessCredential) -> String {
            let payload = Array(
                "v1\n\(credential.kind.rawValue)\n\(credential.service)\n\(credential.expiry)\n\(credential.subject)".utf8)
            return URLSigner.base64URL(Data(payload)) + "." + URLSigner.base64URL(mac(payload))
        }

        /// The credential `text` holds, if this key signed it, it is of `kind` for `service`, and
        /// it has not expired at `now`.
        package func verify(
            _ text: Substring, kind: Kind, service: String, now: Int
        ) -> Result<AccessCredential, Refusal> {
            guard text.utf8.count <= 4096, let dot = text.firstIndex(of: "."),
                let payload = URLSigner.decodeBase64URL(anyLength: text[..<dot]),
                let given = URLSigner.decodeBase64URL(anyLength: text[text.index(after: dot)...]),
                HMAC<SHA256>.isValidAuthenticationCode(given, authenticating: Self.context + Array(payload), using: key)
            else { return .failure(.invalid) }
            let parts = String(decoding: payload, as: UTF8.self).split(separator: "\n", maxSplits: 4, omittingEmptySubsequences: false)
            guard parts.count == 5, parts[0] == "v1", let found = Kind(rawValue: String(parts[1])), let expiry = Int(parts[3]) else {
                return .failure(.invalid)
            }
            guard found == kind, parts[2] == service else { return .failure(.misplaced) }
            guard now < expiry else { return .failure(.expired) }
            return .success(AccessCredential(kind: found, service: service, expiry: expiry, subject: String(parts[4])))
        }
    }
}
