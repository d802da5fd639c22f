import Foundation
import Testing

@testable import Strata
@testable import StrataHTTPOrigin
@testable import StrataS3
import StrataTestSupport

/// ``S3Source`` and ``S3ObjectStore`` against a real moto server with signature checking on
/// (``MotoServer``): what a right key reads, what a wrong one is told, and the requests' shapes.
// 10 minutes: each test waits on moto (Python) and on servers starting; in the whole suite on
// 2 cores its awaits queue behind other tests' work for minutes (a fresh clone's CI run saw 5).
@Suite("S3Source against moto", .serialized, .timeLimit(.minutes(10)))
struct S3SourceTests {
    static let kite = "jpeg/kite-800x500-gray.jpg"
    static let path = "jpeg/path-2560x1600.jpg"

    static func endpoint(_ moto: MotoServer, bucket: String = "originals") -> S3Endpoint {
        S3Endpoint(bucket: bucket, region: "us-east-1", endpoint: moto.endpoint, addressing: .path)
    }

    static func credentials(_ moto: MotoServer, secret: String? = nil) -> AWSCredentials {
        AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: secret ?? moto.secretAccessKey, sessionToken: nil)
    }

    static func source(
        _ moto: MotoServer, secret: String? = nil, prefix: String = "", _ configure: (inout S3Source.Configuration) -> Void = { _ in }
    ) throws -> S3Source {
        var configuration = S3Source.Configuration(endpoint: endpoint(moto), credentials: credentials(moto, secret: secret))
        configuration.prefix = prefix
        configuration.retryBackoff = .milliseconds(20)
        configuration.readTimeout = .seconds(60)
        configuration.totalTimeout = .seconds(120)
        configure(&configuration)
        return try S3Source(configuration: configuration)
    }

    @Test func signedRequestsReadWriteAndAreRefusedWithAWrongSecret() async throws {
        try await withMoto(buckets: ["originals"]) { moto in
            let store = try S3ObjectStore(endpoint: Self.endpoint(moto), credentials: Self.credentials(moto), timeout: .seconds(30))
            defer { Task { try? await store.shutdown() } }
            let kite = Fixtures.bytes(Self.kite)
            try await store.put("photos/" + Self.kite, kite, contentType: "image/jpeg")
            // moto's checker refuses keys that need percent-encoding (a space aside), from boto3
            // too; such keys are checked against the AWS SDK's signer (S3ReferenceSigningTests)
            // and AWS's own PUT vector (`test$file.text`, SigV4Tests).
            let odd = "photos/2026_06/a-b.c~d.jpg"
            try await store.put(odd, kite)
            #expect(try await store.get(odd)?.bytes == kite)

            let source = try Self.source(moto, prefix: "/photos/")
            let data = try await source.fetch(key: Self.kite)
            #expect(data.bytes == kite)
            #expect(data.version.hasPrefix("\"") && data.version.count > 10, "the object's ETag: \(data.version)")
            #expect(try await source.fetch(key: "2026_06/a-b.c~d.jpg").bytes == kite)
            // Revalidation: a conditional HEAD; unchanged, the same version.
            #expect(try await source.version(key: Self.kite) == data.version)
            // A ranged GET of the first bytes, with the whole object's version.
            let prefix = try await source.fetchPrefix(key: Self.kite, maxBytes: 100)
            #expect(prefix.bytes == Array(kite.prefix(100)) && prefix.version == data.version)
            // Parts (a pyramid's spool): ranged GETs with the object's ETag and length.
            var parts: [UInt8] = []
            while parts.count < kite.count {
                let part = try #require(try await source.fetchRange(key: Self.kite, offset: parts.count, maxBytes: 64 << 10))
                #expect(part.version == data.version && part.totalBytes == kite.count)
                parts += part.bytes
            }
            #expect(parts == kite)
            // Missing: not found (the engine remembers it in its negative cache).
            let missing = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "nothing.jpg") }
            #expect(missing?.isNotFound == true)
            try await source.checkHealth()
            // Replaced: a new version.
            try await store.put("photos/" + Self.kite, Fixtures.bytes(Self.path))
            let replaced = try await source.version(key: Self.kite)
            #expect(replaced != nil && replaced != data.version)
            try await store.delete("photos/" + Self.kite)
            #expect(try await store.get("photos/" + Self.kite) == nil)
            try await source.shutdown()

            // A wrong secret: refused, with S3's code, the bucket and the key named, and advice.
            let wrong = try Self.source(moto, secret: "wrong-secret-key", prefix: "photos")
            let refused = await sourceFailure { () async throws(SourceError) in try await wrong.fetch(key: "2026_06/a-b.c~d.jpg") }
            let origin = try #require(refused?.origin, "\(String(describing: refused))")
            #expect(origin.kind == .status(403) && origin.attempts == 1, "a 4xx is not retried")
            #expect(origin.serverCode == "SignatureDoesNotMatch")
            let text = "\(try #require(refused))"
            #expect(text.contains("/originals/photos/") && text.contains("source.s3.secretAccessKey"), "\(text)")
            #expect(!text.contains("wrong-secret-key") && !text.contains(moto.secretAccessKey))
            let health = await sourceFailure { () async throws(SourceError) in try await wrong.checkHealth() }
            #expect(health?.origin?.serverCode == "SignatureDoesNotMatch")
            try await wrong.shutdown()

            // An unknown key id.
            var unknown = S3Source.Configuration(
                endpoint: Self.endpoint(moto),
                credentials: AWSCredentials(accessKeyID: "AKIANOTAKEY", secretAccessKey: "x", sessionToken: nil))
            unknown.maxRetries = 0
            let stranger = try S3Source(configuration: unknown)
            let strangerError = await sourceFailure { () async throws(SourceError) in try await stranger.checkHealth() }
            #expect(strangerError?.origin?.kind == .status(403), "\(String(describing: strangerError))")
            try await stranger.shutdown()

            // The store's own refusal.
            let badStore = try S3ObjectStore(
                endpoint: Self.endpoint(moto), credentials: Self.credentials(moto, secret: "nope"), timeout: .seconds(30))
            do throws(S3StoreError) {
                try await badStore.put("x", [1, 2, 3])
                Issue.record("a PUT with a wrong secret was accepted")
            } catch {
                #expect(error.kind == .status(403, code: "SignatureDoesNotMatch"), "\(error)")
            }
            try await badStore.shutdown()
        }
    }

    @Test func aStoppedStoreIsAnOriginErrorNotAHang() async throws {
        let moto = try MotoServer.start(buckets: ["originals"])
        let source = try Self.source(moto) {
            $0.maxRetries = 1
            $0.connectTimeout = .seconds(2)
        }
        moto.kill9()
        let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "a.jpg") }
        let origin = try #require(error?.origin, "\(String(describing: error))")
        #expect(origin.isRetryable && origin.attempts == 2, "\(origin)")
        #expect(origin.description.contains("source.s3.endpoint"), "\(origin)")
        try await source.shutdown()
    }

    @Test func settingsAreCheckedNamingTheKey() throws {
        let credentials = AWSCredentials(accessKeyID: "AKIDEXAMPLE", secretAccessKey: "secret-value", sessionToken: "token-value")
        func refusal(_ configure: (inout S3Source.Configuration) -> Void) -> String? {
            var configuration = S3Source.Configuration(endpoint: S3Endpoint(bucket: "photos"), credentials: credentials)
            configure(&configuration)
            do {
                try configuration.validate()
                return nil
            } catch {
                return error.key
            }
        }
        #expect(refusal { _ in } == nil)
        #expect(refusal { $0.endpoint.bucket = "No_Such" } == "source.s3.bucket")
        #expect(refusal { $0.endpoint.bucket = "ab" } == "source.s3.bucket")
        #expect(refusal { $0.endpoint.region = "" } == "source.s3.region")
        #expect(refusal { $0.endpoint.endpoint = "ftp://minio:9000" } == "source.s3.endpoint")
        #expect(refusal { $0.endpoint.endpoint = "http://minio:9000/path" } == "source.s3.endpoint")
        #expect(
            refusal {
                $0.endpoint.bucket = "my.photos"
                $0.endpoint.addressing = .virtual
            } == "source.s3.addressing")
        #expect(
            refusal { $0.credentials = AWSCredentials(accessKeyID: "", secretAccessKey: "", sessionToken: nil) } == "source.s3.accessKeyID")
        #expect(refusal { $0.prefix = "a/../b" } == "source.s3.prefix")
        #expect(refusal { $0.maxConcurrentRequests = 0 } == "source.s3.maxConcurrentRequests")
        #expect(refusal { $0.maxRetries = 11 } == "source.s3.maxRetries")
        #expect(refusal { $0.totalTimeout = .zero } == "source.s3.totalTimeout")

        var configuration = S3Source.Configuration(endpoint: S3Endpoint(bucket: "photos"), credentials: credentials)
        configuration.prefix = "a"
        for text in [configuration.description, configuration.debugDescription, String(reflecting: configuration)] {
            #expect(!text.contains("secret-value") && !text.contains("token-value") && text.contains("AKIDEXAMPLE"))
        }
        var dumped = ""
        dump(configuration, to: &dumped)
        #expect(!dumped.contains("secret-value") && !dumped.contains("token-value"))
    }

    @Test func addressingBuildsTheURLs() throws {
        let aws = S3Endpoint(bucket: "photos", region: "eu-west-1")
        #expect(aws.effectiveAddressing == .virtual)
        #expect(try aws.bucketURL().description == "https://photos.s3.eu-west-1.amazonaws.com/")
        let dotted = S3Endpoint(bucket: "my.photos", region: "eu-west-1")
        #expect(try dotted.bucketURL().description == "https://s3.eu-west-1.amazonaws.com/my.photos/")
        let minio = S3Endpoint(bucket: "photos", endpoint: "http://127.0.0.1:9000")
        #expect(try minio.bucketURL().description == "http://127.0.0.1:9000/photos/")
        let r2 = S3Endpoint(bucket: "photos", region: "auto", endpoint: "https://acct.r2.cloudflarestorage.com", addressing: .virtual)
        #expect(try r2.bucketURL().description == "https://photos.acct.r2.cloudflarestorage.com/")

        let source = try S3Source(
            configuration: {
                var c = S3Source.Configuration(
                    endpoint: minio, credentials: AWSCredentials(accessKeyID: "a", secretAccessKey: "b", sessionToken: nil))
                c.prefix = "/originals/2026/"
                return c
            }())
        #expect(try source.objectURL(for: "a b/c.jpg").description == "http://127.0.0.1:9000/photos/originals/2026/a%20b/c.jpg")
        #expect(throws: SourceError.self) { try source.objectURL(for: "../secret") }
        #expect(throws: SourceError.self) { try source.objectURL(for: "/etc/passwd") }
    }
}
