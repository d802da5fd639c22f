import Foundation
import NIOPosix
import Strata
import Testing

@testable import StrataService

/// Format negotiation's alpha scan (a pass over a whole variant) never runs on an event loop:
/// not on the warm path's, nor on any other.
@Suite("Transparency scan", .timeLimit(.minutes(5)))
struct TransparencyScanTests {
    @Test func theScanNeverRunsOnAnEventLoop() async throws {
        let scans = Lock((total: 0, onEventLoop: 0))
        let probes = ServiceProbes(transparencyScanned: {
            let onLoop = MultiThreadedEventLoopGroup.currentEventLoop != nil
            scans.withLock {
                $0.total += 1
                if onLoop { $0.onEventLoop += 1 }
            }
        })
        let server = try await TestServer.start(disk: false, probes: probes)
        // The variant in memory, no encoding of it cached: a client without WebP needs the scan.
        let key = "webp/cups-640x400-alpha.webp"
        _ = try await server.cache.image(for: ImageRequest(key: CacheKey(key), box: PixelSize(width: 320, height: 320)))
        let answer = try await server.get("/images/\(key)?w=320&h=320", headers: [("Accept", "image/*")])
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "image/png")
        #expect(answer.header("Vary") == "Accept")
        let opaque = try await server.get("/images/jpeg/kite-800x500-gray.jpg?w=200", headers: [("Accept", "image/*")])
        #expect(opaque.header("Content-Type") == "image/jpeg")
        let counted = scans.withLock { $0 }
        #expect(counted.total >= 2)
        #expect(counted.onEventLoop == 0, "\(counted.onEventLoop) of \(counted.total) scans ran on an event loop")
        try await server.stop()
    }
}
