import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
@testable import StrataS3
import StrataTestSupport

/// ``S3SharedTier`` behind engines over a real moto server (signatures checked): what one node
/// renders another serves without rendering, within the tolerance rule; purges reach it; a
/// corrupt object is never served; a frozen or unreachable store costs a bounded wait.
// 10 minutes: each test waits on moto (Python) and on servers starting; in the whole suite on
// 2 cores its awaits queue behind other tests' work for minutes (a fresh clone's CI run saw 5).
@Suite("Shared tier against moto", .serialized, .timeLimit(.minutes(10)))
struct SharedTierTests {
    static let kite = CacheKey("jpeg/kite-800x500-gray.jpg")
    static let path = CacheKey("jpeg/path-2560x1600.jpg")

    static func tier(_ moto: MotoServer, _ configure: (inout S3SharedTier.Configuration) -> Void = { _ in }) throws -> S3SharedTier {
        let store = try S3ObjectStore(
            endpoint: S3Endpoint(bucket: "renders", endpoint: moto.endpoint),
            credentials: AWSCredentials(accessKeyID: moto.accessKeyID, secretAccessKey: moto.secretAccessKey, sessionToken: nil),
            timeout: .seconds(30))
        var configuration = S3SharedTier.Configuration()
        configuration.prefix = "fleet/a"
        // Generous on a loaded 2-core machine (moto is Python); the fault tests set their own.
        configuration.timeout = .seconds(20)
        configure(&configuration)
        return try S3SharedTier(store: store, configuration: configuration)
    }

    /// A node: its own memory tier, the fixtures as its source, the shared tier.
    static func node(_ tier: S3SharedTier) throws -> ImageCache {
        try ImageCache(memory: ImageMemoryTier(), shared: tier, source: DirectorySource(root: Fixtures.directory.path))
    }

    static func request(_ key: CacheKey, _ side: Int) -> ImageRequest {
        ImageRequest(key: key, box: PixelSize(width: side, height: side))
    }

