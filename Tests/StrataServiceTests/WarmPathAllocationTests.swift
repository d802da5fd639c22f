import CStrataMallocCounter
import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import StrataFuzzing
import StrataTestSupport
import Testing

/// The allocations of a warm answer (issue 50): keep-alive `GET`s of one URL whose encoding is
/// cached, through a connection's whole pipeline as `strata serve` sets it up (NIO's HTTP/1
/// decoder, the warm path, its output), on an `EmbeddedChannel` driven by one thread, whose
/// `malloc` calls are counted (`CStrataMallocCounter`: the test bundle's own `malloc`, or under a
/// sanitizer its allocator's hook), against the same requests answered by a bare NIO server on
/// the same embedding (``bareNIO()``): the difference is what Strata's warm path adds to NIO's
/// own decoding and encoding. `Scripts/bench-warm-allocations.sh` counts the same in a release
/// `strata serve`.
@Suite("Warm path allocations")
struct WarmPathAllocationTests {
    /// Today's allocations per warm answer above a bare NIO answer (the `Date` field's format,
    /// once a second, included), per build: the test fails above it; lower it when a change
    /// removes some. CI's address-sanitizer build (Scripts/asan.sh: optimized, `assert`s kept)
    /// counts more than a plain release build (the instrumentation and the kept checks leave the
    /// optimizer less to remove), and so does its bare NIO answer. In a release
    /// `strata serve`, Scripts/bench-warm-allocations.sh counts as many as strata-floor's
    /// `--mode bytes` and three fewer than its `--mode headers`, which ``bareNIO()`` is written
    /// like.
    #if DEBUG
    static let ceiling = 4.5
    static let iiifCeiling = 3.5
    #elseif STRATA_ADDRESS_SANITIZER
    static let ceiling = 9.5
    static let iiifCeiling = 20.5
    #else
    static let ceiling = 0.5
    /// Not measured in a plain release build of the tests (no script makes one): the debug
    /// build's figure stands until it is.
    static let iiifCeiling = 3.5
    #endif

    static let hits = 2_000

