import Foundation
import Strata
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `DELETE /images/{key}` and `DELETE /iiif/{2|3}/{identifier}`: a key leaves every tier, the
/// encoded cache and the IIIF memo; unauthorised purges change nothing; other processes sharing
/// the disk directory drop their copies.
@Suite("Purge", .timeLimit(.minutes(5)))
struct PurgeTests {
    static let token = "purge-token-0123456789abcdef"
    static let bearer = [("Authorization", "Bearer \(token)")]
    static let key = "jpeg/kite-800x500-gray.jpg"
    static let target = "/images/\(key)?w=160&format=jpeg"

    /// Whether `condition` holds within `seconds` (polled every 20 ms).
    static func within(_ seconds: Int, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return false
    }

    @Test func withoutATokenThePurgeRouteDoesNotExist() async throws {
        let server = try await TestServer.start()
        #expect(try await server.get(Self.target).status == 200)
        let refused = try await server.get("/images/\(Self.key)", headers: Self.bearer, method: .DELETE)
        #expect(refused.status == 404)
        #expect(try await server.get(Self.target).header("X-Strata-Tier") == "encoded", "the refused purge dropped something")
        try await server.stop()
    }

    @Test func aPurgeEmptiesEveryTierAndUnauthorisedOnesChangeNothing() async throws {
        let server = try await TestServer.start(["http.adminToken": Self.token])
        #expect(try await server.get(Self.target).header("X-Strata-Tier") == "source")
        #expect(try await server.get(Self.target).header("X-Strata-Tier") == "encoded")
        let disk = try #require(server.cache.disk)
        disk.flush()
        let query = SizeQuery(box: PixelSize(width: 160, height: 160))
        #expect(disk.contains(key: Self.key, matching: query))
        for headers in [[], [("Authorization", "Bearer wrong-token-0123456789")], [("Authorization", Self.token)]] {
            let refused = try await server.get("/images/\(Self.key)", headers: headers, method: .DELETE)
            #expect(refused.status == 401 && refused.errorCode == "unauthorized" && refused.header("WWW-Authenticate") == "Bearer")
        }
        #expect(try await server.get(Self.target).header("X-Strata-Tier") == "encoded")

        let purged = try await server.get("/images/\(Self.key)", headers: Self.bearer, method: .DELETE)
        #expect(purged.status == 200, "\(purged.text)")
        let json = try #require(JSONSerialization.jsonObject(with: Data(purged.body)) as? [String: Any])
        #expect(json["key"] as? String == Self.key && (json["encodings"] as? Int ?? 0) >= 1, "\(json)")
        #expect(server.cache.memory?.records(forKey: CacheKey(Self.key)).isEmpty == true)
        #expect(!disk.contains(key: Self.key, matching: query))
        #expect(server.encodedEntries == 0)
        #expect(try await server.get(Self.target).header("X-Strata-Tier") == "source")
        // A key that never was: purged all the same (nothing to drop); a malformed one is a 400.
        #expect(try await server.get("/images/never/was.jpg", headers: Self.bearer, method: .DELETE).status == 200)
        #expect(try await server.get("/images/a/../b.jpg", headers: Self.bearer, method: .DELETE).status == 400)
        try await server.stop()
    }

    @Test func bothColourOutputsArePurged() async throws {
        let server = try await TestServer.start(["http.adminToken": Self.token, "color.output": "original"])
        #expect(try await server.get(Self.target).header("X-Strata-Tier") == "source")
        let original = CacheKey(Self.key, colour: .original)
        #expect(server.cache.memory?.records(forKey: original).isEmpty == false)
        #expect(try await server.get("/images/\(Self.key)", headers: Self.bearer, method: .DELETE).status == 200)
        #expect(server.cache.memory?.records(forKey: original).isEmpty == true)
        #expect(server.encodedEntries == 0)
        try await server.stop()
    }

