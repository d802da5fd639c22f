import Foundation
import Strata
import Testing

@testable import StrataService

/// A request the warm path parsed and passed on is not parsed again by the ordinary path: its
/// checked target (or its refusal) is handed over.
@Suite("Parse once", .timeLimit(.minutes(5)))
struct ParseOnceTests {
    @Test func aColdRequestParsesItsTargetOnce() async throws {
        let parses = Lock([String: Int]())
        let probes = ServiceProbes(targetParsed: { target in parses.withLock { $0[String(target), default: 0] += 1 } })
        let server = try await TestServer.start(disk: false, probes: probes)
        let cold = "/images/jpeg/kite-800x500-gray.jpg?w=140&format=jpeg"
        let answer = try await server.get(cold)
        #expect(answer.status == 200 && answer.header("X-Strata-Tier") == "source")
        #expect(parses.withLock { $0[cold] } == 1)
        // A refused target is parsed once too, and refused with its message.
        let bad = "/images/jpeg/kite-800x500-gray.jpg?w=0"
        let refused = try await server.get(bad)
        #expect(refused.status == 400 && refused.errorCode == "bad_parameter")
        #expect(parses.withLock { $0[bad] } == 1)
        // Another encoding of a variant memory holds: the ordinary path encodes it, parsed once.
        let other = "/images/jpeg/kite-800x500-gray.jpg?w=140&format=png"
        #expect(try await server.get(other).header("X-Strata-Tier") == "memory")
        #expect(parses.withLock { $0[other] } == 1)
        try await server.stop()
    }

    /// The memory tier's lookups (hits and misses) that answering `target` took; the answer
    /// must be a 200 from `tier`.
    static func memoryLookups(
        of server: TestServer, _ target: String, headers: [(String, String)], tier: String
    ) async throws -> UInt64 {
        func lookups() -> UInt64 {
            let memory = server.cache.statistics.memory
            return (memory?.hits ?? 0) + (memory?.misses ?? 0)
        }
        let before = lookups()
        let answer = try await server.get(target, headers: headers)
        let served = answer.header("X-Strata-Tier") ?? "-"
        #expect(answer.status == 200 && served == tier, "\(target): \(answer.status) \(served)")
        return lookups() - before
    }

    /// The warm path's memory lookup goes with the request it passes on: every request asks
    /// the memory tier once — a cold one (the warm path's miss), another encoding of a variant
    /// memory holds (its hit), a warm answer, and one the warm path leaves alone.
    @Test func everyRequestAsksMemoryOnce() async throws {
        let server = try await TestServer.start(disk: false)
        func asked(_ target: String, headers: [(String, String)] = [], tier: String) async throws -> UInt64 {
            try await Self.memoryLookups(of: server, target, headers: headers, tier: tier)
        }
        let jpeg = "/images/jpeg/kite-800x500-gray.jpg?w=150&format=jpeg"
        #expect(try await asked(jpeg, tier: "source") == 1)
        #expect(try await asked("/images/jpeg/kite-800x500-gray.jpg?w=150&format=png", tier: "memory") == 1)
        #expect(try await asked(jpeg, tier: "encoded") == 1)
        // `Connection: close`: the warm path leaves it to the route, which asks once itself.
        let other = "/images/jpeg/kite-800x500-gray.jpg?w=150&format=webp"
        #expect(try await asked(other, headers: [("Connection", "close")], tier: "memory") == 1)
        try await server.stop()
    }

