import Foundation
import Strata
import StrataService
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The warm path (``WarmPathHandler``) answers on the event loop; requests behind one that
/// Hummingbird is still answering keep their order.
@Suite("Warm path", .timeLimit(.minutes(5)))
struct WarmPathTests {
    /// Sends `bytes` on a new connection to 127.0.0.1:`port` and reads until `responses`
    /// HTTP responses (with Content-Length bodies) have arrived; returns them in order.
    static func exchange(port: Int, _ bytes: String, responses: Int) throws -> [(head: String, body: [UInt8])] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestStepFailure("socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { throw TestStepFailure("connect: errno \(errno)") }
        var timeout = timeval(tv_sec: 120, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let request = Array(bytes.utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, 0) }) == request.count else {
            throw TestStepFailure("send: errno \(errno)")
        }
        var received: [UInt8] = []
        var answers: [(head: String, body: [UInt8])] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while answers.count < responses {
            // Parse whatever is complete.
            if let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
                let length =
                    head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                if received.count - end.upperBound >= length {
                    answers.append((head, Array(received[end.upperBound..<(end.upperBound + length)])))
                    received.removeFirst(end.upperBound + length)
                    continue
                }
            }
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else {
                throw TestStepFailure(
                    "recv: \(n), errno \(errno), after \(answers.count) answers; so far: \(String(decoding: received.prefix(300), as: UTF8.self))"
                )
            }
            received += chunk[0..<n]
        }
        return answers
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        let server = try await TestServer.start()
        let warm = "/images/jpeg/kite-800x500-gray.jpg?w=200&h=200&format=jpeg"
        let first = try await server.get(warm)
        #expect(first.status == 200)
        #expect(try await server.get(warm).header("X-Strata-Tier") == "encoded")
        // A cold render first, then the warm request on the same connection, in one write: the
        // warm one must wait for the render's answer.
        let cold = "/images/jpeg/path-2560x1600.jpg?w=300&h=300&format=jpeg"
        let port = server.port
        let pipelined =
            "GET \(cold) HTTP/1.1\r\nHost: test\r\n\r\nGET \(warm) HTTP/1.1\r\nHost: test\r\n\r\nGET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"
        let answers = try await offThePool { try Self.exchange(port: port, pipelined, responses: 3) }
        #expect(answers.count == 3)
        #expect(answers[0].head.contains("X-Strata-Tier: source"), "\(answers[0].head)")
        #expect(answers[0].head.contains("X-Strata-Width: 300"))
        #expect(answers[1].head.contains("X-Strata-Width: 200"), "\(answers[1].head)")
        #expect(answers[1].body == first.body)
        #expect(String(decoding: answers[2].body, as: UTF8.self) == "ok\n")
        // Two warm requests in one write, both from the warm path, in order, with Date and Server.
        let other = "/images/jpeg/kite-800x500-gray.jpg?w=200&h=200&format=jpeg&quality=80"
        let both = try await offThePool {
            try Self.exchange(port: port, "GET \(warm) HTTP/1.1\r\nHost: t\r\n\r\nGET \(other) HTTP/1.1\r\nHost: t\r\n\r\n", responses: 2)
        }
        #expect(
            both.allSatisfy {
                $0.head.contains("X-Strata-Tier: encoded") && $0.head.contains("Date: ") && $0.head.contains("Server: strata")
            })
        #expect(both[0].body == first.body && both[1].body == first.body)
        // Counted as requests served by memory, and in the HTTP metrics.
        let metrics = try await server.get("/metrics").text
        #expect(metrics.contains(#"strata_http_images_total{tier="encoded",node="\#(server.nodeName)"} 4"#), "\(metrics)")
        try await server.stop()
    }
}
