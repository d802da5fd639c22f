import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif
@testable import Strata
@testable import StrataHTTPOrigin
import StrataTestSupport

/// ``HTTPSource`` against a real nginx on 127.0.0.1 (one for the suite, see
/// `Tests/nginx/nginx.conf.template`), serving `Fixtures/`.
@Suite("HTTPSource against nginx", .nginx, .timeLimit(.minutes(5)))
struct HTTPSourceTests {
    static let kite = "jpeg/kite-800x500-gray.jpg"
    static let red = "png/red-8x8.png"

    // MARK: - Bodies and versions

    @Test func fetchReturnsTheBodyWithTheETagAsVersion() async throws {
        let nginx = try NginxTrait.current()
        try await withHTTPSource(nginx.url("fixtures")) { source in
            let data = try await source.fetch(key: Self.kite)
            #expect(data.bytes == Fixtures.bytes(Self.kite))
            #expect(data.version == (try nginxETag(ofFileAt: Fixtures.url(Self.kite).path)))
        }
    }

    @Test func versionIsAConditionalHeadAnsweredWith304() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        let key = "\(marker)/red.png"
        let directory = nginx.mutableDirectory.appendingPathComponent(marker)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("red.png")
        try Data(Fixtures.bytes(Self.red)).write(to: file)
        try await withHTTPSource(nginx.url("mutable")) { source in
            let first = try await source.fetch(key: key)
            let unchanged = try await source.version(key: key)
            #expect(unchanged == first.version)
            let heads = await nginx.logged(2, containing: marker).filter { $0.method == "HEAD" }
            #expect(heads.count == 1 && heads.first?.status == 304 && heads.first?.ifNoneMatch == first.version, "\(heads)")

            // A changed original (another size, so another ETag) gives a new version; the
            // next fetch reports the same one.
            try Data(Fixtures.bytes(Self.kite)).write(to: file)
            let changed = try #require(try await source.version(key: key))
            #expect(changed != first.version)
            #expect(changed == (try nginxETag(ofFileAt: file.path)))
            let second = try await source.fetch(key: key)
            #expect(second.version == changed && second.bytes == Fixtures.bytes(Self.kite))
            let statuses = await nginx.logged(4, containing: marker).map { "\($0.method) \($0.status)" }
            #expect(statuses == ["GET 200", "HEAD 304", "HEAD 200", "GET 200"])
            // And now that one is remembered: 304 again.
            #expect(try await source.version(key: key) == changed)
            #expect(await nginx.logged(5, containing: marker).last?.status == 304)
        }
    }

    @Test func withoutAnETagLastModifiedIsTheVersion() async throws {
        let nginx = try NginxTrait.current()
        try await withHTTPSource(nginx.url("lastmodified")) { source in
            let data = try await source.fetch(key: Self.red)
            #expect(data.version.hasPrefix("last-modified: "))
            #expect(try await source.version(key: Self.red) == data.version)
            let head = await nginx.logged(1) { $0.method == "HEAD" && $0.requestURI == "/lastmodified/\(Self.red)" }.last
            #expect(head?.status == 304 && head?.ifModifiedSince == String(data.version.dropFirst("last-modified: ".count)))
        }
    }

    @Test func versionWithoutARememberedValidatorIsAPlainHead() async throws {
        let nginx = try NginxTrait.current()
        try await withHTTPSource(nginx.url("fixtures")) { source in
            let version = try await source.version(key: Self.red)
            #expect(version == (try nginxETag(ofFileAt: Fixtures.url(Self.red).path)))
        }
    }

    // MARK: - Not found and failures

    @Test func notFoundAndGoneAreNotFound() async throws {
        let nginx = try NginxTrait.current()
        try await withHTTPSource(nginx.url("fixtures")) { source in
            #expect(
                await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "jpeg/missing.jpg") }?.isNotFound == true)
            #expect(
                await sourceFailure { () async throws(SourceError) in try await source.version(key: "jpeg/missing.jpg") }?.isNotFound
                    == true)
        }
        try await withHTTPSource(nginx.url("gone")) { source in
            #expect(await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "x.jpg") }?.isNotFound == true)
        }
    }

    @Test func a503IsRetriedOnceThenReported() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        try await withHTTPSource(nginx.url("unavailable")) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(marker).jpg") }
            let origin = try #require(error?.origin, "\(String(describing: error))")
            #expect(origin.kind == .status(503) && origin.attempts == 2)
            #expect(origin.description.contains("503") && origin.description.contains("after 2 attempts"))
            #expect(await nginx.logged(2, containing: marker).map(\.status) == [503, 503])
        }
    }

    @Test func aDroppedConnectionIsRetriedOnceThenReported() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        try await withHTTPSource(nginx.url("reset")) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(marker).jpg") }
            let origin = try #require(error?.origin, "\(String(describing: error))")
            guard case .connection = origin.kind else {
                Issue.record("expected a connection failure, got \(origin)")
                return
            }
            #expect(origin.attempts == 2 && origin.description.contains("check that the origin is up"))
        }
        #expect(await nginx.logged(2, containing: marker).map(\.status) == [444, 444])
    }

    @Test func anOriginThatRefusesConnectionsFailsAfterOneRetry() async throws {
        // A port nobody listens on: nginx's, before it started, is not known; take a fresh one.
        let port = try #require(closedPort())
        try await withHTTPSource("http://127.0.0.1:\(port)/", { $0.connectTimeout = .milliseconds(500) }) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "x.jpg") }
            let origin = try #require(error?.origin, "\(String(describing: error))")
            #expect(origin.isRetryable && origin.attempts == 2, "\(origin)")
            #expect(source.requestsSent.load(ordering: .relaxed) == 2)
        }
    }

    @Test func a403IsNotRetried() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        try await withHTTPSource(nginx.url("forbidden")) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(marker).jpg") }
            #expect(error?.origin?.kind == .status(403) && error?.origin?.attempts == 1)
            #expect(error?.description.contains("source.http.headers") == true, "says what to check")
            #expect(await nginx.logged(1, containing: marker).count == 1)
        }
    }

    // MARK: - Limits

    @Test func aBodyOverTheLimitIsRefusedByItsContentLength() async throws {
        let nginx = try NginxTrait.current()
        let size = Fixtures.bytes(Self.kite).count
        try await withHTTPSource(nginx.url("fixtures"), { $0.maxBodyBytes = 1000 }) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: Self.kite) }
            #expect(error?.origin?.kind == .bodyTooLarge(limit: 1000, declared: size), "\(String(describing: error))")
        }
    }

    @Test func aStreamedBodyOverTheLimitIsAborted() async throws {
        let nginx = try NginxTrait.current()
        let key = "jpeg/path-2560x1600.jpg"
        let size = Fixtures.bytes(key).count
        // gzip makes nginx stream without a Content-Length, slowly (limit_rate 4k).
        try await withHTTPSource(
            nginx.url("chunked"),
            {
                $0.maxBodyBytes = 16 << 10
                $0.headers = ["Accept-Encoding": "gzip"]
            }
        ) { source in
            let aborted = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: key) }
            #expect(aborted?.origin?.kind == .bodyTooLarge(limit: 16 << 10, declared: nil), "\(String(describing: aborted))")
        }
        // nginx saw the client go away before the ~900 KB body was sent.
        let line = await firstLine(nginx) { $0.requestURI == "/chunked/\(key)" && $0.method == "GET" }
        #expect(line?.completed == false && (line?.bytesSent ?? .max) < size, "\(String(describing: line))")
    }

    @Test func aSlowBodyHitsTheTotalTimeout() async throws {
        let nginx = try NginxTrait.current()
        try await withHTTPSource(
            nginx.url("slow"),
            {
                $0.totalTimeout = .seconds(1)
                $0.readTimeout = .seconds(30)
            }
        ) { source in
            // 900 KB at 8 KiB/s: bytes keep coming (no read timeout), the total runs out.
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "jpeg/path-2560x1600.jpg") }
            let origin = try #require(error?.origin, "\(String(describing: error))")
            #expect(origin.kind == .timeout(.total) && origin.attempts == 1)
            #expect(origin.description.contains("source.http.totalTimeout"))
        }
    }

    @Test func aStalledResponseHitsTheReadTimeoutAndIsRetriedOnce() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        try await withHTTPSource(
            nginx.url("stall"),
            {
                $0.readTimeout = .milliseconds(500)
                // A total far beyond any stall of a busy 2-core machine keeps this test about
                // the read timeout.
                $0.totalTimeout = .seconds(900)
            }
        ) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(marker).jpg") }
            let origin = try #require(error?.origin, "\(String(describing: error))")
            #expect(origin.kind == .timeout(.read) && origin.attempts == 2, "\(origin)")
        }
    }

    @Test func concurrentRequestsAreCapped() async throws {
        let nginx = try NginxTrait.current()
        let key = "jpeg/orientation-gray-8.jpg"
        let expected = Fixtures.bytes(key)
        // Each takes about a second (16 KB at 8 KiB/s, the first second's share at once); four
        // at once with a cap of two. Only this test uses /throttled/.
        try await withHTTPSource(nginx.url("throttled"), { $0.maxConcurrentRequests = 2 }) { source in
            try await withThrowingTaskGroup(of: [UInt8].self) { group in
                for _ in 0..<4 { group.addTask { try await source.fetch(key: key).bytes } }
                for try await bytes in group { #expect(bytes == expected) }
            }
        }
        let lines = await nginx.logged(4) { $0.requestURI.hasPrefix("/throttled/") }
        #expect(lines.count == 4)
        // nginx's own clock: at no request's start were more than two in progress.
        let spans = lines.map { (start: $0.end - $0.duration, end: $0.end) }
        let slack = 0.005
        let mostAtOnce = spans.map { span in spans.filter { $0.start <= span.start + slack && span.start + slack < $0.end }.count }.max()
        #expect(mostAtOnce.map { $0 <= 2 } == true, "requests in progress at once: \(String(describing: mostAtOnce)), \(spans)")
    }

    // MARK: - Redirects

    @Test func aRedirectLoopIsStopped() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        try await withHTTPSource(nginx.url("loop")) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(marker).jpg") }
            #expect(error?.origin?.kind == .tooManyRedirects(limit: 3), "\(String(describing: error))")
            #expect(error?.origin?.attempts == 1)
        }
        // The first request and three redirects, then no more.
        #expect(await nginx.logged(4, containing: marker).count == 4)
    }

    @Test func redirectsWithinTheLimitAreFollowed() async throws {
        let nginx = try NginxTrait.current()
        try await withHTTPSource(nginx.url("moved")) { source in
            let moved = try await source.fetch(key: Self.red)
            #expect(moved.bytes == Fixtures.bytes(Self.red))
        }
        try await withHTTPSource(nginx.url("moved"), { $0.maxRedirects = 0 }) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: Self.red) }
            #expect(error?.origin?.kind == .tooManyRedirects(limit: 0))
        }
    }

    @Test func redirectsToAnotherHostNeedPermissionAndNeverCarryTheHeaders() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        let token = "Bearer \(marker)-secret"
        try await withHTTPSource(nginx.url("elsewhere"), { $0.headers = ["Authorization": token] }) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(marker).png") }
            guard case .redirectRefused(let location, _)? = error?.origin?.kind else {
                Issue.record("expected a refused redirect, got \(String(describing: error))")
                return
            }
            #expect(location.hasPrefix("http://localhost:"))
            #expect(error?.description.contains("allowCrossHostRedirects") == true)
        }
        try await withHTTPSource(
            nginx.url("elsewhere"),
            {
                $0.headers = ["Authorization": token]
                $0.allowCrossHostRedirects = true
            }
        ) { source in
            let followed = try await source.fetch(key: "\(marker).png")
            #expect(followed.bytes == Fixtures.bytes(Self.red))
        }
        let first = await nginx.logged(2, containing: marker)
        #expect(first.count == 2 && first.allSatisfy { $0.authorization == token }, "the origin gets the token: \(first)")
        let hop = await nginx.logged(1) { $0.host.hasPrefix("localhost") }
        #expect(!hop.isEmpty && hop.allSatisfy { $0.authorization.isEmpty }, "the other host does not: \(hop)")
    }

    // MARK: - Keys

    @Test func hostileKeysNeverLeaveTheBasePath() async throws {
        let nginx = try NginxTrait.current()
        // The secret is there to be found by anything that escapes /confined/.
        try await withHTTPSource("http://127.0.0.1:\(nginx.port)/") { source in
            let secret = try await source.fetch(key: "secret.txt")
            #expect(secret.bytes == Array("outside the base path\n".utf8))
        }
        let refused = [
            "", "/", "../secret.txt", "a/../../secret.txt", "./secret.txt", "..", "/secret.txt", "//127.0.0.1/secret.txt",
            "a\u{0}b", "png/red-8x8.png\u{0}", String(repeating: "a", count: HTTPSource.maxKeyBytes + 1),
        ]
        let sent = [
            "..%2Fsecret.txt", "%2e%2e/secret.txt", "%2E%2E%2Fsecret.txt", "png%2F..%2F..%2Fsecret.txt",
            "x?y=1&z=/secret.txt", "x#/secret.txt", "?/secret.txt", "#", "%00", "..;/secret.txt",
            "...", "a\\..\\..\\secret.txt", "http://127.0.0.1/secret.txt", "@127.0.0.1/secret.txt", "café ünï/ .png",
            "a//b", String(repeating: "%2e%2e%2F", count: 455),  // 4095 bytes, 12 KB encoded
        ]
        try await withHTTPSource(nginx.url("confined")) { source in
            for key in refused {
                let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: key) }
                #expect(error?.isInvalidKey == true, "\(key.debugDescription): \(String(describing: error))")
            }
            #expect(source.requestsSent.load(ordering: .relaxed) == 0, "refused keys send nothing")
            for key in sent {
                let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: key) }
                #expect(error?.isNotFound == true, "\(key.debugDescription): \(String(describing: error))")
            }
            // The control: a plain key under the base path is served.
            let control = try await source.fetch(key: Self.red)
            #expect(control.bytes == Fixtures.bytes(Self.red))
            #expect(source.requestsSent.load(ordering: .relaxed) == sent.count + 1)
        }
        // nginx saw each key as one literal path under /confined/ (decoded, normalised) —
        // nothing reached the secret or anything outside the base path.
        let confined = await nginx.logged(sent.count + 1) { $0.requestURI.hasPrefix("/confined/") }
        #expect(confined.count == sent.count + 1)
        #expect(
            confined.allSatisfy {
                $0.uri.hasPrefix("/confined/") && !$0.uri.contains("secret.txt") || $0.uri.hasSuffix("secret.txt") && $0.status == 404
            })
        let seen = Set(confined.map(\.uri))
        for key in sent {
            let expected = "/confined/" + key.split(separator: "/").joined(separator: "/")
            #expect(seen.contains(expected), "nginx saw \(key.debugDescription) as one literal path")
        }
        #expect(await nginx.logged(1) { $0.uri == "/secret.txt" }.count == 1, "only the control request reached the secret")
    }

    // MARK: - Secrets

    @Test func headerValuesNeverAppearInDescriptions() async throws {
        let nginx = try NginxTrait.current()
        let token = "Bearer \(logMarker())-secret"
        var configuration = HTTPSource.Configuration(baseURL: nginx.url("forbidden"))
        configuration.headers = ["Authorization": token]
        var dumped = ""
        dump(configuration, to: &dumped)
        let texts = [
            configuration.description, configuration.debugDescription, configuration.redactedDescription,
            String(describing: configuration.redactedHeaders), dumped,
        ]
        for text in texts { #expect(!text.contains(token) && !text.contains("secret"), "\(text)") }
        #expect(configuration.redactedDescription.contains("Authorization: <redacted>"))
        try await withHTTPSource(nginx.url("forbidden"), { $0.headers = ["Authorization": token] }) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "x.jpg") }
            #expect(error != nil && !String(describing: error!).contains("secret"))
            #expect(!"\(source)".contains("secret"))
        }
        #expect(await !nginx.logged(1) { $0.authorization == token }.isEmpty, "the header was sent")
    }

    // MARK: - The engine

    @Test func theEngineServesAnImageFromTheOrigin() async throws {
        let nginx = try NginxTrait.current()
        try await withHTTPSource(nginx.url("fixtures")) { source in
            let cache = try ImageCache(source: source)
            let request = ImageRequest(key: CacheKey(Self.kite), box: PixelSize(width: 400, height: 400))
            let first = try await cache.image(for: request)
            #expect(first.tier == .source)
            #expect(first.image.size == PixelSize(width: 400, height: 250))
            #expect(first.sourceVersion.token == (try nginxETag(ofFileAt: Fixtures.url(Self.kite).path)))
            let second = try await cache.image(for: request)
            #expect(second.tier == .memory && second.image.hasSamePixels(as: first.image))
            let missing = ImageRequest(key: CacheKey("jpeg/none.jpg"), box: PixelSize(width: 64, height: 64))
            do {
                _ = try await cache.image(for: missing)
                Issue.record("a missing original was served")
            } catch let error as ImageCacheError {
                guard case .notFound = error else { throw error }
            }
        }
        #expect(await nginx.logged(1) { $0.requestURI == "/fixtures/\(Self.kite)" }.count >= 1)
    }

    @Test func theEngineRevalidatesWithConditionalHeads() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        let key = "\(marker)/photo.jpg"
        let directory = nginx.mutableDirectory.appendingPathComponent(marker)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let file = directory.appendingPathComponent("photo.jpg")
        try Data(Fixtures.bytes("jpeg/eveningglow-1024x640-progressive.jpg")).write(to: file)
        try await withHTTPSource(nginx.url("mutable")) { source in
            var options = ImageCache.Options()
            options.revalidateAfter = .zero
            let cache = try ImageCache(source: source, options: options)
            let request = ImageRequest(key: CacheKey(key), box: PixelSize(width: 256, height: 256))
            let old = try await cache.image(for: request)
            #expect(old.tier == .source && old.image.size == PixelSize(width: 256, height: 160))
            // A hit revalidates in the background: a conditional HEAD, answered 304.
            let hit = try await cache.image(for: request)
            #expect(hit.tier == .memory)
            let unchanged = await nginx.logged(1) { $0.requestURI.contains(marker) && $0.method == "HEAD" }
            #expect(unchanged.first?.status == 304 && unchanged.first?.ifNoneMatch == old.sourceVersion.token)
            #expect(await eventually { cache.statistics.engine.revalidations >= 1 })
            #expect(cache.statistics.engine.changedOriginals == 0)

            // The origin's file changes: a later hit's revalidation (the first may still be
            // finishing, and a hit joins it) gets 200 and a new ETag to its HEAD, and the old
            // variants leave; the next request renders the new original.
            try Data(Fixtures.bytes(Self.kite)).write(to: file)
            var changed = false
            let deadline = ContinuousClock.now + .seconds(60)
            while !changed && ContinuousClock.now < deadline {
                _ = try await cache.image(for: request)
                changed = await eventually(0.5) { cache.statistics.engine.changedOriginals == 1 }
            }
            #expect(changed)
            let fresh = try await cache.image(for: request)
            #expect(fresh.sourceVersion != old.sourceVersion)
            #expect(fresh.sourceVersion.token == (try nginxETag(ofFileAt: file.path)))
            #expect(fresh.image.size == PixelSize(width: 256, height: 160) && !fresh.image.hasSamePixels(as: old.image))
        }
        let lines = await nginx.logged(4, containing: marker)
        let calls = lines.map { "\($0.method) \($0.status)" }
        #expect(calls.first == "GET 200", "\(calls)")
        let changedAt = try #require(calls.firstIndex(of: "HEAD 200"), "\(calls)")
        #expect(calls[..<changedAt].contains("HEAD 304") && calls[changedAt...].contains("GET 200"), "\(calls)")
    }

    /// The first logged request matching `predicate` (nginx logs a request when it ends).
    private func firstLine(_ nginx: Nginx, _ predicate: (Nginx.LogLine) -> Bool) async -> Nginx.LogLine? {
        await nginx.logged(1, where: predicate).first
    }
}
