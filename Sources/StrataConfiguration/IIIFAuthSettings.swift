import Foundation
import Strata

/// The settings of IIIF Authorization Flow 2.0 (the `iiif.auth.*` keys): which keys are
/// restricted (``rules``), the access services that open them (``services``), and the key
/// that signs their cookies and tokens.
///
/// A value type read with the rest of ``StrataConfiguration``; the service target builds its
/// access gate from it. Cost: nothing at run time.
public struct IIIFAuthSettings: Sendable, Equatable {
    /// An access service: how a user gets the cookie that opens the keys of its rules.
    public struct Service: Sendable, Equatable {
        /// The IIIF access service's interaction pattern.
        public enum Profile: String, Sendable, CaseIterable {
            /// The user opens the access page: a login page (``Service/login``) or, without
            /// one, a page with terms to accept (a click-through).
            case active
            /// A reading-room terminal: the access page grants at once, without a prompt.
            case kiosk
            /// The cookie is set elsewhere (a login on the same site signs it with the key):
            /// clients go straight to the token service.
            case external
        }

        public var name: String
        public var profile: Profile
        /// The login page an `active` service sends the user to (`nil`: a click-through page of
        /// Strata's own). The page receives `return=URL` and, once the user has logged in,
        /// sends them to that URL with `&ticket=T` added (a ticket signed with ``key``).
        public var login: String?
        /// Restricted images are served without a credential at most this many pixels on
        /// their long side (`nil`: not at all; the probe then offers no substitute).
        public var degraded: Int?
        /// What the client shows: the service's button, heading and the probe's note.
        public var label: String

        public init(name: String, profile: Profile, login: String? = nil, degraded: Int? = nil, label: String) {
            self.name = name
            self.profile = profile
            self.login = login
            self.degraded = degraded
            self.label = label
        }
    }

    /// A rule: keys matching ``pattern`` (an `fnmatch(3)` pattern without `FNM_PATHNAME`, so `*`
    /// matches `/` too) are restricted by ``service``.
    public struct Rule: Sendable, Equatable {
        public var pattern: String
        public var service: String

        public init(pattern: String, service: String) {
            self.pattern = pattern
            self.service = service
        }
    }

    /// The HMAC-SHA256 key of cookies, access tokens and login tickets (needed with rules).
    public var key: String?
    /// Access services by name.
    public var services: [String: Service] = [:]
    /// Rules in order: the first that matches a key decides.
    public var rules: [Rule] = []
    /// How long a cookie and a token are valid.
    public var lifetime: Duration = .seconds(3600)
    /// The viewers' origins that may receive access tokens (empty: the same host as Strata's).
    public var origins: [String] = []
    /// Cookies for viewers on another site: `SameSite=None; Secure` (Strata behind HTTPS), instead
    /// of `SameSite=Lax`.
    public var crossSite = false

    public init() {}

    /// Whether any key is restricted.
    public var isEnabled: Bool { !rules.isEmpty }
}

extension IIIFAuthSettings {
    /// Reads every `iiif.auth.*` key; a rule naming no service, a service without a valid
    /// profile, or rules without a key are errors naming the key.
    package static func read(from reader: inout KeyReader) throws(ConfigurationError) -> IIIFAuthSettings {
        var settings = IIIFAuthSettings()
        settings.key = try reader.string("iiif.auth.key")
        let definitions = try HTTPServiceSettings.readNamed(
            from: &reader, "iiif.auth.services", what: "access service", example: "staff: active login=https://sso.example.org/strata")
        for (name, text) in definitions {
            settings.services[name] = try service(name, text, reader: reader)
        }
        for entry in try reader.list("iiif.auth.rules") {
            let parts = entry.split(whereSeparator: \.isWhitespace)
            guard parts.count >= 2, let service = parts.last else {
                throw reader.error(
                    "iiif.auth.rules",
                    reason: "expected entries `PATTERN SERVICE` (e.g. `restricted/* staff`), got \(entry.debugDescription)")
            }
            guard settings.services[String(service)] != nil else {
                throw reader.error(
                    "iiif.auth.rules",
                    reason:
                        "\(entry.debugDescription) names the access service \(String(service).debugDescription), which iiif.auth.services does not define"
                )
            }
            let pattern = entry[..<entry.index(entry.endIndex, offsetBy: -service.count)].trimmingCharacters(in: .whitespaces)
            settings.rules.append(Rule(pattern: pattern, service: String(service)))
        }
        settings.lifetime = try reader.duration("iiif.auth.lifetime")
        guard settings.lifetime >= .seconds(10) else {
            throw reader.error("iiif.auth.lifetime", reason: "must be at least 10s (a cookie's and a token's validity)")
        }
        settings.origins = try reader.list("iiif.auth.origins")
        for origin in settings.origins where !isOrigin(origin) {
            throw reader.error(
                "iiif.auth.origins",
                reason: "\(origin.debugDescription) is not an origin (scheme://host[:port], no path): e.g. https://viewer.example.org")
        }
        settings.crossSite = try reader.bool("iiif.auth.crossSite")
        if settings.isEnabled {
            guard let key = settings.key, key.utf8.count >= 16 else {
                throw reader.error(
                    "iiif.auth.key",
                    reason:
                        "iiif.auth.rules restrict images, so a key of at least 16 bytes must sign their cookies and tokens (e.g. `openssl rand -hex 32`)"
                )
            }
        }
        return settings
    }

    /// One `iiif.auth.services` entry: `PROFILE [login=URL] [degraded=N] [label=TEXT…]`
    /// (`label=` last: the rest of the entry).
    private static func service(_ name: String, _ text: String, reader: KeyReader) throws(ConfigurationError) -> Service {
        var rest = Substring(text)
        var label: String?
        if let range = rest.range(of: "label=") {
            label = rest[range.upperBound...].trimmingCharacters(in: .whitespaces)
            rest = rest[..<range.lowerBound]
        }
        let words = rest.split(whereSeparator: \.isWhitespace)
        func refuse(_ reason: String) -> ConfigurationError {
            reader.error("iiif.auth.services", reason: "\(name): \(reason) (expected `PROFILE [login=URL] [degraded=N] [label=TEXT]`)")
        }
        guard let first = words.first, let profile = Service.Profile(rawValue: String(first)) else {
            throw refuse("the profile must be active, kiosk or external")
        }
        var service = Service(name: name, profile: profile, label: label ?? "Log in to see this image")
        for word in words.dropFirst() {
            if word.hasPrefix("login=") {
                let url = String(word.dropFirst("login=".count))
                guard url.hasPrefix("https://") || url.hasPrefix("http://") || url.hasPrefix("/") else {
                    throw refuse("login must be an http(s) URL or a path on this server, got \(url.debugDescription)")
                }
                guard profile == .active else { throw refuse("only an active service has a login page") }
                service.login = url
            } else if word.hasPrefix("degraded=") {
                guard let side = Int(word.dropFirst("degraded=".count)), (1...4096).contains(side) else {
                    throw refuse("degraded must be a side in pixels, 1…4096")
                }
                service.degraded = side
            } else {
                throw refuse("unknown part \(String(word).debugDescription)")
            }
        }
        guard !service.label.isEmpty else { throw refuse("label must not be empty") }
        return service
    }

    /// Whether `text` is a web origin: `http(s)://host[:port]`, nothing after.
    package static func isOrigin(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme, scheme == "http" || scheme == "https", let host = url.host,
            !host.isEmpty, url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil
        else { return false }
        return text == "\(scheme)://\(host)" + (url.port.map { ":\($0)" } ?? "")
    }
}
