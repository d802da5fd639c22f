import Foundation
import Strata
import StrataS3
import StrataTestSupport
import Testing

@testable import StrataService

/// `strata serve` over a bucket of originals in a real moto server (signatures checked): answers,
/// the deep health check with good and bad credentials, and the statuses of S3's failures.
// 10 minutes: each test waits on moto (Python) and on servers starting; in the whole suite on
// 2 cores its awaits queue behind other tests' work for minutes (a fresh clone's CI run saw 5).
@Suite("S3 origin behind strata serve", .serialized, .timeLimit(.minutes(10)))
struct S3OriginServiceTests {
    static let kite = "jpeg/kite-800x500-gray.jpg"

    static func settings(_ moto: MotoServer, secret: String? = nil) -> [String: String] {
        [
            "source.s3.bucket": "s3://originals/photos", "source.s3.endpoint": moto.endpoint,
            "source.s3.accessKeyID": moto.accessKeyID, "source.s3.secretAccessKey": secret ?? moto.secretAccessKey,
            "source.s3.retryBackoff": "10ms",
        ]
    }

    @Test func imagesComeFromTheBucketAndTheDeepCheckProvesTheCredentials() async throws {
        try await withMoto(buckets: ["originals"]) { moto in
            let store = try S3ObjectStore(
                endpoint: S3Endpoint(bucket: "originals", endpoint: moto.endpoint),
                credentials: AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey, sessionToken: nil),
                timeout: .seconds(30))
            try await store.put("photos/" + Self.kite, Fixtures.bytes(Self.kite))
            try await store.shutdown()

            let server = try await TestServer.start(Self.settings(moto), sourceDirectory: false)
            let answer = try await server.get("/images/\(Self.kite)?w=128&format=jpeg")
            #expect(answer.status == 200 && answer.body.starts(with: [0xFF, 0xD8, 0xFF]), "\(answer.status) \(answer.text)")
            let missing = try await server.get("/images/jpeg/missing.jpg?w=128")
            #expect(missing.status == 404 && missing.errorCode == "not_found")
            let deep = try await server.get("/healthz?deep=1")
            #expect(deep.status == 200 && deep.text == "ok: render, encode, disk, source\n", "\(deep.text)")
            try await server.stop()

            // A wrong secret: the deep check fails naming the source and the bucket; requests
            // that need the origin are 502, and nothing is cached.
            let refused = try await TestServer.start(Self.settings(moto, secret: "not-the-secret"), sourceDirectory: false)
            let failing = try await refused.get("/healthz?deep=1")
            #expect(failing.status == 503 && failing.text.contains("source:"), "\(failing.text)")
            #expect(failing.text.contains("SignatureDoesNotMatch") && failing.text.contains("/originals/photos/"), "\(failing.text)")
            #expect(!failing.text.contains("not-the-secret"))
            let image = try await refused.get("/images/\(Self.kite)?w=128&format=jpeg")
            #expect(image.status == 502 && image.errorCode == "origin_failed", "\(image.status) \(image.text)")
            try await refused.stop()

            // The store down: 502 after the retries, within the timeouts.
            let down = try await TestServer.start(
                Self.settings(moto).merging(["source.s3.connectTimeout": "1s"]) { $1 }, sourceDirectory: false)
            moto.kill9()
            let unreachable = try await down.get("/images/\(Self.kite)?w=100&format=jpeg")
            #expect(unreachable.status == 502 && unreachable.errorCode == "origin_failed", "\(unreachable.status) \(unreachable.text)")
            #expect((try await down.get("/healthz?deep=1")).status == 503)
            try await down.stop()
        }
    }
}
