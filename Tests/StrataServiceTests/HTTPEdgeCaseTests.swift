import Foundation
import Testing

@testable import StrataService

#if canImport(Glibc)
import Glibc
#endif

/// Raw HTTP/1 edge cases sent to nginx (the reference) and to the service, on a warm key and a
/// cold one: the service refuses what nginx refuses (or differs as docs/HTTP.md's "HTTP edge
/// cases" table says), never answers a request with another's bytes and never desynchronises
/// a pipeline.
@Suite("HTTP edge cases against nginx", .timeLimit(.minutes(5)))
struct HTTPEdgeCaseTests {
    /// How a server took a case: the statuses of the answers in order, and whether it closed.
    struct Outcome: CustomStringConvertible {
        var statuses: [Int]
        var closed: Bool

        /// Accepted: the first answer is 2xx; refused: a 4xx/5xx answer or none.
        var accepted: Bool { statuses.first.map { (200..<300).contains($0) } ?? false }
        var description: String {
            (statuses.isEmpty ? "no answer" : statuses.map(String.init).joined(separator: ",")) + (closed ? ", closed" : "")
        }
    }

    /// One case: its bytes for a target; how many answers a server that accepts it gives;
    /// which requests are HEAD; whether the socket is half-closed after sending; and whether
    /// the service accepts it (`nil`: as nginx does).
    struct Case: Sendable {
        var name: String
        var answers = 1
        var heads: Set<Int> = []
        var halfClose = false
        var strataAccepts: Bool?
        var bytes: @Sendable (String) -> [UInt8]

        init(
            _ name: String, answers: Int = 1, heads: Set<Int> = [], halfClose: Bool = false, strataAccepts: Bool? = nil,
            _ bytes: @escaping @Sendable (String) -> String
        ) {
            self.name = name
            self.answers = answers
            self.heads = heads
            self.halfClose = halfClose
            self.strataAccepts = strataAccepts
            self.bytes = { Array(bytes($0).utf8) }
        }
    }

    static let padding = String(repeating: "a", count: 100_000)

    static let cases: [Case] = [
        Case("Content-Length with Transfer-Encoding") {
            "GET \($0) HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
        },
        Case("duplicate Content-Length, same value") { "GET \($0) HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 0\r\n\r\n" },
        Case("duplicate Content-Length, different values") {
            "GET \($0) HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n"
        },
        Case("obs-fold") { "GET \($0) HTTP/1.1\r\nHost: x\r\nX-Folded: a\r\n b\r\n\r\n" },
        Case("bare LF line ends", strataAccepts: false) { "GET \($0) HTTP/1.1\nHost: x\n\n" },
        Case("NUL in the target") { "GET \($0)\u{0}x HTTP/1.1\r\nHost: x\r\n\r\n" },
        Case("absolute-form target") { "GET http://x\($0) HTTP/1.1\r\nHost: x\r\n\r\n" },
        Case("target of 100 KB") { "GET \($0)&pad=\(padding) HTTP/1.1\r\nHost: x\r\n\r\n" },
        Case("header of 100 KB") { "GET \($0) HTTP/1.1\r\nHost: x\r\nX-Long: \(padding)\r\n\r\n" },
        Case("HTTP/1.0") { "GET \($0) HTTP/1.0\r\n\r\n" },
        Case("HTTP/1.0 keep-alive, twice", answers: 2) {
            "GET \($0) HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET \($0) HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
        },
        Case("Connection: close, then another request") {
            "GET \($0) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET \($0) HTTP/1.1\r\nHost: x\r\n\r\n"
        },
        Case("Expect: 100-continue without a body") { "GET \($0) HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n" },
        Case("HEAD, then GET", answers: 2, heads: [0]) { "HEAD \($0) HTTP/1.1\r\nHost: x\r\n\r\nGET \($0) HTTP/1.1\r\nHost: x\r\n\r\n" },
        Case("GET with a body, then GET", answers: 2) {
            "GET \($0) HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nabcdGET \($0) HTTP/1.1\r\nHost: x\r\n\r\n"
        },
        Case("half-closed after the request", halfClose: true) { "GET \($0) HTTP/1.1\r\nHost: x\r\n\r\n" },
    ]

