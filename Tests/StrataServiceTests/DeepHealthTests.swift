import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// `GET /healthz?deep=1`: a render, an encode and a disk write proven, rate-limited; the
/// failing part named with a 503.
@Suite("Deep health", .serialized, .timeLimit(.minutes(3)))
struct DeepHealthTests {
    @Test func aHealthyNodePassesAndChecksAtMostOncePerInterval() async throws {
        let checks = Lock(0)
        let server = try await TestServer.start(probes: ServiceProbes(deepHealthChecked: { checks.withLock { $0 += 1 } }))
        let shallow = try await server.get("/healthz")
        #expect(shallow.status == 200 && shallow.text == "ok\n" && checks.withLock { $0 } == 0)
        let started = ContinuousClock.now
        let deep = try await server.get("/healthz?deep=1")
        #expect(deep.status == 200 && deep.text == "ok: render, encode, disk\n", "\(deep.text)")
        // A burst of 40 concurrent probes runs one check per interval at most (bounded by the
        // time the burst took, so a slow machine cannot fail it).
        try await withThrowingTaskGroup(of: Int.self) { group in
            for _ in 0..<40 { group.addTask { try await server.get("/healthz?deep=1").status } }
            for try await status in group { #expect(status == 200) }
        }
        let intervals = Int((ContinuousClock.now - started) / DeepHealth.interval)
        #expect(checks.withLock { $0 } <= 1 + intervals, "\(checks.withLock { $0 }) checks in \(intervals + 1) intervals")
        // The caches were bypassed: the engine served no request.
        #expect(server.cache.statistics.engine.requests == 0)
        try await Task.sleep(for: DeepHealth.interval + .milliseconds(100))
        let before = checks.withLock { $0 }
        #expect(try await server.get("/healthz?deep=true").status == 200)
        #expect(checks.withLock { $0 } == before + 1, "a probe after the interval checks again")
        try await server.stop()
    }

    @Test(.enabled(if: SmallFilesystem.canMount, "\(SmallFilesystem.skipMessage)"))
    func aReadOnlyDiskFailsTheCheckNamingTheDisk() async throws {
        let fs = try #require(SmallFilesystem(megabytes: 4))
        // No pyramids beside the disk: their table, open for writing on the same filesystem,
        // would keep it from being remounted read-only.
        let server = try await TestServer.start(["disk.path": fs.path + "/disk", "iiif.pyramidPath": "off"])
        #expect(try await server.get("/healthz?deep=1").status == 200)
        #expect(fs.remount(readOnly: true))
        try await Task.sleep(for: DeepHealth.interval + .milliseconds(100))
        let failing = try await server.get("/healthz?deep=1")
        #expect(failing.status == 503 && failing.errorCode == "unhealthy", "\(failing.status) \(failing.text)")
        #expect(failing.text.contains("disk:") && failing.text.contains("Read-only"), "\(failing.text)")
        // The shallow check still answers: the process is up.
        #expect(try await server.get("/healthz").status == 200)
        #expect(fs.remount(readOnly: false))
        try await Task.sleep(for: DeepHealth.interval + .milliseconds(100))
        #expect(try await server.get("/healthz?deep=1").status == 200)
        try await server.stop()
    }
}
