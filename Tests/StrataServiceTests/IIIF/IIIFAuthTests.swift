import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Strata
import StrataConfiguration
import Testing

@testable import StrataService

/// IIIF Authorization Flow 2.0 on a real server, with the requests a browser's viewer makes:
/// info.json's services, the probe, the access page, the token service's iframe page, the
/// protected tile with the token or the cookie, logout — and every way in refused without a
/// credential: expired, tampered or misplaced credentials, the warm path, `/images`, thumbor.
@Suite("IIIF Authorization", .timeLimit(.minutes(5)))
struct IIIFAuthTests {
    static let key = "0123456789abcdef0123456789abcdef"
    static let restricted = "jpeg%2Ffallenleaf-2048x1280-420.jpg"
    static let open = "jpeg%2Fkite-800x500-gray.jpg"

    static func start(_ extra: [String: String] = [:]) async throws -> TestServer {
        var settings = [
            "iiif.auth.key": key, "iiif.auth.services": "staff: active degraded=256 label=Staff login",
            "iiif.auth.rules": "jpeg/fallen* staff",
        ]
        settings.merge(extra) { $1 }
        return try await TestServer.start(settings)
    }

    static func json(_ answer: Answer) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any])
    }

    /// The message the token service's page posts, and the origin it posts to.
    static func message(_ answer: Answer) throws -> (fields: [String: Any], origin: String) {
        let page = answer.text
        let start = try #require(page.range(of: "postMessage(")).upperBound
        let end = try #require(page.range(of: ");</script>", range: start..<page.endIndex)).lowerBound
        // `{…}, "origin"`: the object is JSON (keys and strings are JSON literals).
        let call = page[start..<end]
        let split = try #require(call.range(of: "}, ", options: .backwards))
        let object = String(call[...split.lowerBound])
        let fields = try #require(JSONSerialization.jsonObject(with: Data(object.utf8)) as? [String: Any])
        let origin = try #require(
            JSONSerialization.jsonObject(with: Data(call[split.upperBound...].utf8), options: .fragmentsAllowed) as? String)
        return (fields, origin)
    }

    static func cookie(_ answer: Answer) -> String? {
        guard let field = answer.header("Set-Cookie"), let end = field.firstIndex(of: ";") else { return nil }
        return String(field[..<end])
    }

    @Test func aViewersWholeFlowThroughAClickThrough() async throws {
        let server = try await Self.start()
        let origin = "http://127.0.0.1:\(server.port)"
        let tile = "/iiif/3/\(Self.restricted)/0,0,1024,1024/512,/0/default.jpg"

        // 1. info.json names the probe, its access service, token and logout services.
        let info = try Self.json(try await server.get("/iiif/3/\(Self.restricted)/info.json"))
        let probe = try #require((info["service"] as? [[String: Any]])?.first)
        #expect(probe["type"] as? String == "AuthProbeService2")
        #expect(probe["id"] as? String == "\(origin)/iiif/auth/probe/\(Self.restricted)")
        let access = try #require((probe["service"] as? [[String: Any]])?.first)
        #expect(access["type"] as? String == "AuthAccessService2")
        #expect(access["profile"] as? String == "active")
        #expect(access["id"] as? String == "\(origin)/iiif/auth/access/staff")
        #expect((access["label"] as? [String: [String]])?["en"] == ["Staff login"])
        let inner = try #require(access["service"] as? [[String: Any]])
        #expect(inner.map { $0["type"] as? String } == ["AuthAccessTokenService2", "AuthLogoutService2"])
        #expect(inner.first?["id"] as? String == "\(origin)/iiif/auth/token/staff")
        // An open image's info.json has no service.
        #expect(try Self.json(try await server.get("/iiif/3/\(Self.open)/info.json"))["service"] == nil)

        // 2. Without a credential: the tile is a 401; the probe says 401 (in a 200) and offers
        // the degraded substitute, which is served, privately.
        let refused = try await server.get(tile)
        #expect(refused.status == 401)
        #expect(refused.errorCode == "unauthorized")
        #expect(refused.header("Access-Control-Allow-Origin") == "*")
        #expect(refused.header("Cache-Control") == "no-store")
        let preflight = try await server.get("/iiif/auth/probe/\(Self.restricted)", method: .OPTIONS)
        #expect(preflight.status == 204)
        #expect(preflight.header("Access-Control-Allow-Headers") == "Authorization")
        let probed = try await server.get("/iiif/auth/probe/\(Self.restricted)")
        #expect(probed.status == 200)
        #expect(probed.header("Access-Control-Allow-Origin") == "*")
        let result = try Self.json(probed)
        #expect(result["type"] as? String == "AuthProbeResult2")
        #expect(result["status"] as? Int == 401)
        let substitute = try #require(result["substitute"] as? [String: Any])
        let substituteID = try #require(substitute["id"] as? String)
        #expect(substituteID == "\(origin)/iiif/3/\(Self.restricted)/full/!256,256/0/default.jpg")
        let degraded = try await server.get(String(substituteID.dropFirst(origin.count)))
        #expect(degraded.status == 200)
        #expect(degraded.header("X-Strata-Width") == "256")
        #expect(degraded.header("Cache-Control") == "private, no-cache")
        #expect(try await server.get("/iiif/3/\(Self.restricted)/full/257,/0/default.jpg").status == 401)

        // 3. The access page: a click-through whose button POSTs; the POST sets the cookie.
        let page = try await server.get("/iiif/auth/access/staff?origin=\(origin)")
        #expect(page.status == 200)
        #expect(page.text.contains("<form method=\"post\""))
        #expect(page.header("Set-Cookie") == nil)
        let accepted = try await server.get("/iiif/auth/access/staff?origin=\(origin)", method: .POST)
        #expect(accepted.status == 200)
        #expect(accepted.text.contains("window.close()"))
        let setCookie = try #require(accepted.header("Set-Cookie"))
        #expect(setCookie.contains("; HttpOnly; SameSite=Lax"))
        #expect(setCookie.contains("Max-Age=3600"))
        let cookie = try #require(Self.cookie(accepted))

        // 4. The token service (the viewer's iframe) posts a token to the viewer's origin.
        let tokenPage = try await server.get("/iiif/auth/token/staff?messageId=m1&origin=\(origin)", headers: [("Cookie", cookie)])
        let (message, target) = try Self.message(tokenPage)
        #expect(target == origin)
        #expect(message["type"] as? String == "AuthAccessToken2")
        #expect(message["messageId"] as? String == "m1")
        // The cookie's remaining life (it was set a moment ago; a busy machine takes seconds).
        #expect((3000...3600).contains(message["expiresIn"] as? Int ?? 0))
        let token = try #require(message["accessToken"] as? String)

        // 5. The probe with the token says 200; the tile is served with the token or the cookie,
        // privately.
        #expect(
            try Self.json(try await server.get("/iiif/auth/probe/\(Self.restricted)", headers: [("Authorization", "Bearer \(token)")]))[
                "status"] as? Int == 200)
        let withToken = try await server.get(tile, headers: [("Authorization", "Bearer \(token)")])
        #expect(withToken.status == 200)
        #expect(withToken.header("Cache-Control") == "private, no-cache")
        let withCookie = try await server.get(tile, headers: [("Cookie", "other=1; \(cookie)")])
        #expect(withCookie.status == 200)
        #expect(withCookie.body == withToken.body)
        // The encoding is now cached and warm: still never given without a credential.
        #expect(server.encodedEntries > 0)
        for _ in 0..<3 { #expect(try await server.get(tile).status == 401) }
        #expect(try await server.get(tile, headers: [("Authorization", "Bearer \(token)x")]).status == 401)

        // 6. Logout clears the cookie.
        let logout = try await server.get("/iiif/auth/logout/staff")
        #expect(logout.header("Set-Cookie")?.hasPrefix("strata-auth-staff=; Path=/; Max-Age=0") == true)
        // An open image is public as before.
        let openTile = try await server.get("/iiif/3/\(Self.open)/full/200,/0/default.jpg")
        #expect(openTile.status == 200)
        #expect(openTile.header("Cache-Control") == "public, max-age=86400")
        try await server.stop()
    }

    @Test func expiredTamperedAndMisplacedCredentialsAreRefused() async throws {
        let server = try await Self.start(["iiif.auth.services": "staff: active label=Staff, other: kiosk"])
        let signer = AccessCredential.Signer(key: Self.key)
        let now = Int(time(nil))
        let tile = "/iiif/2/\(Self.restricted)/full/300,/0/default.jpg"
        func status(_ headers: [(String, String)]) async throws -> Int { try await server.get(tile, headers: headers).status }
        let good = signer.sign(AccessCredential(kind: .token, service: "staff", expiry: now + 60))
        #expect(try await status([("Authorization", "Bearer \(good)")]) == 200)
        let expired = signer.sign(AccessCredential(kind: .token, service: "staff", expiry: now - 1))
        #expect(try await status([("Authorization", "Bearer \(expired)")]) == 401)
        // The payload changed (a later expiry), the MAC kept.
        let parts = good.split(separator: ".")
        let longer = URLSigner.base64URL(Data("v1\ntoken\nstaff\n\(now + 999_999)\n".utf8))
        #expect(try await status([("Authorization", "Bearer \(longer).\(parts[1])")]) == 401)
        // Signed with another key; another service's token; a cookie sent as a token; a token
        // sent as the cookie; a login ticket.
        let foreign = AccessCredential.Signer(key: "another key of 32 bytes, not it!")
        #expect(
            try await status([
                ("Authorization", "Bearer \(foreign.sign(AccessCredential(kind: .token, service: "staff", expiry: now + 60)))")
            ]) == 401)
        #expect(
            try await status([
                ("Authorization", "Bearer \(signer.sign(AccessCredential(kind: .token, service: "other", expiry: now + 60)))")
            ]) == 401)
        let cookie = signer.sign(AccessCredential(kind: .cookie, service: "staff", expiry: now + 60))
        #expect(try await status([("Authorization", "Bearer \(cookie)")]) == 401)
        #expect(try await status([("Cookie", "strata-auth-staff=\(good)")]) == 401)
        #expect(try await status([("Cookie", "strata-auth-staff=\(cookie)")]) == 200)
        #expect(
            try await status([
                ("Cookie", "strata-auth-staff=\(signer.sign(AccessCredential(kind: .ticket, service: "staff", expiry: now + 60)))")
            ]) == 401)
        // Without `degraded`, the probe offers no substitute and small sizes are refused too.
        #expect(try await server.get("/iiif/3/\(Self.restricted)/full/64,/0/default.jpg").status == 401)
        #expect(try Self.json(try await server.get("/iiif/auth/probe/\(Self.restricted)"))["substitute"] == nil)
        // The token service: no cookie, an expired one, an origin that may not have tokens.
        let origin = "http://127.0.0.1:\(server.port)"
        #expect(
            try Self.message(try await server.get("/iiif/auth/token/staff?messageId=a&origin=\(origin)")).fields["profile"] as? String
                == "missingAspect")
        let stale = signer.sign(AccessCredential(kind: .cookie, service: "staff", expiry: now - 5))
        #expect(
            try Self.message(
                try await server.get(
                    "/iiif/auth/token/staff?messageId=a&origin=\(origin)", headers: [("Cookie", "strata-auth-staff=\(stale)")])
            )
            .fields["profile"] as? String == "expiredAspect")
        let evil = try Self.message(
            try await server.get(
                "/iiif/auth/token/staff?messageId=a&origin=https://evil.example", headers: [("Cookie", "strata-auth-staff=\(cookie)")]))
        #expect(evil.fields["profile"] as? String == "invalidOrigin")
        #expect(evil.fields["accessToken"] == nil)
        #expect(try await server.get("/iiif/auth/token/staff?messageId=a&origin=javascript:alert(1)").status == 400)
        try await server.stop()
    }

    @Test func aLoginPageSendsTheUserBackWithATicket() async throws {
        let server = try await Self.start([
            "iiif.auth.services": "sso: active login=https://sso.example.org/login?app=strata label=Archive login",
            "iiif.auth.rules": "jpeg/fallen* sso", "iiif.auth.crossSite": "true",
        ])
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let origin = "http://127.0.0.1:\(server.port)"
        // The client is shut down before any expectation can end the test (a client left
        // running traps in its deinit).
        let response: HTTPClientResponse
        do {
            response = try await client.execute(
                HTTPClientRequest(url: "\(origin)/iiif/auth/access/sso?origin=https%3A%2F%2Fviewer.example.org"), timeout: .seconds(60))
        } catch {
            try? await client.shutdown()
            throw error
        }
        try await client.shutdown()
        #expect(response.status == .found)
        let back = "\(origin)/iiif/auth/access/sso?origin=https%3A%2F%2Fviewer.example.org"
        #expect(
            response.headers.first(name: "Location")
                == "https://sso.example.org/login?app=strata&return=\(IIIFAuthEndpoint.percentEncoded(back))")
        // The login page signs a ticket for the user and sends them back with it.
        let signer = AccessCredential.Signer(key: Self.key)
        let now = Int(time(nil))
        let ticket = signer.sign(AccessCredential(kind: .ticket, service: "sso", expiry: now + 60, subject: "alice"))
        let granted = try await server.get("/iiif/auth/access/sso?ticket=\(ticket)")
        #expect(granted.status == 200)
        let setCookie = try #require(granted.header("Set-Cookie"))
        #expect(setCookie.hasSuffix("; HttpOnly; SameSite=None; Secure"))
        let cookie = try #require(Self.cookie(granted))
        let value = try #require(cookie.split(separator: "=", maxSplits: 1).last)
        #expect((try? signer.verify(value, kind: .cookie, service: "sso", now: now).get())?.subject == "alice")
        // An expired ticket, and a cookie offered as a ticket, are refused.
        let late = signer.sign(AccessCredential(kind: .ticket, service: "sso", expiry: now - 1))
        #expect(try await server.get("/iiif/auth/access/sso?ticket=\(late)").status == 403)
        #expect(try await server.get("/iiif/auth/access/sso?ticket=\(value)").status == 403)
        try await server.stop()
    }

    @Test func kioskAndExternalServices() async throws {
        let server = try await Self.start([
            "iiif.auth.services": "room: kiosk label=Reading room, site: external", "iiif.auth.rules": "jpeg/fallen* room, jpeg/kite* site",
        ])
        let kiosk = try await server.get("/iiif/auth/access/room")
        #expect(kiosk.status == 200)
        let cookie = try #require(Self.cookie(kiosk))
        #expect(try await server.get("/iiif/3/\(Self.restricted)/full/128,/0/default.jpg", headers: [("Cookie", cookie)]).status == 200)
        // External: nothing to open here; a cookie the site's login signed opens the images.
        #expect(try await server.get("/iiif/auth/access/site").status == 404)
        let external = AccessCredential.Signer(key: Self.key).sign(
            AccessCredential(kind: .cookie, service: "site", expiry: Int(time(nil)) + 60))
        let kite = "/iiif/3/\(Self.open)/full/128,/0/default.jpg"
        #expect(try await server.get(kite).status == 401)
        #expect(try await server.get(kite, headers: [("Cookie", "strata-auth-site=\(external)")]).status == 200)
        // The room's cookie does not open the site's images.
        #expect(try await server.get(kite, headers: [("Cookie", cookie)]).status == 401)
        #expect(try await server.get("/iiif/auth/access/nowhere").status == 404)
        try await server.stop()
    }

    @Test func imagesAndThumborAreBehindTheSameDecision() async throws {
        let server = try await Self.start(["thumbor.enabled": "true", "thumbor.allowUnsafe": "true", "thumbor.prefix": "/thumbor"])
        let token = AccessCredential.Signer(key: Self.key).sign(
            AccessCredential(kind: .token, service: "staff", expiry: Int(time(nil)) + 60))
        let bearer = [("Authorization", "Bearer \(token)")]
        let big = "/images/jpeg/fallenleaf-2048x1280-420.jpg?w=512&h=512"
        #expect(try await server.get(big).status == 401)
        // Warm it with the token, then ask again without: still refused.
        let served = try await server.get(big, headers: bearer)
        #expect(served.status == 200)
        #expect(served.header("Cache-Control") == "private, no-cache")
        for _ in 0..<3 { #expect(try await server.get(big).status == 401) }
        // Within the degraded size (both sides bound), without a credential.
        let small = try await server.get("/images/jpeg/fallenleaf-2048x1280-420.jpg?w=256&h=200")
        #expect(small.status == 200)
        #expect(small.header("Cache-Control") == "private, no-cache")
        #expect(try await server.get("/images/jpeg/fallenleaf-2048x1280-420.jpg?w=256").status == 401)
        // An open key is public.
        #expect(try await server.get("/images/jpeg/kite-800x500-gray.jpg?w=100").header("Cache-Control") == "public, max-age=86400")

        let thumb = "/thumbor/unsafe/300x200/jpeg/fallenleaf-2048x1280-420.jpg"
        #expect(try await server.get(thumb).status == 401)
        let thumbServed = try await server.get(thumb, headers: bearer)
        #expect(thumbServed.status == 200)
        #expect(thumbServed.header("Cache-Control") == "private, no-cache")
        for _ in 0..<3 { #expect(try await server.get(thumb).status == 401) }
        // A restricted image cannot be laid on an open one.
        let mark = try await server.get(
            "/thumbor/unsafe/filters:watermark(jpeg/fallenleaf-2048x1280-420.jpg,0,0,0)/jpeg/kite-800x500-gray.jpg", headers: bearer)
        #expect(mark.status == 400)
        #expect(mark.errorCode == "watermark_refused")
        try await server.stop()
    }
}

/// The credential and the gate's matching, without a server.
@Suite("IIIF Authorization: credentials and rules")
struct AccessGateTests {
    @Test func credentialsRoundTripAndRefuseChanges() {
        let signer = AccessCredential.Signer(key: "0123456789abcdef")
        let credential = AccessCredential(kind: .cookie, service: "staff", expiry: 2000, subject: "bob\nwith: odd|chars")
        let text = signer.sign(credential)
        #expect(!text.contains("="))
        #expect(signer.verify(text[...], kind: .cookie, service: "staff", now: 1999) == .success(credential))
        #expect(signer.verify(text[...], kind: .cookie, service: "staff", now: 2000) == .failure(.expired))
        #expect(signer.verify(text[...], kind: .token, service: "staff", now: 1) == .failure(.misplaced))
        #expect(signer.verify(text[...], kind: .cookie, service: "other", now: 1) == .failure(.misplaced))
        #expect(signer.verify("", kind: .cookie, service: "staff", now: 1) == .failure(.invalid))
        #expect(signer.verify("a.b.c", kind: .cookie, service: "staff", now: 1) == .failure(.invalid))
        var bytes = Array(text.utf8)
        bytes[3] = bytes[3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(signer.verify(Substring(decoding: bytes, as: UTF8.self), kind: .cookie, service: "staff", now: 1) == .failure(.invalid))
    }

    @Test func rulesMatchInOrderAndStarCrossesSlashes() {
        var settings = IIIFAuthSettings()
        settings.key = "0123456789abcdef"
        settings.services = [
            "a": .init(name: "a", profile: .active, label: "A"), "b": .init(name: "b", profile: .kiosk, degraded: 100, label: "B"),
        ]
        settings.rules = [.init(pattern: "private/open-*", service: "b"), .init(pattern: "private/*", service: "a")]
        let gate = AccessGate(settings)
        #expect(gate.service(for: "private/deep/down/x.jpg")?.name == "a")
        #expect(gate.service(for: "private/open-1.jpg")?.name == "b")
        #expect(gate.service(for: "public/x.jpg") == nil)
        #expect(gate.service(for: "Private/x.jpg") == nil)
        #expect(!AccessGate.open.protects("private/x.jpg"))
        #expect(gate.decide(key: "private/open-1.jpg", headers: [:]) == .refused(settings.services["b"]!, degraded: 100))
        #expect(gate.decide(key: "x", headers: [:]) == .open)
    }
}
