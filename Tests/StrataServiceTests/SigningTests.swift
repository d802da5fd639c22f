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
        #expect(try signer.verify(Substring(signed)) == Substring(Self.target))
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
        let exe = try #require(strataExecutable(), "the strata executable must be built next to the tests")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: exe)
        process.arguments = ["sign", "http://127.0.0.1:8080" + Self.target, "--http-signing-key", Self.key]
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("STRATA_") }
        let out = Pipe()
        process.standardOutput = out
        try process.run()
        let printed = String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let url = printed.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(url == "http://127.0.0.1:8080" + URLSigner(key: Self.key).sign(Self.target))
    }
}