    /// A IIIF image request asks memory once too: the warm path's lookup goes with the request
    /// it passes on (a tile of a level memory holds, cut and encoded by the route), a warm tile
    /// asks once, and one the warm path leaves alone (`Connection: close`) asks in the route.
    @Test func everyIIIFRequestAsksMemoryOnce() async throws {
        let server = try await TestServer.start(disk: false)
        func asked(_ target: String, headers: [(String, String)] = [], tier: String) async throws -> UInt64 {
            try await Self.memoryLookups(of: server, target, headers: headers, tier: tier)
        }
        let id = "/iiif/3/jpeg%2Fkite-800x500-gray.jpg"
        // The first asks for the original's size (no memory lookup on the warm path), then renders.
        #expect(try await asked("\(id)/0,0,400,250/200,/0/default.jpg", tier: "source") == 1)
        #expect(try await asked("\(id)/400,0,400,250/200,/0/default.jpg", tier: "memory") == 1)
        #expect(try await asked("\(id)/400,0,400,250/200,/0/default.jpg", tier: "encoded") == 1)
        #expect(
            try await asked("\(id)/400,250,400,250/200,/0/default.jpg", headers: [("Connection", "close")], tier: "memory") == 1)
        try await server.stop()
    }

    /// Pipelined requests on one connection: the first is parsed by the warm path and handed
    /// over; those behind it, which the warm path leaves alone while Hummingbird answers, by
    /// the route. Each target once, each answer its own.
    @Test func pipelinedColdRequestsAreParsedOnceEach() async throws {
        let parses = Lock([String: Int]())
        let probes = ServiceProbes(targetParsed: { target in parses.withLock { $0[String(target), default: 0] += 1 } })
        let server = try await TestServer.start(disk: false, probes: probes)
        let port = server.port
        let targets = [
            "/images/jpeg/kite-800x500-gray.jpg?w=130&format=jpeg", "/images/jpeg/eveningglow-1024x640-progressive.jpg?w=130&format=jpeg",
            "/images/jpeg/kite-800x500-gray.jpg?w=0",
        ]
        let pipelined = targets.map { "GET \($0) HTTP/1.1\r\nHost: t\r\n\r\n" }.joined()
        let answers = try await offThePool { try WarmPathTests.exchange(port: port, pipelined, responses: 3) }
        #expect(answers[0].head.hasPrefix("HTTP/1.1 200") && answers[0].head.contains("X-Strata-Width: 130"), "\(answers[0].head)")
        #expect(answers[1].head.hasPrefix("HTTP/1.1 200") && answers[1].head.contains("X-Strata-Width: 130"), "\(answers[1].head)")
        #expect(answers[2].head.hasPrefix("HTTP/1.1 400"), "\(answers[2].head)")
        for target in targets { #expect(parses.withLock { $0[target] } == 1, "\(target)") }
        try await server.stop()
    }

    /// The hand-off gives a parse only to a request of its target, in order, once; entries
    /// before the one taken (never taken) go, entries after it stay; it holds at most its
    /// capacity.
    @Test func theHandOffGivesAParseOnlyToItsTarget() throws {
        let refusal = ServiceError.badParameter("test")
        let handOff = PreparedHandOff()
        handOff.put(.images(.failure(refusal)), for: "/images/a?w=1")
        handOff.put(.images(.failure(refusal)), for: "/images/b?w=1")
        handOff.put(.images(.failure(refusal)), for: "/images/c?w=1")
        #expect(handOff.take(for: "/images/other?w=1") == nil)
        #expect(handOff.count == 3)
        #expect(handOff.take(for: "/images/b?w=1") != nil)
        #expect(handOff.count == 1)
        #expect(handOff.take(for: "/images/a?w=1") == nil)
        #expect(handOff.take(for: "/images/c?w=1") != nil)
        #expect(handOff.take(for: "/images/c?w=1") == nil)
        for index in 0...PreparedHandOff.capacity { handOff.put(.images(.failure(refusal)), for: "/images/\(index)?w=1") }
        #expect(handOff.count == PreparedHandOff.capacity)
        #expect(handOff.take(for: "/images/0?w=1") == nil)
        #expect(handOff.take(for: "/images/\(PreparedHandOff.capacity)?w=1") != nil)
    }

    /// `dpr` multiplies the box: the answer is the variant of the larger box, and says its ratio
    /// in `Content-DPR` on the ordinary path and on the warm path alike.
    @Test func dprAnswersCarryContentDPR() async throws {
        let server = try await TestServer.start(disk: false)
        let target = "/images/jpeg/kite-800x500-gray.jpg?w=150&dpr=2&format=jpeg"
        for tier in ["source", "encoded"] {
            let answer = try await server.get(target)
            #expect(answer.status == 200 && answer.header("X-Strata-Tier") == tier)
            #expect(answer.header("Content-DPR") == "2" && answer.header("X-Strata-Width") == "300", "\(answer.headers)")
        }
        // The same variant as w=300: served warm, without Content-DPR.
        let plain = try await server.get("/images/jpeg/kite-800x500-gray.jpg?w=300&format=jpeg")
        #expect(plain.header("X-Strata-Tier") == "encoded" && plain.header("Content-DPR") == nil)
        try await server.stop()
    }
}