    @Test func whatOneNodeRendersAnotherServesWithinTheTolerance() async throws {
        try await withMoto(buckets: ["renders"]) { moto in
            let tierA = try Self.tier(moto)
            let a = try Self.node(tierA)
            let rendered = try await a.image(for: Self.request(Self.kite, 300))
            #expect(rendered.tier == .source)
            await tierA.flush(timeout: .seconds(180))
            #expect(tierA.statistics.uploads == 1 && tierA.statistics.bytesWritten > 300 * 187 * 4)

            // Another node: served from the shared tier, the same pixels, no source fetch.
            let tierB = try Self.tier(moto)
            let b = try Self.node(tierB)
            let shared = try await b.image(for: Self.request(Self.kite, 300))
            #expect(shared.tier == .shared && shared.image.hasSamePixels(as: rendered.image))
            #expect(shared.sourceVersion == rendered.sourceVersion)
            #expect(b.statistics.engine.sourceFetches == 0 && b.statistics.engine.served[.shared] == 1)
            #expect(tierB.statistics.hits == 1 && tierB.statistics.bytesRead > 0)

            // Within 20 % (another box, the same variant): shared; beyond it: a render.
            let c = try Self.node(try Self.tier(moto))
            #expect(try await c.image(for: Self.request(Self.kite, 330)).tier == .shared)
            let far = try await c.image(for: Self.request(Self.kite, 600))
            #expect(far.tier == .source && c.statistics.engine.sourceFetches == 1)

            // A purge from one node reaches the store: every variant of the key is gone, with every
            // key derived from the original (as `DELETE /images/{key}` passes them) in one index read.
            let tierC = try #require(c.shared as? S3SharedTier)
            await tierC.flush(timeout: .seconds(180))
            let index = try #require(try await tierA.store.get(tierA.indexName(Self.kite)))
            let entries = S3SharedTier.indexEntries(index.bytes)
            #expect(entries.count == 2, "\(entries)")
            await a.remove(keys: CacheKey.allDerived(from: Self.kite.string))
            #expect(try await tierA.store.get(tierA.indexName(Self.kite)) == nil)
            for listed in entries { #expect(try await tierA.store.get(tierA.folder(of: Self.kite) + listed.entry) == nil) }
            let d = try Self.node(try Self.tier(moto))
            #expect(try await d.image(for: Self.request(Self.kite, 300)).tier == .source)
            await tierA.shutdown()
            await tierB.shutdown()
            await tierC.shutdown()
            await (d.shared as? S3SharedTier)?.shutdown()
        }
    }

    @Test func aCorruptOrTruncatedObjectIsAMissAndIsOverwritten() async throws {
        try await withMoto(buckets: ["renders"]) { moto in
            let tierA = try Self.tier(moto)
            let a = try Self.node(tierA)
            let rendered = try await a.image(for: Self.request(Self.kite, 200))
            await tierA.flush(timeout: .seconds(180))
            let name = tierA.objectName(Self.kite, rendered.variant)
            let good = try #require(try await tierA.store.get(name)).bytes
            for damaged in [Self.flipped(good), Array(good.prefix(good.count / 2)), Array(good.prefix(40))] {
                try await tierA.store.put(name, damaged)
                let tierB = try Self.tier(moto)
                let b = try Self.node(tierB)
                let answer = try await b.image(for: Self.request(Self.kite, 200))
                #expect(answer.tier == .source && answer.image.hasSamePixels(as: rendered.image))
                #expect(tierB.statistics.corrupt == 1 && tierB.statistics.hits == 0)
                // The render that followed overwrote it: the next node gets a good object.
                await tierB.flush(timeout: .seconds(180))
                let rewritten = try await tierA.store.get(name)?.bytes ?? []
                let firstDifference = zip(rewritten, good).enumerated().first { $0.element.0 != $0.element.1 }?.offset
                #expect(
                    rewritten.count == good.count && firstDifference == nil,
                    "\(rewritten.count) vs \(good.count) bytes, first difference at \(String(describing: firstDifference)); \(tierB.statistics)"
                )
                await tierB.shutdown()
            }
            // Bytes of another key under this key's name are refused too.
            let other = try await a.image(for: Self.request(Self.path, 200))
            await tierA.flush(timeout: .seconds(180))
            let otherName = tierA.objectName(Self.path, other.variant)
            let otherBytes = try #require(try await tierA.store.get(otherName)).bytes
            try await tierA.store.put(name, otherBytes)
            let tierC = try Self.tier(moto)
            let c = try Self.node(tierC)
            #expect(try await c.image(for: Self.request(Self.kite, 200)).tier == .source)
            #expect(tierC.statistics.corrupt == 1)
            await tierC.shutdown()
            await tierA.shutdown()
        }
    }

    /// One byte flipped in the middle of the pixels.
    static func flipped(_ bytes: [UInt8]) -> [UInt8] {
        var copy = bytes
        copy[copy.count - copy.count / 3] ^= 0x5A
        return copy
    }

    @Test func aFrozenStoreCostsABoundedWaitThenIsPausedAndItsHitsReturn() async throws {
        try await withMoto(buckets: ["renders"]) { moto in
            let warm = try Self.tier(moto)
            let a = try Self.node(warm)
            _ = try await a.image(for: Self.request(Self.kite, 256))
            await warm.flush()
            await warm.shutdown()

            let tier = try Self.tier(moto) {
                $0.timeout = .milliseconds(400)
                $0.pause = .seconds(2)
            }
            let b = try Self.node(tier)
            // Frozen (SIGSTOP): connections are accepted by the kernel, nothing answers.
            kill(moto.pid, SIGSTOP)
            var answers: [ServingTier] = []
            for side in [256, 128, 96, 64, 48] {
                answers.append(try await b.image(for: Self.request(Self.kite, side)).tier)
            }
            #expect(answers.allSatisfy { $0 == .source }, "\(answers)")
            let frozen = tier.statistics
            // Three timeouts pause it; the rest are skipped (one more try should a slow render
            // outlast the pause).
            #expect(frozen.errors >= 3 && frozen.skipped >= 1 && frozen.errors + frozen.skipped == 5, "\(frozen)")
            kill(moto.pid, SIGCONT)
            try await Task.sleep(for: .seconds(2))
            // Back: the next lookup tries it, and its hits return.
            let c = try Self.node(tier)
            #expect(try await c.image(for: Self.request(Self.kite, 256)).tier == .shared)
            #expect(tier.statistics.hits == 1 && !tier.statistics.paused)
            await tier.shutdown()
        }
    }

