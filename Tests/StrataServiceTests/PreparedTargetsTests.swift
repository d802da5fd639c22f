import Strata
import Testing

@testable import StrataService

extension Result {
    /// The success, `nil` for a failure.
    fileprivate var accepted: Success? { try? get() }
}

/// The warm path's per-loop memo of checked targets keeps only what `prepare` accepts, answers
/// as `prepare` does, and stays within its capacity.
@Suite("Prepared targets", .timeLimit(.minutes(5)))
struct PreparedTargetsTests {
    @Test func rememberedTargetsAreCheckedOnesOnly() async throws {
        let server = try await TestServer.start(["http.maxDimension": "1000"])
        let responder = EncodedResponder(
            cache: server.cache, encoded: server.server.encoded, settings: server.server.settings, metrics: ServiceMetrics(node: "test"),
            probes: ServiceProbes())
        let plain = ImageEndpoint(
            cache: server.cache, encoded: server.server.encoded, settings: server.server.settings, signer: nil,
            responder: responder)
        let memo = PreparedTargets(capacity: 3)
        let a = "/images/jpeg/a.jpg?w=10&format=webp"
        let remembered = try #require(memo.prepared(a, by: plain).accepted)
        #expect(remembered.parameters == (try plain.prepare(target: Substring(a))).parameters)
        #expect(remembered.request.key.string == "jpeg/a.jpg" && memo.count == 1)
        // Refused targets are not kept, and stay refused.
        for refused in ["/images/a.jpg?w=5000", "/images/../x.jpg?w=5", "/images/a.jpg?w=5&size=3", "/other?w=5"] {
            #expect(memo.prepared(refused, by: plain).accepted == nil, "\(refused)")
            #expect(memo.prepared(refused, by: plain).accepted == nil, "\(refused)")
        }
        #expect(memo.count == 1)
        #expect(memo.prepared(a, by: plain).accepted?.parameters == remembered.parameters && memo.count == 1)
        // Full: everything is dropped, then the new target is kept.
        _ = memo.prepared("/images/b.jpg?w=10", by: plain)
        _ = memo.prepared("/images/c.jpg?w=10", by: plain)
        #expect(memo.count == 3)
        #expect(memo.prepared("/images/d.jpg?w=10", by: plain).accepted?.request.key.string == "d.jpg")
        #expect(memo.count == 1)

        // With signing: a bad or missing signature is refused every time, a good one is kept.
        let signer = URLSigner(key: "secret")
        let signed = ImageEndpoint(
            cache: server.cache, encoded: server.server.encoded, settings: server.server.settings, signer: signer,
            responder: responder)
        let signedMemo = PreparedTargets(capacity: 8)
        let good = signer.sign("/images/jpeg/a.jpg?w=10")
        let forged = good.dropLast(2) + (good.hasSuffix("00") ? "11" : "00")
        #expect(signedMemo.prepared("/images/jpeg/a.jpg?w=10", by: signed).accepted == nil)
        #expect(signedMemo.prepared(String(forged), by: signed).accepted == nil)
        #expect(signedMemo.prepared(good, by: signed).accepted?.request.key.string == "jpeg/a.jpg")
        #expect(signedMemo.prepared(String(forged), by: signed).accepted == nil)
        #expect(signedMemo.count == 1)

        // An expiring signature: accepted and kept before `exp`, refused once it has passed —
        // also when the memo holds it.
        let keys = try #require(URLSigner(keys: ["k1": "0123456789abcdef-k1"], defaultKey: nil))
        let expiring = ImageEndpoint(
            cache: server.cache, encoded: server.server.encoded, settings: server.server.settings, signer: keys,
            responder: responder)
        let url = try #require(keys.sign("/images/jpeg/a.jpg?w=10", keyID: "k1", expires: 2_000_000_000))
        let expiringMemo = PreparedTargets(capacity: 8)
        #expect(expiringMemo.prepared(url, by: expiring, now: 1_999_999_999).accepted?.expires == 2_000_000_000)
        #expect(expiringMemo.prepared(url, by: expiring, now: 2_000_000_000).accepted != nil)
        #expect(expiringMemo.count == 1)
        if case .failure(let refusal) = expiringMemo.prepared(url, by: expiring, now: 2_000_000_001) {
            #expect(refusal.code == "expired_signature")
        } else {
            Issue.record("an expired signature was served from the memo")
        }
        #expect(expiringMemo.count == 0)
        try await server.stop()
    }

    /// A memoized target is never answered with the meaning of presets a reload replaced: the
    /// memo parses again a target kept under another generation.
    @Test func presetsReplacedByAReloadAreNotServedFromTheMemo() async throws {
        let server = try await TestServer.start()
        let responder = EncodedResponder(
            cache: server.cache, encoded: server.server.encoded, settings: server.server.settings, metrics: ServiceMetrics(node: "test"),
            probes: ServiceProbes())
        let choice = PresetChoice(try ImagePresets(definitions: ["thumb": "w=120 h=90"], only: false, maxDimension: 4096))
        let endpoint = ImageEndpoint(
            cache: server.cache, encoded: server.server.encoded, settings: server.server.settings, signer: nil,
            responder: responder, presets: choice)
        let memo = PreparedTargets(capacity: 8)
        let thumb = "/images/jpeg/a.jpg?preset=thumb"
        let plain = "/images/jpeg/a.jpg?w=10"
        #expect(memo.prepared(thumb, by: endpoint).accepted?.request.box == PixelSize(width: 120, height: 90))
        #expect(memo.prepared(plain, by: endpoint).accepted != nil)
        #expect(memo.count == 2)
        choice.set(try ImagePresets(definitions: ["thumb": "w=60 h=40"], only: false, maxDimension: 4096))
        #expect(memo.prepared(thumb, by: endpoint).accepted?.request.box == PixelSize(width: 60, height: 40))
        // Presets-only from now on: the plain target, memoized before, is refused.
        choice.set(try ImagePresets(definitions: ["thumb": "w=60 h=40"], only: true, maxDimension: 4096))
        if case .failure(let refusal) = memo.prepared(plain, by: endpoint) {
            #expect(refusal.code == "presets_only")
        } else {
            Issue.record("a target memoized before presets-only was served from the memo")
        }
        // A preset removed: unknown from now on.
        choice.set(try ImagePresets(definitions: ["hero": "w=1200"], only: false, maxDimension: 4096))
        #expect((try? memo.prepared(thumb, by: endpoint).get()) == nil)
        try await server.stop()
    }
}