    /// Sends `bytes` on a new connection to `port` and reads what comes.
    static func send(_ bytes: [UInt8], to port: Int, answers: Int, heads: Set<Int>, halfClose: Bool) throws -> (Outcome, [RawResponse]) {
        let socket = try RawSocket(port: port, receiveTimeout: 30)
        socket.send(bytes)
        if halfClose { socket.shutdownWrite() }
        let read = socket.responses(answers, headRequests: heads)
        // After the answers: closed at once, or kept open (a short wait).
        var closed = read.closed
        if !closed {
            // Up to 2 s for the close (a loaded machine may take a while to get there).
            socket.setReceiveTimeout(2)
            closed = socket.waitForClose()
        }
        return (Outcome(statuses: read.answers.map(\.status), closed: closed), read.answers)
    }

    /// The width of case `index`'s cold request: one no other request asks for.
    static func coldWidth(_ index: Int) -> Int { 40 + index }

    /// `send` of `edge` for `target` to `port`, on a thread of its own.
    static func sendOffThePool(_ edge: Case, _ target: String, to port: Int) async throws -> (Outcome, [RawResponse]) {
        try await offThePool {
            try Self.send(edge.bytes(target), to: port, answers: edge.answers, heads: edge.heads, halfClose: edge.halfClose)
        }
    }

    @Test func edgeCasesAgainstNginx() async throws {
        guard let nginx = try await ReferenceNginx.start() else {
            Issue.record("nginx is not installed (apt-get install nginx)")
            return
        }
        defer { nginx.stop() }
        let server = try await TestServer.start(["http.headerTimeout": "10s", "http.idleTimeout": "10s"])
        let warm = "/images/jpeg/kite-800x500-gray.jpg?w=120&h=120&format=jpeg"
        let warmBytes = try await server.get(warm).body
        #expect(try await server.get(warm).header("X-Strata-Tier") == "encoded")
        let original = Array(try Data(contentsOf: URL(fileURLWithPath: fixturesDirectory + "/jpeg/kite-800x500-gray.jpg")))
        var table: [String] = ["| case | nginx | strata, warm | strata, cold |", "|---|---|---|---|"]
        // Every case on its own connections at once (48 sockets: each case to nginx and to the
        // service, warm and cold): a connection kept open costs a 2 s wait for its close, and
        // one after another those waits were most of this test's time. A cold key per case
        // (`coldWidth`).
        typealias Sent = (Outcome, [RawResponse])
        let (nginxPort, strataPort) = (nginx.port, server.port)
        let sent = try await withThrowingTaskGroup(of: (Int, Sent, Sent, Sent).self) { group in
            for (index, edge) in Self.cases.enumerated() {
                group.addTask {
                    let cold = "/images/jpeg/kite-800x500-gray.jpg?w=\(Self.coldWidth(index))&format=jpeg&tolerance=0"
                    async let reference = Self.sendOffThePool(edge, warm, to: nginxPort)
                    async let warmSent = Self.sendOffThePool(edge, warm, to: strataPort)
                    async let coldSent = Self.sendOffThePool(edge, cold, to: strataPort)
                    return (index, try await reference, try await warmSent, try await coldSent)
                }
            }
            var byCase = [Int: (Sent, Sent, Sent)]()
            for try await (index, reference, warmSent, coldSent) in group { byCase[index] = (reference, warmSent, coldSent) }
            return byCase
        }
        for (index, edge) in Self.cases.enumerated() {
            let width = Self.coldWidth(index)
            let ((reference, referenceAnswers), warmSent, coldSent) = try #require(sent[index])
            var row = "| \(edge.name) | \(reference) |"
            for ((outcome, answers), isWarm) in [(warmSent, true), (coldSent, false)] {
                row += " \(outcome) |"
                let expected = edge.strataAccepts ?? reference.accepted
                #expect(outcome.accepted == expected, "\(edge.name), \(isWarm ? "warm" : "cold"): \(outcome); nginx: \(reference)")
                #expect(outcome.statuses.count == referenceAnswers.count || !expected, "\(edge.name): \(outcome); nginx: \(reference)")
                // Closes the connection where nginx does (HTTP/1.0, `Connection: close`, a refusal).
                #expect(outcome.closed == reference.closed || edge.strataAccepts != nil, "\(edge.name): \(outcome); nginx: \(reference)")
                // Every 200 to a GET carries that GET's image.
                for (position, answer) in answers.enumerated() where answer.status == 200 && !edge.heads.contains(position) {
                    if isWarm {
                        #expect(answer.body == warmBytes, "\(edge.name): answer \(position) is not the warm image")
                    } else {
                        #expect(answer.header("X-Strata-Width") == "\(width)", "\(edge.name): answer \(position): \(answer.head)")
                    }
                }
            }
            for (position, answer) in referenceAnswers.enumerated() where answer.status == 200 && !edge.heads.contains(position) {
                #expect(answer.body == original, "nginx, \(edge.name): answer \(position)")
            }
            table.append(row)
        }
        print(table.joined(separator: "\n"))
        if let path = ProcessInfo.processInfo.environment["STRATA_EDGE_TABLE"] {
            try table.joined(separator: "\n").write(toFile: path, atomically: true, encoding: .utf8)
        }
        try await server.stop()
    }

