import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import StrataConfiguration

/// IIIF Authorization Flow 2.0's services, under `/iiif/auth/`: the probe of an identifier, and
/// each access service's access page, token service and logout (``AccessGate`` makes the
/// decision they lead to).
///
/// - `GET /iiif/auth/probe/{identifier}`: `AuthProbeResult2` (always HTTP 200; its `status`
///   is 200 or 401), from the `Authorization: Bearer` token or the cookie; CORS, and `OPTIONS`
///   answers the preflight a token's header causes.
/// - `GET /iiif/auth/access/{service}?origin=…`: the page a viewer opens. `active` sends the
///   user to its login page (`return=` this URL), which sends them back with `&ticket=T`; without
///   a login page it shows a click-through whose button `POST`s; `kiosk` grants at once. A grant
///   sets the service's cookie and closes the window.
/// - `GET /iiif/auth/token/{service}?messageId=…&origin=…`: the page a viewer loads in an
///   iframe; it posts `AuthAccessToken2` (or `AuthAccessTokenError2`) to the origin, if allowed.
/// - `GET /iiif/auth/logout/{service}`: clears the cookie.
///
/// Cost: a few string concatenations and at most two HMACs per request.
package struct IIIFAuthEndpoint: Sendable {
    package let gate: AccessGate
    /// The server's own `host:port`, for URLs when a request names no authority.
    package let fallbackAuthority: String

    package init(gate: AccessGate, fallbackAuthority: String) {
        self.gate = gate
        self.fallbackAuthority = fallbackAuthority
    }

    package static let prefix = "/iiif/auth/"
    package static let context = "http://iiif.io/api/auth/2/context.json"

    /// The base of the services' URLs for `authority` (the request's `Host`).
    package static func base(_ authority: String) -> String { "http://\(authority)/iiif/auth" }

    package func respond(to request: Request, now: Int = Int(time(nil))) -> Response {
        let target = Substring(request.uri.string)
        let path = target[..<(target.firstIndex(of: "?") ?? target.endIndex)].dropFirst(Self.prefix.count)
        let parts = path.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
        let authority = request.head.authority ?? fallbackAuthority
        guard parts.count == 2 else { return Self.notFound() }
        if parts[0] == "probe" {
            return probe(identifier: parts[1], request: request, authority: authority, now: now)
        }
        guard let service = gate.settings.services[String(parts[1])] else { return Self.notFound() }
        switch parts[0] {
        case "access": return access(service, request: request, authority: authority, now: now)
        case "token": return token(service, request: request, authority: authority, now: now)
        case "logout": return logout(service)
        default: return Self.notFound()
        }
    }

    private static func notFound() -> Response {
        ServiceError(
            .notFound, "not_found",
            "IIIF Authorization 2.0 services: /iiif/auth/probe/{identifier}, /iiif/auth/access/{service}, /iiif/auth/token/{service}, /iiif/auth/logout/{service}"
        ).response(headers: IIIFEndpoint.cors)
    }

    // MARK: - Probe

    /// The preflight of a probe or image request carrying `Authorization`.
    package static func preflight() -> Response {
        Response(
            status: .noContent,
            headers: [
                .accessControlAllowOrigin: "*", .accessControlAllowMethods: "GET, HEAD", .accessControlAllowHeaders: "Authorization",
                .accessControlMaxAge: "86400",
            ])
    }

    private func probe(identifier raw: Substring, request: Request, authority: String, now: Int) -> Response {
        let identifier: IIIFIdentifier
        do {
            identifier = try IIIFIdentifier(raw: raw)
        } catch {
            return error.response(headers: IIIFEndpoint.cors)
        }
        var result: [String: Any] = [
            "@context": Self.context, "id": "\(Self.base(authority))/probe/\(identifier.raw)", "type": "AuthProbeResult2",
        ]
        switch gate.decide(key: identifier.key, headers: request.headers, now: now) {
        case .open, .granted:
            result["status"] = 200
        case .refused(let service, let degraded):
            result["status"] = 401
            result["heading"] = Self.language(service.label)
            result["note"] = Self.language(
                degraded.map { "This image is restricted: without access it is shown at most \($0) pixels wide." }
                    ?? "This image is restricted.")
            if let degraded {
                result["substitute"] = [
                    "id": "http://\(authority)/iiif/3/\(identifier.raw)/full/!\(degraded),\(degraded)/0/default.jpg", "type": "Image",
                    "format": "image/jpeg",
                ]
            }
        }
        var headers = IIIFEndpoint.cors
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: Self.json(result))))
    }

    // MARK: - Access service

    private func access(
        _ service: IIIFAuthSettings.Service, request: Request, authority: String, now: Int
    ) -> Response {
        let query = request.uri.queryParameters
        guard let signer = gate.signer else { return Self.notFound() }
        let here = "\(Self.base(authority))/access/\(service.name)"
        let originQuery = query["origin"].map { "?origin=" + Self.percentEncoded(String($0)) } ?? ""
        switch service.profile {
        case .external:
            return IIIFAuthPages.page(
                status: .notFound, title: service.label,
                text: "This service's access is given by the site's own login; there is nothing to open here.")
        case .kiosk:
            return grant(service, subject: "", signer: signer, now: now)
        case .active:
            if let ticket = query["ticket"] {
                switch signer.verify(ticket[...], kind: .ticket, service: service.name, now: now) {
                case .success(let credential):
                    return grant(service, subject: credential.subject, signer: signer, now: now)
                case .failure(let refusal):
                    return IIIFAuthPages.page(
                        status: .forbidden, title: service.label,
                        text: refusal == .expired
                            ? "The login's ticket has expired: log in again."
                            : "The login's ticket was refused: it is not a ticket of this service signed with iiif.auth.key.")
                }
            }
            if let login = service.login {
                let separator = login.contains("?") ? "&" : "?"
                let back = Self.percentEncoded(here + originQuery)
                return Response(status: .found, headers: [.location: login + separator + "return=" + back, .cacheControl: "no-store"])
            }
            // A click-through: the terms, and a button that POSTs (a link could be followed by
            // another site's page).
            if request.method == .post {
                return grant(service, subject: "", signer: signer, now: now)
            }
            return IIIFAuthPages.clickThrough(service, action: here + originQuery)
        }
    }

    /// Sets the service's cookie and closes the window the viewer opened.
    private func grant(_ service: IIIFAuthSettings.Service, subject: String, signer: AccessCredential.Signer, now: Int) -> Response {
        let lifetime = Int(gate.settings.lifetime.components.seconds)
        let cookie = signer.sign(AccessCredential(kind: .cookie, service: service.name, expiry: now + lifetime, subject: subject))
        var response = IIIFAuthPages.closing(service)
        response.headers[.setCookie] = cookieField(service, value: cookie, maxAge: lifetime)
        return response
    }

    private func cookieField(_ service: IIIFAuthSettings.Service, value: String, maxAge: Int) -> String {
        let site = gate.settings.crossSite ? "SameSite=None; Secure" : "SameSite=Lax"
        return "\(AccessGate.cookieName(service.name))=\(value); Path=/; Max-Age=\(maxAge); HttpOnly; \(site)"
    }

    // MARK: - Token service

    private func token(
        _ service: IIIFAuthSettings.Service, request: Request, authority: String, now: Int
    ) -> Response {
        let query = request.uri.queryParameters
        guard let origin = query["origin"].map(String.init), IIIFAuthSettings.isOrigin(origin) else {
            return ServiceError(
                .badRequest, "bad_parameter", "the token service needs ?messageId=…&origin=… (the viewer's origin, scheme://host[:port])"
            ).response()
        }
        var message: [(String, String)] = [("@context", Self.context)]
        let messageId = query["messageId"].map(String.init)
        if let messageId { message.append(("messageId", messageId)) }
        func error(_ profile: String, _ note: String) -> Response {
            IIIFAuthPages.postMessage(message + [("type", "AuthAccessTokenError2"), ("profile", profile), ("note", note)], to: origin)
        }
        guard messageId != nil else { return error("invalidRequest", "the token service needs ?messageId=") }
        guard allows(origin: origin, authority: authority) else {
            return error("invalidOrigin", "\(origin) may not receive tokens of this server (iiif.auth.origins)")
        }
        guard let signer = gate.signer else { return error("unavailable", "no key signs tokens (iiif.auth.key)") }
        switch gate.cookie(of: service, in: request.headers, now: now) {
        case .success(let cookie)?:
            let expiry = min(cookie.expiry, now + Int(gate.settings.lifetime.components.seconds))
            let token = signer.sign(AccessCredential(kind: .token, service: service.name, expiry: expiry, subject: cookie.subject))
            return IIIFAuthPages.postMessage(
                message + [("type", "AuthAccessToken2"), ("accessToken", token)], number: ("expiresIn", expiry - now), to: origin)
        case nil: return error("missingAspect", "no access cookie: open the access service first")
        case .failure(.expired)?: return error("expiredAspect", "the access cookie has expired: open the access service again")
        case .failure(.invalid)?, .failure(.misplaced)?: return error("invalidAspect", "the access cookie is not valid for this service")
        }
    }

    /// Whether `origin` may receive tokens: one of `iiif.auth.origins`, or (none listed) this
    /// server's own host.
    private func allows(origin: String, authority: String) -> Bool {
        if !gate.settings.origins.isEmpty { return gate.settings.origins.contains(origin) }
        return origin == "http://\(authority)" || origin == "https://\(authority)"
    }

    // MARK: - Logout

    private func logout(_ service: IIIFAuthSettings.Service) -> Response {
        var response = IIIFAuthPages.page(status: .ok, title: service.label, text: "You are logged out.")
        response.headers[.setCookie] = cookieField(service, value: "", maxAge: 0)
        return response
    }

    // MARK: - Descriptions

    /// The probe service of a restricted image, with its access, token and logout services, for
    /// `info.json`'s `service`.
    package static func description(
        identifier: IIIFIdentifier, service: IIIFAuthSettings.Service, authority: String
    ) -> [String: Any] {
        let base = Self.base(authority)
        var access: [String: Any] = [
            "id": "\(base)/access/\(service.name)", "type": "AuthAccessService2", "profile": service.profile.rawValue,
            "service": [
                ["id": "\(base)/token/\(service.name)", "type": "AuthAccessTokenService2"],
                ["id": "\(base)/logout/\(service.name)", "type": "AuthLogoutService2", "label": Self.language("Log out")],
            ],
        ]
        if service.profile != .external {
            access["label"] = Self.language(service.label)
            access["heading"] = Self.language(service.label)
            access["confirmLabel"] = Self.language(service.login == nil && service.profile == .active ? "Accept" : "Log in")
        }
        return ["id": "\(base)/probe/\(identifier.raw)", "type": "AuthProbeService2", "service": [access]]
    }

    package static func language(_ text: String) -> [String: [String]] { ["en": [text]] }

    package static func json(_ object: [String: Any]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8))
    }

    private static let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    /// `text` percent-encoded for a query value (RFC 3986 unreserved characters kept).
    package static func percentEncoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }
}
