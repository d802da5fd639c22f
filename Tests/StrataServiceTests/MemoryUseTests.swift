import Foundation
import Strata
import StrataService
import Testing

/// The process's memory by part in `/stats` and `/metrics`, and `render.memoryLimit` as the
/// service answers it.
@Suite("Memory by part", .timeLimit(.minutes(5)))
struct MemoryUseTests {
    @Test func statsAndMetricsShowMemoryByPart() async throws {
        let server = try await TestServer.start([
            "memory.costLimit": "40MiB", "http.encodedCacheSize": "4MiB", "render.memoryLimit": "96MiB",
            "render.bufferCacheSize": "24MiB",
        ])
        let answer = try await server.get("/images/jpeg/fallenleaf-2048x1280-420.jpg?w=1024&format=jpeg")
        #expect(answer.status == 200)
        let stats = try await server.get("/stats")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(stats.body)) as? [String: Any])
        let memory = try #require(json["memoryUse"] as? [String: Any])
        #expect(memory["memoryTierLimit"] as? Int == 40 << 20)
        #expect(memory["encodedLimit"] as? Int == 4 << 20)
        #expect(memory["inFlightLimit"] as? Int == 96 << 20)
        // The pixel-buffer cache is the process's (every server in this test process sets it).
        #expect((memory["bufferCacheLimit"] as? Int ?? 0) > 0)
        // The render reserved its decode and output; the encode its own buffers.
        #expect((memory["inFlightPeak"] as? Int ?? 0) > 1024 * 640 * 4)
        #expect(memory["inFlight"] as? Int == 0)
        // The 1024 px variant is in the memory tier, and its pixels are live heap buffers.
        let tier = try #require(memory["memoryTier"] as? Int)
        #expect(tier >= 1024 * 640 * 4)
        #expect((memory["pixelBuffers"] as? Int ?? 0) >= tier)
        #expect((memory["rssAnonymous"] as? Int ?? 0) > 0 && (memory["rss"] as? Int ?? 0) >= (memory["rssAnonymous"] as? Int ?? 0))
        #expect(["jemalloc", "glibc"].contains(memory["allocator"] as? String ?? ""))
        #expect((memory["encoded"] as? Int ?? 0) > 0)

        let metrics = try await server.get("/metrics").text
        for part in ["memory_tier", "in_flight_peak", "in_flight_limit", "buffer_cache", "rss_anonymous", "malloc_free", "mapped_files"] {
            #expect(metrics.contains(#"strata_memory_bytes{part="\#(part)""#), "\(part)")
        }
        #expect(metrics.contains(#"strata_memory_bytes{part="in_flight_limit",node="\#(server.nodeName)"} \#(96 << 20)"#))
        try await server.stop()
    }

    @Test func aRenderLargerThanTheWholeLimitIs503NamingTheKey() async throws {
        // A 2560×1600 WebP that must decode in full for a 2048 px answer: 16 MB of decode, 13 MB
        // of output, more than the 16 MiB limit.
        let server = try await TestServer.start(["render.memoryLimit": "16MiB"])
        let refused = try await server.get("/images/webp/path-2560x1600.webp?w=2048&format=raw")
        #expect(refused.status == 503)
        #expect(refused.errorCode == "over_memory_limit")
        #expect(refused.header("Retry-After") == nil)
        #expect(refused.text.contains("webp/path-2560x1600.webp") && refused.text.contains("render.memoryLimit"))
        // A thumbnail of the same original fits and is served.
        let small = try await server.get("/images/webp/path-2560x1600.webp?w=256&format=jpeg")
        #expect(small.status == 200)
        try await server.stop()
    }
}
