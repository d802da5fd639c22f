import Foundation
import Strata
import StrataService
import Testing

/// Signed URLs: with `http.signingKey` set, only URLs carrying the right `sig` are served.
@Suite("Signed URLs", .timeLimit(.minutes(5)))
struct SigningTests {
    static let key = "0123456789abcdef-test-signing-key"
    static let target = "/images/jpeg/kite-800x500-gray.jpg?w=200&h=200&format=jpeg"

    @Test func signAndVerifyRoundTrip() throws {
        let signer = URLSigner(key: Self.key)
        let signed = signer.sign(Self.target)
        #expect(signed.hasPrefix(Self.target + "&sig="))
        #expect(try signer.verify(Substring(signed)).target == Substring(Self.target))
        // Re-signing replaces the signature; a whole URL keeps its host and signs the target.
        #expect(signer.sign(signed) == signed)
        #expect(signer.sign("http://example.com:8080" + Self.target) == "http://example.com:8080" + signed)
        #expect(throws: URLSigner.Refusal.missing) { try signer.verify(Substring(Self.target)) }
        #expect(throws: URLSigner.Refusal.invalid) { try URLSigner(key: "another-key-of-16-bytes").verify(Substring(signed)) }
        let tampered = signed.replacingOccurrences(of: "w=200", with: "w=2000")
        #expect(throws: URLSigner.Refusal.invalid) { try signer.verify(Substring(tampered)) }
        #expect(throws: URLSigner.Refusal.invalid) { try signer.verify(Substring(signed.dropLast())) }
    }

    @Test func theServerRefusesMissingAndBadSignatures() async throws {
        let server = try await TestServer.start(["http.signingKey": Self.key])
        let signer = URLSigner(key: Self.key)
        let unsigned = try await server.get(Self.target)
        #expect(unsigned.status == 403)
        #expect(unsigned.errorCode == "missing_signature")
        let signed = signer.sign(Self.target)
        let bad = try await server.get(signed.replacingOccurrences(of: "w=200", with: "w=201"))
        #expect(bad.status == 403)
        #expect(bad.errorCode == "bad_signature")
        let other = try await server.get(URLSigner(key: "not-the-servers-key!").sign(Self.target))
        #expect(other.status == 403)
        let good = try await server.get(signed)
        #expect(good.status == 200)
        #expect(good.header("X-Strata-Width") == "200")
        #expect(server.cache.statistics.engine.requests == 1)
        try await server.stop()
    }

    @Test func strataSignPrintsAURLTheServerAccepts() throws {
        let (status, printed) = try runStrata(["sign", "http://127.0.0.1:8080" + Self.target, "--http-signing-key", Self.key])
        #expect(status == 0)
        let url = printed.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(url == "http://127.0.0.1:8080" + URLSigner(key: Self.key).sign(Self.target))
    }

    static let old = "old:0123456789abcdef-old-key"
    static let new = "new:fedcba9876543210-new-key"