    /// A pipelined burst of warm, cold and HEAD requests, then a malformed one, then one more:
    /// the answers before the malformed request come in order, each with its own bytes; the
    /// malformed one gets 400 and the connection closes (nginx: the same).
    @Test func pipelinedBurstWithAMalformedRequest() async throws {
        let server = try await TestServer.start(["http.headerTimeout": "10s", "http.idleTimeout": "10s"])
        let warm = "/images/jpeg/kite-800x500-gray.jpg?w=120&h=120&format=jpeg"
        let warmBytes = try await server.get(warm).body
        #expect(try await server.get(warm).header("X-Strata-Tier") == "encoded")
        let cold = { (width: Int) in "/images/jpeg/kite-800x500-gray.jpg?w=\(width)&format=jpeg&tolerance=0" }
        let requests = [
            "GET \(warm) HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET \(cold(31)) HTTP/1.1\r\nHost: x\r\n\r\n",
            "HEAD \(warm) HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET \(warm) HTTP/1.1\r\nHost: x\r\n\r\n",
            "HEAD \(cold(32)) HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET \(cold(33)) HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET \(warm) HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET \(warm) HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n",
            "GET \(warm) HTTP/1.1\r\nHost: x\r\n\r\n",
        ]
        let port = server.port
        for split in [false, true] {
            let (outcome, answers) = try await offThePool {
                let socket = try RawSocket(port: port, receiveTimeout: 60)
                if split {
                    // Byte by byte in a few writes: request boundaries fall mid-write.
                    let bytes = Array(requests.joined().utf8)
                    for start in stride(from: 0, to: bytes.count, by: 37) {
                        socket.send(Array(bytes[start..<min(start + 37, bytes.count)]))
                    }
                } else {
                    socket.send(requests.joined())
                }
                let read = socket.responses(10, headRequests: [2, 4])
                return (Outcome(statuses: read.answers.map(\.status), closed: read.closed || socket.waitForClose()), read.answers)
            }
            #expect(outcome.statuses == [200, 200, 200, 200, 200, 200, 200, 200, 400], "\(outcome)")
            #expect(outcome.closed)
            guard answers.count >= 8 else { continue }
            #expect(answers[0].body == warmBytes && answers[3].body == warmBytes && answers[7].body == warmBytes)
            #expect(answers[1].header("X-Strata-Width") == "31" && answers[6].header("X-Strata-Width") == "33")
            #expect(answers[2].body.isEmpty && answers[4].body.isEmpty && answers[4].header("X-Strata-Width") == "32")
            #expect(String(decoding: answers[5].body, as: UTF8.self) == "ok\n")
        }
        try await server.stop()
    }
}