    @Test func everyGravityIsPurged() async throws {
        let server = try await TestServer.start(["http.adminToken": Self.token])
        let crops = ["smart", "north", "fp:0.12,0.87"].map { "/images/\(Self.key)?w=120&h=120&mode=fill&format=jpeg&gravity=\($0)" }
        var etags: Set<String> = []
        for crop in crops {
            let answer = try await server.get(crop)
            #expect(answer.status == 200 && answer.header("X-Strata-Tier") == "source", "\(crop): \(answer.text)")
            etags.insert(answer.header("ETag") ?? "")
        }
        #expect(etags.count == crops.count, "each gravity has its own validator: \(etags)")
        for crop in crops { #expect(try await server.get(crop).header("X-Strata-Tier") == "encoded") }
        let start = ContinuousClock.now
        #expect(try await server.get("/images/\(Self.key)", headers: Self.bearer, method: .DELETE).status == 200)
        print("purge of every derived key: \(ContinuousClock.now - start)")
        #expect(server.encodedEntries == 0)
        for gravity in [Gravity.smart, .north, .focalPoint(x: 12, y: 87)] {
            #expect(server.cache.memory?.records(forKey: CacheKey(Self.key, colour: .srgb, gravity: gravity)).isEmpty == true)
        }
        for crop in crops { #expect(try await server.get(crop).header("X-Strata-Tier") == "source") }
        try await server.stop()
    }

    @Test func anIIIFIdentifierIsPurgedByItsBaseURI() async throws {
        let server = try await TestServer.start(["http.adminToken": Self.token])
        let identifier = Self.key.replacingOccurrences(of: "/", with: "%2F")
        let tile = "/iiif/3/\(identifier)/full/200,/0/default.jpg"
        #expect(try await server.get("/iiif/3/\(identifier)/info.json").status == 200)
        #expect(try await server.get(tile).status == 200)
        #expect(try await server.get(tile).header("X-Strata-Tier") == "encoded")
        let tileRefused = try await server.get(tile, headers: Self.bearer, method: .DELETE)
        #expect(tileRefused.status == 404, "a purge names the base URI, not a tile")
        #expect(try await server.get("/iiif/3/\(identifier)", headers: Self.bearer, method: .DELETE).status == 200)
        #expect(server.encodedEntries == 0)
        #expect(try await server.get(tile).header("X-Strata-Tier") == "source")
        try await server.stop()
    }

    @Test func anotherProcessSharingTheDiskDropsItsCopies() async throws {
        // Process B, a real `strata serve`, renders the key into the shared disk directory and
        // holds it in memory; this process purges it; B's next answer is no memory hit.
        let server = try await TestServer.start(["http.adminToken": Self.token])
        let shared = server.scratch + "/disk"
        let (process, port, _, _) = try GracefulShutdownTests.startServe([
            "--source-directory", fixturesDirectory, "--disk-path", shared, "--memory-pressure-enabled", "false",
        ])
        defer {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        let raw = "/images/\(Self.key)?w=160&format=raw"
        #expect(try await get(port: port, raw).header("X-Strata-Tier") == "source")
        #expect(try await get(port: port, raw).header("X-Strata-Tier") == "memory")
        // B's write reaches the shared directory; this process's index learns it by inotify.
        let query = SizeQuery(box: PixelSize(width: 160, height: 160))
        let disk = try #require(server.cache.disk)
        #expect(try await Self.within(30) { disk.contains(key: Self.key, matching: query) })
        #expect(try await server.get(Self.target, headers: Self.bearer, method: .DELETE).status == 200)
        #expect(!disk.contains(key: Self.key, matching: query))
        // B saw its file go and dropped its memory copy: it renders again.
        #expect(try await Self.within(30) { try await get(port: port, raw).header("X-Strata-Tier") == "source" })
        try await server.stop()
    }

    @Test func strataPurgeEmptiesACacheDirectoryOffline() throws {
        let scratch = makeScratchDirectory("purge-cli")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let cache = scratch + "/disk"
        let get = ["get", Self.key, "--size", "100x100", "--source", fixturesDirectory, "--cache", cache]
        #expect(try runStrata(get).1.hasPrefix("source"))
        #expect(try runStrata(get).1.hasPrefix("disk"))
        let other = ["get", "jpeg/path-2560x1600.jpg", "--size", "64x64", "--source", fixturesDirectory, "--cache", cache]
        #expect(try runStrata(other).0 == 0)
        let purged = try runStrata(["purge", Self.key, "--cache", cache])
        #expect(purged.0 == 0 && purged.1 == "purged \(Self.key)\n")
        #expect(try runStrata(get).1.hasPrefix("source"), "the purged key was still on disk")
        #expect(try runStrata(other).1.hasPrefix("disk"), "another key was purged too")
        #expect(try runStrata(["purge", Self.key]).0 == 2, "no tier configured: an error")
    }
}