    /// Forwards what NIO's decoder produced (where the fuzz harness records it).
    final class PassThrough: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPServerRequestPart
        typealias InboundOut = HTTPServerRequestPart
        func channelRead(context: ChannelHandlerContext, data: NIOAny) { context.fireChannelRead(data) }
    }

    /// Allocations per request of ``hits`` requests fed to `channel` (after a warm-up of 100):
    /// what feeding one request and draining its answer allocates, counted around those two
    /// steps only (the check of the answer, `answered`, is not counted). Expects every request to
    /// be answered.
    static func allocationsPerRequest(_ channel: EmbeddedChannel, request: ByteBuffer, answered: ([UInt8]) -> Bool) throws -> Double {
        var parts: [IOData] = []
        parts.reserveCapacity(16)
        func once() throws -> (allocations: UInt64, answered: Bool) {
            parts.removeAll(keepingCapacity: true)
            strata_malloc_counter_start()
            try channel.writeInbound(request)
            while let part = try channel.readOutbound(as: IOData.self) { parts.append(part) }
            let allocations = strata_malloc_counter_stop()
            var bytes: [UInt8] = []
            for part in parts {
                guard case .byteBuffer(let buffer) = part else { return (allocations, false) }
                bytes += buffer.readableBytesView
            }
            return (allocations, answered(bytes))
        }
        for _ in 0..<100 { #expect(try once().answered) }
        var ok = true
        var counted: UInt64 = 0
        for _ in 0..<hits {
            let (allocations, answered) = try once()
            counted += allocations
            ok = ok && answered
        }
        #expect(ok, "a request was not answered")
        return Double(counted) / Double(hits)
    }

    @Test(.enabled(if: strata_malloc_counter_available() != 0, "this sanitizer's allocator took no hook"))
    func aWarmAnswerAllocatesNoMoreThanToday() async throws {
        try await Self.check(target: ServiceFuzzing.WarmPath.targets[0], ceiling: Self.ceiling)
    }

    /// A IIIF tile's warm answer (an escaped identifier, version 2.1): the route's path is parsed,
    /// its region and size resolved and its canonical URI and `Link` written for every request
    /// (its ceiling: ``iiifCeiling``).
    @Test(.enabled(if: strata_malloc_counter_available() != 0, "this sanitizer's allocator took no hook"))
    func aWarmIIIFTileAllocatesNoMoreThanToday() async throws {
        try await Self.check(target: ServiceFuzzing.WarmPath.iiifTargets[1], ceiling: Self.iiifCeiling)
    }

    /// Counts warm answers to `target` (its encoding cached by the fixture) against a bare NIO
    /// answer, and fails when the difference is above `ceiling`.
    static func check(target: String, ceiling: Double) async throws {
        let (warm, floor) = try await offThePool { () throws -> (Double, Double) in
            let fixture = ServiceFuzzing.WarmPath()
            let channel = EmbeddedChannel(loop: EmbeddedEventLoop())
            try fixture.addHandlers(to: channel, between: PassThrough())
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
            let request = channel.allocator.buffer(string: "GET \(target) HTTP/1.1\r\nHost: strata\r\nAccept: */*\r\n\r\n")
            let warm = try Self.allocationsPerRequest(channel, request: request) { bytes in
                bytes.starts(with: Array("HTTP/1.1 200 OK\r\n".utf8))
                    && String(decoding: bytes, as: UTF8.self).contains("X-Strata-Tier: encoded")
            }
            _ = try channel.finish()
            return (warm, try Self.bareNIO())
        }
        let own = warm - floor
        print("\(target): \(warm) allocations per request; a bare NIO answer: \(floor); Strata's own: \(own)")
        #expect(
            own <= ceiling,
            "Strata's warm answer to \(target) allocates \(own) more than a bare NIO answer (\(warm) against \(floor)), above today's \(ceiling)"
        )
    }

    /// The same requests answered by a bare NIO HTTP/1.1 server on the same embedding: NIO's
    /// server pipeline as the warm path's fixture configures it, and a handler that writes a
    /// ready head (the fields of a warm answer) and body for every request, as
    /// `Benchmarks/Sources/strata-floor` does over sockets.
    static func bareNIO() throws -> Double {
        final class Floor: ChannelInboundHandler {
            typealias InboundIn = HTTPServerRequestPart
            typealias OutboundOut = HTTPServerResponsePart
            let body = ByteBuffer(string: String(repeating: "x", count: 64))
            let fields: [(String, String)] = [
                ("Content-Type", "image/jpeg"), ("ETag", "\"0123456789abcdef\""), ("Cache-Control", "public, max-age=31536000"),
                ("Vary", "Accept"), ("X-Strata-Tier", "encoded"), ("X-Strata-Width", "32"), ("X-Strata-Height", "24"),
                ("Content-Length", "64"), ("Date", "Sun, 29 Nov 2026 20:00:00 GMT"),
            ]
            func channelRead(context: ChannelHandlerContext, data: NIOAny) {
                guard case .head(let request) = unwrapInboundIn(data) else { return }
                let head = HTTPResponseHead(version: request.version, status: .ok, headers: HTTPHeaders(fields))
                context.write(wrapOutboundOut(.head(head)), promise: nil)
                context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
        let channel = EmbeddedChannel(loop: EmbeddedEventLoop())
        try channel.pipeline.syncOperations.configureHTTPServerPipeline(
            withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false,
            withEncoderConfiguration: .init(), withDecoderLimitConfiguration: .init())
        try channel.pipeline.syncOperations.addHandler(Floor())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 8080)).wait()
        let request = channel.allocator.buffer(
            string: "GET \(ServiceFuzzing.WarmPath.targets[0]) HTTP/1.1\r\nHost: strata\r\nAccept: */*\r\n\r\n")
        defer { _ = try? channel.finish() }
        return try allocationsPerRequest(channel, request: request) { $0.starts(with: Array("HTTP/1.1 200 OK\r\n".utf8)) }
    }
}
