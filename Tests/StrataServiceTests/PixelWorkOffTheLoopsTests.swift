import Foundation
import Synchronization
import Testing

@testable import Strata
@testable import StrataService

/// In `strata serve` async code runs on the event loops (they are Swift's global executor), so
/// the service's work over pixels is a job of the engine's pool, never a route's own step: a
/// `format=raw` answer's copy of the rows (a mapped hit's pages may have to be read from the
/// disk) and a smart IIIF square's saliency map. Counted as the pool's awaited jobs of answers
/// that need nothing else from it.
@Suite("Pixel work off the event loops", .timeLimit(.minutes(5)))
struct PixelWorkOffTheLoopsTests {
    static func poolJobs(of server: TestServer, _ body: () async throws -> Void) async rethrows -> Int {
        let jobs = Atomic<Int>(0)
        server.cache.pool.observeJobStarts { _, awaited in if awaited { jobs.add(1, ordering: .relaxed) } }
        defer { server.cache.pool.observeJobStarts(nil) }
        try await body()
        return jobs.load(ordering: .relaxed)
    }

    @Test func rawRowsAreCopiedOnThePool() async throws {
        let server = try await TestServer.start(disk: false)
        let raw = "/images/jpeg/kite-800x500-gray.jpg?w=200&format=raw"
        let first = try await server.get(raw)
        #expect(first.status == 200 && first.header("X-Strata-Tier") == "source")
        var again: Answer?
        let jobs = try await Self.poolJobs(of: server) { again = try await server.get(raw) }
        #expect(again?.status == 200 && again?.header("X-Strata-Tier") == "memory" && again?.body == first.body)
        #expect(jobs == 1, "the copy of a memory hit's rows: \(jobs) pool jobs")
        try await server.stop()
    }

    @Test func aSmartSquaresSaliencyMapIsMadeOnThePool() async throws {
        let server = try await TestServer.start(["iiif.squareGravity": "smart"], disk: false)
        let tile = "/iiif/3/jpeg%2Fkite-800x500-gray.jpg/square/100,/0/default.jpg"
        let first = try await server.get(tile)
        #expect(first.status == 200)
        var again: Answer?
        // The small variant, the square's variant and its encoding are held: only the map is work.
        let jobs = try await Self.poolJobs(of: server) { again = try await server.get(tile) }
        #expect(again?.header("X-Strata-Tier") == "encoded" && again?.body == first.body)
        #expect(jobs == 1, "the saliency map: \(jobs) pool jobs")
        try await server.stop()
    }
}
