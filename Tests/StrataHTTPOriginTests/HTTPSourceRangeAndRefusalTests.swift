import Foundation
import Testing

@testable import Strata
@testable import StrataHTTPOrigin
import StrataTestSupport

/// Ranged header reads, what a refusing server says, and the retries beyond the first, against
/// the suite's real nginx (`Tests/nginx/nginx.conf.template`).
@Suite("HTTPSource: ranges, refusals, retries", .nginx, .timeLimit(.minutes(5)))
struct HTTPSourceRangeAndRefusalTests {
    static let path = "jpeg/path-2560x1600.jpg"

    @Test func aPrefixIsARangedGETOfTheFirstBytesWithTheWholeFilesVersion() async throws {
        let nginx = try NginxTrait.current()
        let whole = Fixtures.bytes(Self.path)
        try await withHTTPSource(nginx.url("fixtures")) { source in
            let prefix = try await source.fetchPrefix(key: Self.path, maxBytes: 4096)
            #expect(prefix.bytes == Array(whole.prefix(4096)))
            #expect(prefix.version == (try nginxETag(ofFileAt: Fixtures.url(Self.path).path)))
            let line = try #require(await nginx.logged(1, where: { $0.requestURI.hasSuffix(Self.path) }).first)
            #expect(line.status == 206 && line.bytesSent < 8192, "\(line)")
            // Longer than the file: the whole file.
            let all = try await source.fetchPrefix(key: Self.path, maxBytes: whole.count + 10)
            #expect(all.bytes == whole)
        }
    }

    @Test func partsAreRangedGETsWithTheWholeFilesVersionAndLength() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        let whole = Fixtures.bytes(Self.path)
        let directory = nginx.mutableDirectory.appendingPathComponent(marker)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(whole).write(to: directory.appendingPathComponent("photo.jpg"))
        let key = marker + "/photo.jpg"
        try await withHTTPSource(nginx.url("mutable")) { source in
            let version = try nginxETag(ofFileAt: directory.appendingPathComponent("photo.jpg").path)
            var parts: [UInt8] = []
            while parts.count < whole.count {
                let part = try #require(try await source.fetchRange(key: key, offset: parts.count, maxBytes: 100_000))
                #expect(part.version == version && part.totalBytes == whole.count)
                parts += part.bytes
            }
            #expect(parts == whole)
            let lines = await nginx.logged((whole.count + 99_999) / 100_000, containing: marker)
            #expect(lines.count == (whole.count + 99_999) / 100_000)
            #expect(lines.allSatisfy { $0.status == 206 && $0.bytesSent < 101_000 }, "\(lines)")
        }
        // maxBodyBytes bounds a whole fetch held in memory, not an original read in parts (the
        // caller bounds that: a pyramid build copies it to disk, up to iiif.maxSourceSize).
        _ = try await withHTTPSource(nginx.url("mutable"), { $0.maxBodyBytes = 1000 }) { source in
            let part = try #require(try await source.fetchRange(key: key, offset: 2000, maxBytes: 1500))
            #expect(part.bytes == Array(whole[2000..<3500]) && part.totalBytes == whole.count)
            await #expect(throws: SourceError.self) { try await source.fetch(key: key) }
        }
    }

    @Test func contentRangeParses() {
        #expect(HTTPSource.contentRange("bytes 0-99/1000")! == (0, 100, 1000))
        #expect(HTTPSource.contentRange("bytes 900-999/1000")! == (900, 100, 1000))
        for bad in ["bytes 0-99/*", "bytes */1000", "bytes 100-99/1000", "bytes 0-1000/1000", "items 0-9/10", "bytes 0-9"] {
            #expect(HTTPSource.contentRange(bad) == nil, "\(bad)")
        }
    }

    @Test func anEngineReadsAnOriginsHeaderFromItsFirstMegabyte() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        // A noisy 2400×2400 JPEG at quality 95: several megabytes.
        var image = PixelImage(width: 2400, height: 2400)
        var state: UInt32 = 2_463_534_242
        image.withUnsafeMutableBytes { bytes in
            for i in bytes.indices {
                state ^= state << 13
                state ^= state >> 17
                state ^= state << 5
                bytes[i] = UInt8(truncatingIfNeeded: state)
            }
        }
        let jpeg = try ImageEncoder.encode(image, as: .jpeg, quality: 95)
        #expect(jpeg.count > 2 << 20)
        let directory = nginx.mutableDirectory.appendingPathComponent(marker)
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(jpeg).write(to: directory.appendingPathComponent("big.jpg"))
        try await withHTTPSource(nginx.url("mutable")) { source in
            let cache = try ImageCache(source: source)
            let (header, _) = try await cache.originalHeader(for: CacheKey("\(marker)/big.jpg"))
            #expect(header.size == PixelSize(width: 2400, height: 2400))
            let lines = await nginx.logged(1, containing: marker)
            #expect(lines.map(\.status) == [206], "\(lines)")
            #expect(lines.allSatisfy { $0.bytesSent < (1 << 20) + 4096 }, "one megabyte, not \(jpeg.count) bytes")
        }
    }

    @Test func aRefusalCarriesTheServersCodeAndAdvice() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        try await withHTTPSource(nginx.url("skewed")) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(marker).jpg") }
            let origin = try #require(error?.origin, "\(String(describing: error))")
            #expect(origin.kind == .status(403) && origin.attempts == 1)
            #expect(origin.serverCode == "RequestTimeTooSkewed")
            #expect(origin.serverMessage?.hasPrefix("The difference between the request time") == true)
            #expect(origin.description.contains("clock") && origin.description.contains("NTP"), "\(origin)")
        }
    }

    @Test func retriesFollowMaxRetries() async throws {
        let nginx = try NginxTrait.current()
        let marker = logMarker()
        try await withHTTPSource(nginx.url("unavailable"), { $0.maxRetries = 2 }) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(marker).jpg") }
            #expect(error?.origin?.kind == .status(503) && error?.origin?.attempts == 3)
            #expect(await nginx.logged(3, containing: marker).map(\.status) == [503, 503, 503])
        }
        let none = logMarker()
        try await withHTTPSource(nginx.url("unavailable"), { $0.maxRetries = 0 }) { source in
            let error = await sourceFailure { () async throws(SourceError) in try await source.fetch(key: "\(none).jpg") }
            #expect(error?.origin?.attempts == 1)
        }
    }

    @Test func backoffDoublesAndIsJittered() {
        for attempt in 1...4 {
            let base = Duration.milliseconds(100) * (1 << (attempt - 1))
            for _ in 0..<50 {
                let pause = HTTPSource.backoff(.milliseconds(100), afterAttempt: attempt)
                #expect(pause >= base / 2 && pause <= base)
            }
        }
    }

    @Test func httpDatesParse() {
        #expect(WallClock.parseHTTPDate("Sun, 06 Nov 1994 08:49:37 GMT") == 784_111_777)
        #expect(WallClock.parseHTTPDate("Thu, 01 Jan 1970 00:00:00 GMT") == 0)
        #expect(WallClock.parseHTTPDate("Thu, 29 Feb 2024 12:00:00 GMT") == 1_709_208_000)
        #expect(WallClock.parseHTTPDate("Sunday, 06-Nov-94 08:49:37 GMT") == nil)
        #expect(WallClock.parseHTTPDate("Sun, 06 Foo 1994 08:49:37 GMT") == nil)
        let now = WallClock.secondsSince1970()
        #expect(now > 1_700_000_000)
    }
}
