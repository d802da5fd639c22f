import Foundation
import HTTPTypes
import StrataConfiguration

/// The one decision of IIIF Authorization Flow 2.0 for every route that serves an image's
/// pixels (IIIF image requests, `/images`, thumbor): whether a request may have the image of a
/// key.
///
/// A key matching one of `iiif.auth.rules` is restricted by its access service; the request
/// opens it with that service's cookie (`strata-auth-NAME`, set by the access service) or
/// access token (`Authorization: Bearer …`, from the token service). Without either, a
/// service with `degraded=N` still serves images at most N pixels on their long side. Answers
/// of restricted keys are `Cache-Control: private, no-cache` (a shared cache never keeps them;
/// a browser revalidates each, so the credential is checked each time), and the warm path never
/// answers them (``protects(_:)``). Cost: nothing without rules; else one `fnmatch` per rule and,
/// for a restricted key, one HMAC.
package struct AccessGate: Sendable {
    package let settings: IIIFAuthSettings
    package let signer: AccessCredential.Signer?

    package init(_ settings: IIIFAuthSettings) {
        self.settings = settings
        signer = settings.key.map(AccessCredential.Signer.init(key:))
    }

    /// No key restricted.
    package static let open = AccessGate(IIIFAuthSettings())

    /// Whether any key is restricted.
    package var isEnabled: Bool { settings.isEnabled }

    /// The access service restricting `key` (the first rule it matches), or `nil`.
    package func service(for key: String) -> IIIFAuthSettings.Service? {
        guard settings.isEnabled else { return nil }
        for rule in settings.rules where fnmatch(rule.pattern, key, 0) == 0 {
            return settings.services[rule.service]
        }
        return nil
    }

    /// Whether `key` is restricted: the warm path passes its requests on.
    package func protects(_ key: String) -> Bool { service(for: key) != nil }

    /// What a request for `key` with `headers` may have.
    package enum Decision: Sendable, Equatable {
        /// Not restricted.
        case open
        /// Restricted, and the request carries the service's valid credential.
        case granted(IIIFAuthSettings.Service)
        /// Restricted, without a valid credential: images at most `side` pixels on their long
        /// side (`nil`: none).
        case refused(IIIFAuthSettings.Service, degraded: Int?)

        /// Whether the key is restricted (its answers are private).
        package var isRestricted: Bool {
            if case .open = self { return false }
            return true
        }
    }

    package func decide(key: String, headers: HTTPFields, now: Int = Int(time(nil))) -> Decision {
        guard let service = service(for: key) else { return .open }
        return hasCredential(for: service, headers: headers, now: now) ? .granted(service) : .refused(service, degraded: service.degraded)
    }

    /// Whether `headers` carry a valid cookie or access token of `service`.
    package func hasCredential(for service: IIIFAuthSettings.Service, headers: HTTPFields, now: Int) -> Bool {
        guard let signer else { return false }
        if let token = Self.bearer(headers), case .success = signer.verify(token, kind: .token, service: service.name, now: now) {
            return true
        }
        if case .success? = cookie(of: service, in: headers, now: now) { return true }
        return false
    }

    /// The first valid cookie of `service` in `headers`, else why the last one was refused;
    /// `nil` when there is none (or no key to check one with).
    package func cookie(
        of service: IIIFAuthSettings.Service, in headers: HTTPFields, now: Int
    ) -> Result<AccessCredential, AccessCredential.Refusal>? {
        guard let signer else { return nil }
        var refused: Result<AccessCredential, AccessCredential.Refusal>?
        for value in Self.cookies(named: Self.cookieName(service.name), in: headers) {
            let result = signer.verify(value, kind: .cookie, service: service.name, now: now)
            if case .success = result { return result }
            refused = result
        }
        return refused
    }

    /// The access cookie's name for `service`.
    package static func cookieName(_ service: String) -> String { "strata-auth-" + service }

    /// The token of `Authorization: Bearer TOKEN`, if any.
    package static func bearer(_ headers: HTTPFields) -> Substring? {
        for value in headers[values: .authorization] {
            let text = Substring(value).drop { $0 == " " }
            guard text.count > 7, text.prefix(7).lowercased() == "bearer " else { continue }
            return text.dropFirst(7).drop { $0 == " " }
        }
        return nil
    }

    /// The values of the cookies called `name` in every `Cookie` field.
    package static func cookies(named name: String, in headers: HTTPFields) -> [Substring] {
        var found: [Substring] = []
        for field in headers[values: .cookie] {
            for pair in field.split(separator: ";") {
                let trimmed = pair.drop { $0 == " " }
                guard let equals = trimmed.firstIndex(of: "="), trimmed[..<equals] == name else { continue }
                found.append(trimmed[trimmed.index(after: equals)...])
            }
        }
        return found
    }

    /// `Cache-Control` of a restricted image's answer.
    package static let privateCacheControl = "private, no-cache"

    /// The 401 of a restricted image without a credential (or over the degraded size): names the
    /// service and the probe a client asks.
    package static func refusal(_ service: IIIFAuthSettings.Service, key: String, over side: Int? = nil) -> ServiceError {
        let limit = side.map { " (without it, at most \($0) pixels on the long side)" } ?? ""
        return ServiceError(
            .unauthorized, "unauthorized",
            "\(key.debugDescription) is restricted: it needs the cookie or token of the access service \(service.name.debugDescription)\(limit); its probe is /iiif/auth/probe/{identifier}"
        )
    }

    /// The fields of a restricted key's answer of `status` made private; an open key's, and
    /// an error's, are unchanged.
    package static func seal(_ headers: inout HTTPFields, status: HTTPResponse.Status, _ decision: Decision) {
        guard decision.isRestricted, status.code < 400 else { return }
        headers[.cacheControl] = privateCacheControl
    }
}
