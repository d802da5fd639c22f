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
    /// A new connection to 127.0.0.1:`port` with a receive timeout of `receiveTimeout` seconds,
    /// `bytes` sent on it; the socket closes when the caller lets it go.
    static func connectAndSend(port: Int, _ bytes: String, receiveTimeout: Int) throws -> RawSocket {
        let socket = try RawSocket(port: port, receiveTimeout: Double(receiveTimeout))
        let request = Array(bytes.utf8)
        guard socket.send(request) == request.count else { throw TestStepFailure("send: errno \(errno)") }
        return socket
    }

    /// Sends `bytes` on a new connection to 127.0.0.1:`port` and reads until `responses`
    /// HTTP responses (with Content-Length bodies) have arrived; returns them in order.
    static func exchange(port: Int, _ bytes: String, responses: Int) throws -> [(head: String, body: [UInt8])] {
        let socket = try connectAndSend(port: port, bytes, receiveTimeout: 120)
        defer { withExtendedLifetime(socket) {} }
        let fd = socket.fd
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

    /// The fields of a response head, names lowercased (repeated names joined with ", ").
    static func fields(_ head: String) -> [String: String] {
        var fields: [String: String] = [:]
        for line in head.split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            fields[name] = fields[name].map { "\($0), \(value)" } ?? value
        }
        return fields
    }

    /// `strata_http_warm_total` of the server's node.
    static func warmAnswers(_ server: TestServer) async throws -> Int {
        let prefix = #"strata_http_warm_total{node="\#(server.nodeName)"} "#
        let text = try await server.get("/metrics").text
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(prefix) }, "\(text)")
        return try #require(Int(line.dropFirst(prefix.count)))
    }

    /// The warm path's ready-made head carries exactly the fields the ordinary path sends for
    /// the same encoded-cache answer (besides the per-response `Date` and `Server-Timing`, and
    /// `Connection: close` where the client asked for it), with and without negotiation.
    @Test func warmAnswersCarryTheOrdinaryFields() async throws {
        let server = try await TestServer.start(["http.cacheControl": "public, max-age=60"])
        let port = server.port
        for target in [
            "/images/jpeg/kite-800x500-gray.jpg?w=200&h=200&format=jpeg", "/images/jpeg/eveningglow-1024x640-progressive.jpg?w=180",
        ] {
            #expect(try await server.get(target).status == 200)
            let before = try await Self.warmAnswers(server)
            // The second request asks to close the connection: Hummingbird answers it.
            let answers = try await offThePool {
                try Self.exchange(
                    port: port, "GET \(target) HTTP/1.1\r\nHost: t\r\n\r\nGET \(target) HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
                    responses: 2)
            }
            #expect(try await Self.warmAnswers(server) == before + 1, "\(target)")
            #expect(answers.allSatisfy { $0.head.hasPrefix("HTTP/1.1 200 OK\r\n") })
            let warm = Self.fields(answers[0].head)
            let ordinary = Self.fields(answers[1].head)
            let perResponse: Set = ["date", "server-timing", "connection"]
            #expect(warm.filter { !perResponse.contains($0.key) } == ordinary.filter { !perResponse.contains($0.key) }, "\(target)")
            #expect(warm["x-strata-tier"] == "encoded" && warm["cache-control"] == "public, max-age=60")
            #expect(warm["vary"] == (target.contains("format=") ? nil : "Accept"))
            #expect(warm["server-timing"]?.hasPrefix("engine;dur=") == true && warm["date"]?.hasSuffix(" GMT") == true)
            #expect(answers[0].body == answers[1].body && Int(warm["content-length"] ?? "") == answers[0].body.count)
        }
        try await server.stop()
    }

    /// What the warm path leaves to Hummingbird, answered right there: HTTP/1.0 (with and
    /// without keep-alive), a matching `If-None-Match` (304), an encoding not cached yet (WebP here);
    /// the next WebP request is then warm.
    @Test func theRestGoesTheOrdinaryWay() async throws {
        let server = try await TestServer.start()
        let port = server.port
        let target = "/images/jpeg/kite-800x500-gray.jpg?w=160"
        let first = try await server.get(target)
        let etag = try #require(first.header("ETag"))
        let before = try await Self.warmAnswers(server)
        let old = try await offThePool { try Self.exchange(port: port, "GET \(target) HTTP/1.0\r\n\r\n", responses: 1) }
        #expect(old[0].head.contains(" 200 ") && old[0].body == first.body)
        let oldKeepAlive = try await offThePool {
            try Self.exchange(port: port, "GET \(target) HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", responses: 1)
        }
        #expect(oldKeepAlive[0].head.contains(" 200 ") && oldKeepAlive[0].body == first.body)
        let notModified = try await server.get(target, headers: [("If-None-Match", etag)])
        #expect(notModified.status == 304)
        let webp = try await server.get(target, headers: [("Accept", "image/webp,*/*")])
        #expect(webp.header("Content-Type") == "image/webp" && webp.header("X-Strata-Tier") == "memory")
        #expect(try await Self.warmAnswers(server) == before)
        let again = try await server.get(target, headers: [("Accept", "image/webp,*/*")])
        #expect(again.header("X-Strata-Tier") == "encoded" && again.body == webp.body)
        #expect(try await Self.warmAnswers(server) == before + 1)
        try await server.stop()
    }

    /// A configured value that is not a legal field value (a CR LF in `http.cacheControl`)
    /// never reaches the wire as a field of its own: no ready-made head is made, and the
    /// ordinary path's HTTP types make the value legal.
    @Test func configuredTextCannotAddAField() async throws {
        let server = try await TestServer.start(["http.cacheControl": "max-age=60\r\nX-Injected: 1"])
        let port = server.port
        let target = "/images/jpeg/kite-800x500-gray.jpg?w=150&format=jpeg"
        #expect(try await server.get(target).status == 200)
        let answers = try await offThePool {
            try Self.exchange(port: port, "GET \(target) HTTP/1.1\r\nHost: t\r\n\r\n", responses: 1)
        }
        #expect(Self.fields(answers[0].head)["x-strata-tier"] == "encoded")
        #expect(Self.fields(answers[0].head)["x-injected"] == nil, "\(answers[0].head)")
        #expect(try await Self.warmAnswers(server) == 0)
        try await server.stop()
    }

    /// Many connections on both event loops asking for warm URLs at once (the memo of each
    /// loop, the shared caches and the counters under concurrent use; `Scripts/tsan.sh` runs it):
    /// every answer is the warm path's, with the bytes of its URL.
    @Test func concurrentWarmAnswersKeepTheirBytes() async throws {
        let server = try await TestServer.start()
        let port = server.port
        let targets = ["jpeg/kite-800x500-gray.jpg", "jpeg/eveningglow-1024x640-progressive.jpg", "webp/path-2560x1600.webp"].flatMap {
            key in [120, 200].map { "/images/\(key)?w=\($0)&h=\($0)&format=jpeg" }
        }
        var bodies: [String: [UInt8]] = [:]
        for target in targets { bodies[target] = try await server.get(target).body }
        let reference = bodies
        let before = try await Self.warmAnswers(server)
        let rounds = 30
        let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<8 {
                group.addTask {
                    var wrong = 0
                    for round in 0..<rounds {
                        let target = targets[(task + round) % targets.count]
                        let answer = try await get(port: port, target)
                        if answer.status != 200 || answer.header("X-Strata-Tier") != "encoded" || answer.body != reference[target] {
                            wrong += 1
                        }
                    }
                    return wrong
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(mismatches == 0)
        #expect(try await Self.warmAnswers(server) == before + 8 * rounds)
        try await server.stop()
    }

    /// Sends `bytes` on a new connection and reads until the server closes it.
    static func readToClose(port: Int, _ bytes: String) throws -> [UInt8] {
        let socket = try connectAndSend(port: port, bytes, receiveTimeout: 60)
        defer { withExtendedLifetime(socket) {} }
        let fd = socket.fd
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n >= 0 else { throw TestStepFailure("recv: errno \(errno) after \(received.count) bytes") }
            if n == 0 { return received }
            received += chunk[0..<n]
        }
    }

    /// A `HEAD` after a warm answer on the same connection (found by `FuzzWarmPath`): NIO's
    /// response encoder learns each request's method from the decoder and takes one per response
    /// to send a `HEAD`'s answer without a body; a warm answer is written below it, so its `GET`
    /// stayed queued, the `HEAD`'s answer was framed as a `GET`'s (with a body) and the next
    /// `GET`'s as a `HEAD`'s (without): the connection desynchronised. Each answer must be framed
    /// for its own request.
    @Test func aHeadAfterAWarmAnswerKeepsTheConnectionInStep() async throws {
        let server = try await TestServer.start()
        let port = server.port
        let target = "/images/jpeg/kite-800x500-gray.jpg?w=120&h=120&format=jpeg"
        let first = try await server.get(target)
        #expect(first.status == 200)
        let before = try await Self.warmAnswers(server)
        let bytes = try await offThePool {
            try Self.readToClose(
                port: port,
                "GET \(target) HTTP/1.1\r\nHost: t\r\n\r\nHEAD \(target) HTTP/1.1\r\nHost: t\r\n\r\n"
                    + "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        }
        #expect(try await Self.warmAnswers(server) == before + 1)
        // Three responses: the warm GET's with its body, the HEAD's without one, /healthz's.
        var rest = bytes[...]
        var answers: [(head: String, body: [UInt8])] = []
        for hasBody in [true, false, true] {
            let end = try #require(rest.firstRange(of: Array("\r\n\r\n".utf8)), "\(String(decoding: bytes, as: UTF8.self))")
            let head = String(decoding: rest[..<end.lowerBound], as: UTF8.self)
            let length = hasBody ? try #require(Self.fields(head + "\r\n")["content-length"].flatMap { Int($0) }) : 0
            try #require(rest.count - (end.upperBound - rest.startIndex) >= length, "\(String(decoding: bytes, as: UTF8.self))")
            answers.append((head, Array(rest[end.upperBound..<(end.upperBound + length)])))
            rest = rest[(end.upperBound + length)...]
        }
        #expect(rest.isEmpty, "left over: \(String(decoding: rest, as: UTF8.self))")
        #expect(answers[0].head.contains("X-Strata-Tier: encoded") && answers[0].body == first.body)
        // HEAD is answered as GET is, without the body.
        #expect(answers[1].head.hasPrefix("HTTP/1.1 200 "), "\(answers[1].head)")
        #expect(String(decoding: answers[2].body, as: UTF8.self) == "ok\n", "\(String(decoding: bytes, as: UTF8.self))")
        try await server.stop()
    }
}