    @Test func keysRotateAndURLsExpire() throws {
        let both = try #require(URLSigner(keys: ["old": "0123456789abcdef-old-key", "new": "fedcba9876543210-new-key"], defaultKey: nil))
        let oldOnly = try #require(URLSigner(keys: ["old": "0123456789abcdef-old-key"], defaultKey: nil))
        let newOnly = try #require(URLSigner(keys: ["new": "fedcba9876543210-new-key"], defaultKey: nil))
        // Old and new keys are both valid while both are listed; a removed key is refused.
        let byOld = try #require(oldOnly.sign(Self.target, keyID: "old"))
        let byNew = try #require(newOnly.sign(Self.target, keyID: "new"))
        #expect(byOld.contains("&kid=old&sig=") && byNew.contains("&kid=new&sig="))
        #expect(try both.verify(Substring(byOld)).target == Substring(Self.target + "&kid=old"))
        #expect(try both.verify(Substring(byNew)).target == Substring(Self.target + "&kid=new"))
        #expect(throws: URLSigner.Refusal.unknownKey("old")) { try newOnly.verify(Substring(byOld)) }
        #expect(throws: URLSigner.Refusal.unknownKey(nil)) { try both.verify(Substring(URLSigner(key: Self.key).sign(Self.target))) }
        #expect(oldOnly.sign(Self.target, keyID: "new") == nil)
        // Tampering with kid: another listed key's id breaks the signature.
        #expect(throws: URLSigner.Refusal.invalid) {
            try both.verify(Substring(byOld.replacingOccurrences(of: "kid=old", with: "kid=new")))
        }
        // Expiry: valid up to and at `exp`, refused after it; changing `exp` breaks the signature.
        let expiring = try #require(both.sign(Self.target, keyID: "new", expires: 2_000_000_000))
        #expect(expiring.contains("&kid=new&exp=2000000000&sig="))
        #expect(try both.verify(Substring(expiring), now: 1_999_999_999).expires == 2_000_000_000)
        #expect(try both.verify(Substring(expiring), now: 2_000_000_000).expires == 2_000_000_000)
        #expect(throws: URLSigner.Refusal.expired) { try both.verify(Substring(expiring), now: 2_000_000_001) }
        #expect(throws: URLSigner.Refusal.invalid) {
            try both.verify(Substring(expiring.replacingOccurrences(of: "exp=2000000000", with: "exp=2000000099")), now: 2_000_000_001)
        }
    }

    /// Signing a signed URL again replaces its `kid` and `exp` as well as its `sig` (found by
    /// `FuzzURLSigner`): ``URLSigner/verify(_:now:)`` reads the first of each, so a URL re-signed
    /// to extend its expiry kept the old one, and one re-signed with a new key was refused.
    @Test func signingAgainReplacesKeyIDAndExpiry() throws {
        let both = try #require(URLSigner(keys: ["old": "0123456789abcdef-old-key", "new": "fedcba9876543210-new-key"], defaultKey: nil))
        let byOld = try #require(both.sign(Self.target, keyID: "old", expires: 1_000))
        let again = try #require(both.sign(byOld, keyID: "new", expires: 2_000_000_000))
        #expect(
            again == Self.target + "&kid=new&exp=2000000000&sig="
                + (both.signature(for: Substring(Self.target + "&kid=new&exp=2000000000"), keyID: "new") ?? ""))
        #expect(try both.verify(Substring(again), now: 1_999_999_999).expires == 2_000_000_000)
        // Parameters of the signer's own in the URL given are dropped too: only `--expires` expires.
        let single = URLSigner(key: Self.key)
        let given = single.sign("/images/a.jpg?exp=10&w=1&kid=x")
        #expect(given.hasPrefix("/images/a.jpg?w=1&sig="))
        #expect(try single.verify(Substring(given), now: 11).expires == nil)
        #expect(try #require(single.sign("/images/a.jpg?exp=10", keyID: nil, expires: 20)).hasPrefix("/images/a.jpg?exp=20&sig="))
        // Parameters are found by bytes: a `&` after a prepended character (U+0600, which joins
        // the next character into one Character) still separates them, so `exp` still expires.
        let prepended = try #require(single.sign("/images/a.jpg?w=1&n=\u{600}", keyID: nil, expires: 20))
        #expect(try single.verify(Substring(prepended), now: 20).expires == 20)
        #expect(throws: URLSigner.Refusal.expired) { try single.verify(Substring(prepended), now: 21) }
    }

    @Test func theServerChecksKeyIDsAndExpiry() async throws {
        let server = try await TestServer.start(["http.signingKeys": "\(Self.old),\(Self.new)"])
        let signer = try #require(URLSigner(keys: ["old": "0123456789abcdef-old-key", "new": "fedcba9876543210-new-key"], defaultKey: nil))
        let now = Int(Date().timeIntervalSince1970)
        let byOld = try #require(signer.sign(Self.target, keyID: "old"))
        #expect(try await server.get(byOld).status == 200)
        let later = try #require(signer.sign(Self.target, keyID: "new", expires: now + 3600))
        #expect(try await server.get(later).status == 200)
        // Expired: refused (the memo's own re-check is PreparedTargetsTests').
        let past = try #require(signer.sign(Self.target, keyID: "new", expires: now - 1))
        let late = try await server.get(past)
        #expect(late.status == 403 && late.errorCode == "expired_signature", "\(late.status) \(late.text)")
        let unknown = try await server.get(URLSigner(key: Self.key).sign(Self.target))
        #expect(unknown.status == 403 && unknown.errorCode == "unknown_key")
        try await server.stop()
    }

    @Test func aKeyListWithAMalformedEntryIsAConfigurationErrorNamingTheKey() async throws {
        for bad in ["nocolon", "id:short", "bad id:0123456789abcdef-x", "\(Self.old),\(Self.old)"] {
            await #expect(throws: (any Error).self) { try await TestServer.start(["http.signingKeys": bad]) }
        }
    }

    @Test func strataSignWithAKeyIDAndAnExpiry() throws {
        let (status, printed) = try runStrata([
            "sign", Self.target, "--http-signing-keys", "\(Self.old),\(Self.new)", "--key-id", "new", "--expires", "1h",
        ])
        #expect(status == 0)
        let url = printed.trimmingCharacters(in: .whitespacesAndNewlines)
        let signer = try #require(URLSigner(keys: ["new": "fedcba9876543210-new-key"], defaultKey: nil))
        let checked = try signer.verify(Substring(url))
        let expires = try #require(checked.expires)
        let now = Int(Date().timeIntervalSince1970)
        #expect(expires > now + 3500 && expires <= now + 3600, "\(url)")
    }
}
