import Foundation
import Testing

@testable import Strata
@testable import StrataHTTPOrigin
@testable import StrataS3
import StrataTestSupport

/// ``S3Source`` and ``S3ObjectStore`` against a server whose signature check is the AWS SDK's
/// signer (``ReferenceS3Server``: botocore signs each request again from what arrived), for what
/// moto does not check: keys that need percent-encoding, as a user's bucket holds them, and the
/// request's time, which S3 refuses more than 15 minutes off its clock.
@Suite("S3 requests as the AWS SDK signs them", .serialized, .timeLimit(.minutes(10)))
struct S3ReferenceSigningTests {
    static let kite = Fixtures.bytes("jpeg/kite-800x500-gray.jpg")

    /// Keys as users name their photos: spaces, brackets, `+`, a literal `%20`, non-ASCII,
    /// characters that mean something in a URL or a query, and nested folders.
    static let keys = [
        "with space.jpg", "photos/My Photo (1).jpg", "plus+sign.jpg", "ünïcødé/日本語 写真.jpg", "eq=amp&semi;hash#.jpg",
        "tilde~star*.jpg", "pct%20literal.jpg", "quote'comma,colon:at@dollar$.jpg", "brackets[1]{2}^pipe|back\\slash.jpg",
        "a/b/c/deep.jpg",
    ]

    static func endpoint(_ server: ReferenceS3Server) -> S3Endpoint {
        S3Endpoint(bucket: "originals", region: "eu-west-1", endpoint: server.endpoint, addressing: .path)
    }

    static func credentials(secret: String = ReferenceS3Server.secretAccessKey, token: String? = nil) -> AWSCredentials {
        AWSCredentials(accessKeyID: ReferenceS3Server.accessKeyID, secretAccessKey: secret, sessionToken: token)
    }

    static func source(
        _ server: ReferenceS3Server, credentials: AWSCredentials = credentials(), prefix: String = "pre fix/"
    ) throws -> S3Source {
        var configuration = S3Source.Configuration(endpoint: endpoint(server), credentials: credentials)
        configuration.prefix = prefix
        configuration.retryBackoff = .milliseconds(20)
        configuration.readTimeout = .seconds(60)
        configuration.totalTimeout = .seconds(120)
        return try S3Source(configuration: configuration)
    }

    /// Each key's object: its own bytes, so that a request for one key answered with another's
    /// object is seen.
    static func object(_ key: String) -> [UInt8] { Array(key.utf8) + kite }

    @Test func keysThatNeedEncodingAreSignedAsTheSDKSignsThem() async throws {
        try await withReferenceS3 { server in
            let store = try S3ObjectStore(endpoint: Self.endpoint(server), credentials: Self.credentials(), timeout: .seconds(30))
            let source = try Self.source(server)
            for key in Self.keys {
                // A signed PUT (its body's hash signed), then every read the source makes.
                try await store.put("pre fix/" + key, Self.object(key), contentType: "image/jpeg")
                let data = try await source.fetch(key: key)
                #expect(data.bytes == Self.object(key), "\(key)")
                #expect(try await source.version(key: key) == data.version, "a conditional HEAD of \(key)")
                let part = try #require(try await source.fetchRange(key: key, offset: 7, maxBytes: 300))
                #expect(part.bytes == Array(Self.object(key)[7..<307]) && part.version == data.version, "\(key)")
                #expect(try await source.fetchPrefix(key: key, maxBytes: 64).bytes == Array(Self.object(key).prefix(64)))
                #expect(try await store.get("pre fix/" + key)?.bytes == Self.object(key))
            }
            try await source.checkHealth()
            for key in Self.keys {
                try await store.delete("pre fix/" + key)
                #expect(try await store.get("pre fix/" + key) == nil)
                let gone = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: key) }
                #expect(gone?.isNotFound == true, "\(key): \(String(describing: gone))")
            }
            #expect(!server.log.contains("refused"), "requests botocore signs differently:\n\(server.log)")
            try await source.shutdown()
            try await store.shutdown()
        }
    }

    @Test func aWrongSecretOrAMissingSessionTokenIsRefused() async throws {
        try await withReferenceS3(sessionToken: "session/token+1") { server in
            let store = try S3ObjectStore(
                endpoint: Self.endpoint(server), credentials: Self.credentials(token: "session/token+1"), timeout: .seconds(30))
            try await store.put("pre fix/photos/My Photo (1).jpg", Self.kite)
            let source = try Self.source(server, credentials: Self.credentials(token: "session/token+1"))
            #expect(try await source.fetch(key: "photos/My Photo (1).jpg").bytes == Self.kite)

            let wrong = try Self.source(server, credentials: Self.credentials(secret: "wrong/secret", token: "session/token+1"))
            let refused = await sourceFailure { () async throws(SourceError) in try await wrong.fetch(key: "photos/My Photo (1).jpg") }
            let origin = try #require(refused?.origin, "\(String(describing: refused))")
            #expect(origin.kind == .status(403) && origin.serverCode == "SignatureDoesNotMatch" && origin.attempts == 1)
            #expect("\(try #require(refused))".contains("source.s3.secretAccessKey"))

            let tokenless = try Self.source(server)
            let noToken = await sourceFailure { () async throws(SourceError) in try await tokenless.checkHealth() }
            #expect(noToken?.origin?.serverCode == "InvalidToken", "\(String(describing: noToken))")
            for source in [source, wrong, tokenless] { try await source.shutdown() }
            try await store.shutdown()
        }
    }

    @Test func aClockOffByMoreThanFifteenMinutesIsRefusedNamingTheClock() async throws {
        // The server's clock 20 minutes ahead: this machine's is 20 minutes behind it.
        try await withReferenceS3(clockOffset: .seconds(20 * 60)) { server in
            let source = try Self.source(server)
            let refused = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "with space.jpg") }
            let origin = try #require(refused?.origin, "\(String(describing: refused))")
            #expect(origin.kind == .status(403) && origin.serverCode == "RequestTimeTooSkewed" && origin.attempts == 1)
            let skew = try #require(origin.clockSkewSeconds, "the skew read from the server's Date header")
            #expect(abs(skew - 20 * 60) <= 5, "\(skew)")
            let text = "\(origin)"
            #expect(text.contains("clock") && text.contains("NTP") && text.contains("/originals/"), "\(text)")
            // `/healthz?deep=1` fails on it, and so does the shared tier's store.
            let health = await sourceFailure { () async throws(SourceError) in try await source.checkHealth() }
            #expect(health?.origin?.serverCode == "RequestTimeTooSkewed")
            let store = try S3ObjectStore(endpoint: Self.endpoint(server), credentials: Self.credentials(), timeout: .seconds(30))
            do throws(S3StoreError) {
                try await store.put("x", [1])
                Issue.record("a PUT 20 minutes off the server's clock was accepted")
            } catch {
                #expect(error.kind == .status(403, code: "RequestTimeTooSkewed"), "\(error)")
            }
            try await source.shutdown()
            try await store.shutdown()
        }
        // 14 minutes off is within what S3 allows.
        try await withReferenceS3(clockOffset: .seconds(-14 * 60)) { server in
            let store = try S3ObjectStore(endpoint: Self.endpoint(server), credentials: Self.credentials(), timeout: .seconds(30))
            try await store.put("pre fix/with space.jpg", Self.kite)
            let source = try Self.source(server)
            #expect(try await source.fetch(key: "with space.jpg").bytes == Self.kite)
            try await source.shutdown()
            try await store.shutdown()
        }
    }
}