    @Test func anUnreachableStoreIsAMissNotAnError() async throws {
        let moto = try MotoServer.start(buckets: ["renders"])
        let tier = try Self.tier(moto) {
            $0.timeout = .milliseconds(300)
            $0.uploadTimeout = .seconds(1)
        }
        moto.kill9()
        let node = try Self.node(tier)
        let answer = try await node.image(for: Self.request(Self.kite, 128))
        #expect(answer.tier == .source)
        #expect(tier.statistics.errors == 1)
        // Uploads fail too, counted, and never reach the request.
        await tier.flush(timeout: .seconds(180))
        #expect(tier.statistics.errors == 2 && tier.statistics.uploads == 0)
        await tier.shutdown()
    }

    @Test func objectNamesRoundTrip() async throws {
        let store = try S3ObjectStore(
            endpoint: S3Endpoint(bucket: "renders", endpoint: "http://127.0.0.1:9"),
            credentials: AWSCredentials(accessKeyID: "a", secretAccessKey: "b", sessionToken: nil), timeout: .seconds(1))
        let tier = try S3SharedTier(store: store)
        for (w, h, mode, style, whole) in [
            (300, 187, ContentMode.fit, PixelStyle.bgra32Premultiplied, false), (1, 1, .fill, .bgrx32, false),
            (4096, 10, .fit, .gray8, true),
        ] {
            let variant = ImageVariant(
                descriptor: VariantDescriptor(size: PixelSize(width: w, height: h), mode: mode, style: style), sourceVersion: .unknown,
                isWholeOriginal: whole)
            let derived = CacheKey(Self.kite.string, colour: .original, gravity: .center)
            // Every key derived from one original shares its folder and index.
            #expect(tier.folder(of: derived) == tier.folder(of: Self.kite) && tier.indexName(derived) == tier.indexName(Self.kite))
            let name = tier.objectName(derived, variant)
            #expect(name.hasPrefix("strata/\(ImageEntityID(hashing: Self.kite.sourceKey))/\(derived.entityID)-"))
            let parsed = try #require(S3SharedTier.parse(String(name.split(separator: "/").last!)))
            #expect(parsed.descriptor == variant.descriptor && parsed.isWholeOriginal == whole && parsed.entity == "\(derived.entityID)")
        }
        let entity = "\(Self.kite.entityID)"
        for bad in [
            entity + "-300x200.px", entity + "-300x200-m9-s0.px", entity + "-0x1-m0-s0.px", entity + "-3x2-m0-s0.jpg", "x-3x2-m0-s0.px",
        ] {
            #expect(S3SharedTier.parse(bad) == nil, "\(bad)")
        }
        let index = S3SharedTier.indexBytes([entity + "-3x2-m0-s0.px", "junk", entity + "-4x2-m1-s1-o.px"])
        #expect(S3SharedTier.indexEntries(index).map(\.entry) == [entity + "-3x2-m0-s0.px", entity + "-4x2-m1-s1-o.px"])
        #expect(S3SharedTier.indexEntries(Array("not an index\n".utf8)).isEmpty)
        try await store.shutdown()
    }
}
