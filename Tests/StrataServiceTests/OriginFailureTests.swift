import Foundation
import Strata
import StrataService
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// An HTTP origin that fails: 502 when it cannot be reached, 504 when it does not answer in
/// time; the service keeps serving.
@Suite("Origin failures", .timeLimit(.minutes(5)))
struct OriginFailureTests {
    /// A TCP socket on 127.0.0.1 that listens and never accepts: connections complete in the
    /// kernel's backlog, and no byte ever comes back.
    final class SilentListener: Sendable {
        let descriptor: Int32
        let port: Int

        init() throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            try #require(fd >= 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            try #require(bound == 0)
            try #require(listen(fd, 16) == 0)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            descriptor = fd
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        deinit { close(descriptor) }
    }

    @Test func anUnreachableOriginIs502() async throws {
        // A port that was free a moment ago: nothing listens there.
        let closedPort = try {
            let l = try SilentListener()
            return l.port
        }()
        let server = try await TestServer.start(
            ["source.http.baseURL": "http://127.0.0.1:\(closedPort)/", "source.http.retryBackoff": "10ms"],
            sourceDirectory: false)
        let answer = try await server.get("/images/photos/a.jpg?w=100")
        #expect(answer.status == 502, "\(answer.text)")
        #expect(answer.errorCode == "origin_failed")
        #expect(try await server.get("/healthz").status == 200)
        try await server.stop()
    }

    @Test func anOriginThatDoesNotAnswerIs504() async throws {
        let silent = try SilentListener()
        let server = try await TestServer.start(
            [
                "source.http.baseURL": "http://127.0.0.1:\(silent.port)/", "source.http.readTimeout": "200ms",
                "source.http.totalTimeout": "2s", "source.http.retryBackoff": "10ms",
            ], sourceDirectory: false)
        let answer = try await server.get("/images/photos/a.jpg?w=100")
        #expect(answer.status == 504, "\(answer.text)")
        #expect(answer.errorCode == "origin_timeout")
        try await server.stop()
        withExtendedLifetime(silent) {}
    }
}
