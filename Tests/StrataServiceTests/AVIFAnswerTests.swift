import Foundation
import NIOPosix
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// AVIF answers (`format=avif`, IIIF `.avif`, negotiated from `Accept`) and coalesced encodes:
/// concurrent requests for one encoding share one encode, on the engine's threads.
@Suite("AVIF answers", .timeLimit(.minutes(5)))
struct AVIFAnswerTests {
    /// A counter in the server's `/metrics` text (`name{labels,node="…"} value`); 0 when absent.
    static func metric(_ server: TestServer, _ name: String, _ labels: String = "") async throws -> Int {
        let prefix = "\(name){\(labels.isEmpty ? "" : labels + ",")node=\"\(server.nodeName)\"} "
        let text = try await server.get("/metrics").text
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return 0 }
        let value = try #require(Double(line.dropFirst(prefix.count)), "\(line)")
        return Int(value)
    }

    @Test func formatAVIFAnswersAnAVIFOfTheVariant() async throws {
        let server = try await TestServer.start(disk: false)
        let answer = try await server.get("/images/jpeg/eveningglow-1024x640-progressive.jpg?w=320&format=avif")
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "image/avif")
        #expect(answer.header("Vary") == nil, "format= named: nothing negotiated")
        let quality = server.server.settings.avifQuality, speed = server.server.settings.avifSpeed
        #expect(answer.header("ETag")?.hasSuffix("-avif-q\(quality)-s\(speed)\"") == true, "\(answer.header("ETag") ?? "")")
        #expect(ImageFormatDetector.detect(answer.body) == .avif)
        let decoded = try AVIFReference.decode(answer.body)
        #expect(decoded.size == PixelSize(width: 320, height: 200))
        #expect(try AVIFReference.info(answer.body)["Format"] == "YUV420")
        // quality= names another encoding; the cached one answers the same URL again.
        let finer = try await server.get("/images/jpeg/eveningglow-1024x640-progressive.jpg?w=320&format=avif&quality=90")
        #expect(finer.header("ETag")?.hasSuffix("-avif-q90-s\(speed)\"") == true)
        #expect(finer.body.count > answer.body.count)
        let again = try await server.get("/images/jpeg/eveningglow-1024x640-progressive.jpg?w=320&format=avif")
        #expect(again.header("X-Strata-Tier") == "encoded" && again.body == answer.body)
        try await server.stop()
    }

    @Test func iiifAnswersAVIF() async throws {
        let server = try await TestServer.start(disk: false)
        let answer = try await server.get("/iiif/3/jpeg%2Fkite-800x500-gray.jpg/full/200,/0/default.avif")
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "image/avif")
        #expect(
            answer.header("ETag")?.contains("-avif-q\(server.server.settings.avifQuality)-s\(server.server.settings.avifSpeed)-3/") == true)
        #expect(try AVIFReference.decode(answer.body).size == PixelSize(width: 200, height: 125))
        let gray = try await server.get("/iiif/2/jpeg%2Fkite-800x500-gray.jpg/full/100,/0/gray.avif")
        #expect(gray.status == 200 && gray.header("Content-Type") == "image/avif")
        #expect(try AVIFReference.decode(gray.body).size == PixelSize(width: 100, height: 63))
        let info = try await server.get("/iiif/2/jpeg%2Fkite-800x500-gray.jpg/info.json").text
        #expect(info.contains("\"avif\""))
        try await server.stop()
    }

    /// 20 requests for one AVIF answer, none cached: one encode, which the 19 others wait for,
    /// run on the engine's threads; the encoded cache holds it once and the warm path answers
    /// the next request for it.
    @Test func twentyConcurrentColdRequestsShareOneEncode() async throws {
        let counts = Lock((starting: 0, running: 0, onEventLoop: 0))
        let gate = Gate()
        let probes = ServiceProbes(
            encodeStarting: {
                counts.withLock { $0.starting += 1 }
                _ = await gate.wait()
            },
            encodeRunning: {
                let onLoop = MultiThreadedEventLoopGroup.currentEventLoop != nil
                counts.withLock {
                    $0.running += 1
                    if onLoop { $0.onEventLoop += 1 }
                }
            })
        let server = try await TestServer.start(disk: false, probes: probes)
        let target = "/images/jpeg/fallenleaf-2048x1280-420.jpg?w=400&h=400"
        let accept = [("Accept", "image/avif,image/webp,image/apng,image/*,*/*;q=0.8")]
        let requests = Task {
            try await withThrowingTaskGroup(of: Answer.self) { group in
                for _ in 0..<20 { group.addTask { try await server.get(target, headers: accept) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        // Held at its start, the one encode gathers the 20 requests; a second encode starting
        // would end the wait too, and fail below.
        let gathered = await eventually {
            server.server.encodes.waitingCallCount == 20 || counts.withLock { $0.starting } > 1
        }
        gate.open()
        let answers = try await requests.value
        #expect(gathered)
        #expect(counts.withLock { $0.starting } == 1)
        #expect(counts.withLock { $0.running } == 1)
        #expect(counts.withLock { $0.onEventLoop } == 0, "the encode ran on an event loop")
        #expect(answers.count == 20)
        #expect(answers.allSatisfy { $0.status == 200 && $0.header("Content-Type") == "image/avif" && $0.header("Vary") == "Accept" })
        #expect(Set(answers.map(\.body)).count == 1, "one encode's bytes")
        #expect(Set(answers.compactMap { $0.header("ETag") }).count == 1)
        #expect(try await Self.metric(server, "strata_http_encodes_total", #"format="avif""#) == 1)
        #expect(try await Self.metric(server, "strata_http_encodes_joined_total") == 19)
        #expect(server.encodedEntries == 1, "the encoded cache admitted it once")
        #expect(server.server.encodes.operationCount == 0)
        // The next request for it is answered by the warm path, on the event loop.
        let warmBefore = try await WarmPathTests.warmAnswers(server)
        let port = server.port
        let warm = try await offThePool {
            try WarmPathTests.exchange(
                port: port, "GET \(target) HTTP/1.1\r\nHost: t\r\nAccept: image/avif,image/webp\r\n\r\n", responses: 1)
        }
        #expect(try await WarmPathTests.warmAnswers(server) == warmBefore + 1)
        #expect(warm[0].head.contains("Content-Type: image/avif") && warm[0].head.contains("Vary: Accept"), "\(warm[0].head)")
        #expect(warm[0].body == answers[0].body)
        #expect(try await Self.metric(server, "strata_http_encodes_total", #"format="avif""#) == 1)
        try await server.stop()
    }

    /// Requests for different encodings of one variant do not wait for each other's encode.
    @Test func differentEncodingsAreNotJoined() async throws {
        let server = try await TestServer.start(disk: false)
        let base = "/images/jpeg/kite-800x500-gray.jpg?w=240"
        async let avif = server.get(base + "&format=avif")
        async let jpeg = server.get(base + "&format=jpeg")
        async let finer = server.get(base + "&format=avif&quality=90")
        let answers = try await [avif, jpeg, finer]
        #expect(answers.map { $0.header("Content-Type") } == ["image/avif", "image/jpeg", "image/avif"])
        #expect(try await Self.metric(server, "strata_http_encodes_total", #"format="avif""#) == 2)
        #expect(try await Self.metric(server, "strata_http_encodes_total", #"format="jpeg""#) == 1)
        #expect(try await Self.metric(server, "strata_http_encodes_joined_total") == 0)
        try await server.stop()
    }
}
