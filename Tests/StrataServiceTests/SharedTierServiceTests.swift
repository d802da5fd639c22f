import Foundation
import Strata
import StrataConfiguration
import StrataTestSupport
import Testing

@testable import StrataService

/// Two `strata serve` nodes over one shared bucket in a real moto server: what one rendered the
/// other answers in the format its own client asks for, `/stats` and `/metrics` count it, and a
/// purge at one node reaches the bucket.
// 10 minutes: each test waits on moto (Python) and on servers starting; in the whole suite on
// 2 cores its awaits queue behind other tests' work for minutes (a fresh clone's CI run saw 5).
@Suite("Shared tier behind strata serve", .serialized, .timeLimit(.minutes(10)))
struct SharedTierServiceTests {
    static let key = "jpeg/kite-800x500-gray.jpg"
    static let token = "shared-tier-admin-token-0123456789"

    static func settings(_ moto: MotoServer) -> [String: String] {
        [
            "shared.s3.bucket": "s3://renders/fleet", "shared.s3.endpoint": moto.endpoint, "shared.s3.accessKeyID": moto.accessKeyID,
            "shared.s3.secretAccessKey": moto.secretAccessKey, "shared.timeout": "20s", "http.adminToken": token,
        ]
    }

    static func stats(_ server: TestServer) async throws -> [String: Any] {
        let body = try await server.get("/stats").body
        return try #require(JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])
    }

    @Test func aNodeAnswersWhatAnotherRenderedInItsClientsFormat() async throws {
        try await withMoto(buckets: ["renders"]) { moto in
            let a = try await TestServer.start(Self.settings(moto))
            let first = try await a.get("/images/\(Self.key)?w=300", headers: [("Accept", "image/avif,image/*")])
            #expect(first.status == 200 && first.header("X-Strata-Tier") == "source" && first.header("Content-Type") == "image/avif")
            let uploaded = await eventually(300) {
                let shared = a.cache.shared?.detailedStatistics
                return shared?["uploads"] == 1
            }
            #expect(uploaded)

            let b = try await TestServer.start(Self.settings(moto))
            let jpeg = try await b.get("/images/\(Self.key)?w=300", headers: [("Accept", "image/jpeg")])
            #expect(jpeg.status == 200 && jpeg.header("X-Strata-Tier") == "shared", "\(jpeg.status) \(jpeg.text.prefix(200))")
            #expect(jpeg.header("Content-Type") == "image/jpeg" && jpeg.body.starts(with: [0xFF, 0xD8, 0xFF]))
            let webp = try await b.get("/images/\(Self.key)?w=300", headers: [("Accept", "image/webp")])
            #expect(webp.status == 200 && webp.header("Content-Type") == "image/webp")
            let stats = try await Self.stats(b)
            let engine = try #require(stats["engine"] as? [String: Any])
            #expect(engine["sourceFetches"] as? Int == 0, "\(engine)")
            let shared = try #require(stats["shared"] as? [String: Int])
            #expect(shared["hits"] == 1 && shared["corrupt"] == 0 && (shared["bytesRead"] ?? 0) > 0, "\(shared)")
            let metrics = try await b.get("/metrics").text
            #expect(metrics.contains("strata_shared_hits_total") && metrics.contains("tier=\"shared\""))

            // A purge at A reaches the bucket: a third node renders again.
            let purged = try await a.get("/images/\(Self.key)", headers: [("Authorization", "Bearer \(Self.token)")], method: .DELETE)
            #expect(purged.status == 200)
            let c = try await TestServer.start(Self.settings(moto))
            let again = try await c.get("/images/\(Self.key)?w=300", headers: [("Accept", "image/jpeg")])
            #expect(again.status == 200 && again.header("X-Strata-Tier") == "source")
            try await a.stop()
            try await b.stop()
            try await c.stop()
        }
    }

    @Test func sharedSettingsAreCheckedNamingTheKey() async throws {
        let aws = ["AWS_ACCESS_KEY_ID": "A", "AWS_SECRET_ACCESS_KEY": "B"]
        func failure(_ arguments: [String]) async -> ConfigurationError? {
            await #expect(throws: ConfigurationError.self) {
                try StrataConfiguration(from: try await ConfigurationLayers(arguments: arguments, environment: aws))
            }
        }
        #expect(await failure(["--shared-s3-bucket", "renders", "--shared-timeout", "0s"])?.key == "shared.timeout")
        #expect(
            await failure(["--shared-s3-bucket", "renders", "--shared-max-concurrent-uploads", "0"])?.key == "shared.maxConcurrentUploads")
        #expect(await failure(["--shared-s3-bucket", "x"])?.key == "shared.s3.bucket")
        let read = try StrataConfiguration(
            from: try await ConfigurationLayers(arguments: ["--shared-s3-bucket", "s3://renders/fleet/one"], environment: aws))
        #expect(read.shared.isEnabled && read.shared.tier.prefix == "fleet/one")
        #expect(try StrataConfiguration(from: try await ConfigurationLayers(environment: aws)).shared.isEnabled == false)
    }
}
