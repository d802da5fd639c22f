import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// `ImageCache.originalHeader(for:)` from a blocking source reads a JPEG's header from the first
/// megabyte when the first scan starts there, and the whole original otherwise; the header is the
/// one the whole file gives either way.
@Suite struct OriginalHeaderTests {
    /// Originals in memory, counting prefix and whole reads.
    final class CountingSource: BlockingImageSource {
        let files: [String: [UInt8]]
        let reads = Lock((prefix: 0, whole: 0))
        init(_ files: [String: [UInt8]]) { self.files = files }

        func bytes(_ key: String) throws(SourceError) -> [UInt8] {
            guard let bytes = files[key] else { throw SourceError(key: key, reason: .notFound) }
            return bytes
        }
        func fetch(key: String) async throws(SourceError) -> SourceData { try fetchBlocking(key: key) }
        func fetchBlocking(key: String) throws(SourceError) -> SourceData {
            reads.withLock { $0.whole += 1 }
            return SourceData(bytes: try bytes(key), version: "v1")
        }
        func versionBlocking(key: String) throws(SourceError) -> String { "v1" }
        func fetchPrefixBlocking(key: String, maxBytes: Int) throws(SourceError) -> SourceData {
            reads.withLock { $0.prefix += 1 }
            return SourceData(bytes: Array(try bytes(key).prefix(maxBytes)), version: "v1")
        }
    }

    /// `jpeg` with APP15 segments of `bytes` in all inserted after SOI: header bytes before the scan.
    static func padded(_ jpeg: [UInt8], bytes: Int) -> [UInt8] {
        var out = Array(jpeg[0..<2])
        var left = bytes
        while left > 0 {
            let payload = min(left, 65533)
            out += [0xFF, 0xEF, UInt8((payload + 2) >> 8), UInt8((payload + 2) & 0xFF)] + [UInt8](repeating: 0x5A, count: payload)
            left -= payload
        }
        return out + jpeg[2...]
    }

    @Test func aBigJPEGsHeaderComesFromItsFirstMegabyte() async throws {
        // Seconds of encoding, on a thread of its own.
        let (big, png) = try await offThePool("originals") { () throws -> ([UInt8], [UInt8]) in
            let big = try Mosaic.jpeg(PixelSize(width: 4000, height: 3000))
            return (big, try ImageEncoder.encode(try ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg")), as: .png))
        }
        #expect(big.count > ImageCache.headerPrefixBytes, "the JPEG must be larger than the prefix (\(big.count) bytes)")
        let small = Fixtures.bytes("jpeg/orientation-6.jpg")
        let late = Self.padded(Fixtures.bytes("jpeg/path-2560x1600.jpg"), bytes: ImageCache.headerPrefixBytes + 1000)
        #expect(png.count > ImageCache.headerPrefixBytes)
        let cases: [(String, [UInt8], whole: Int)] = [
            ("big.jpg", big, 0),  // the scan starts in the first megabyte
            ("small.jpg", small, 0),  // the prefix is the whole file
            ("late.jpg", late, 1),  // a megabyte of segments before the scan: read whole
            ("big.png", png, 1),  // not a JPEG: read whole
        ]
        for (key, bytes, whole) in cases {
            let source = CountingSource([key: bytes])
            let cache = try ImageCache(source: source)
            let (header, version) = try await cache.originalHeader(for: CacheKey(key), maxPixels: 1 << 30)
            let expected = try ImageDecoder(limits: DecodingLimits(maxPixels: 1 << 30)).readHeader(bytes)
            #expect(header == expected, "\(key)")
            #expect(version == SourceVersion(token: "v1"))
            let reads = source.reads.withLock { $0 }
            #expect(reads.prefix == 1 && reads.whole == whole, "\(key): \(reads)")
        }
    }

    @Test func aDirectoryReadsAPrefixAndRefusesAFileOverItsLimit() throws {
        let scratch = TempDirectory()
        let bytes = Fixtures.bytes("jpeg/path-2560x1600.jpg")
        try Data(bytes).write(to: URL(fileURLWithPath: scratch.path + "/a.jpg"))
        let source = try DirectorySource(root: scratch.path)
        let whole = try source.fetchBlocking(key: "a.jpg")
        let prefix = try source.fetchPrefixBlocking(key: "a.jpg", maxBytes: 1000)
        #expect(prefix.bytes == Array(bytes.prefix(1000)) && prefix.version == whole.version)
        #expect(try source.fetchPrefixBlocking(key: "a.jpg", maxBytes: 1 << 30).bytes == bytes)
        let limited = try DirectorySource(root: scratch.path, maxFileBytes: 1000)
        var refusals: [String] = []
        for read in [{ try limited.fetchBlocking(key: "a.jpg") }, { try limited.fetchPrefixBlocking(key: "a.jpg", maxBytes: 10) }] {
            do {
                _ = try read()
                Issue.record("a file over the limit was read")
            } catch {
                refusals.append("\(error)")
            }
        }
        #expect(refusals.count == 2 && refusals[0] == refusals[1] && refusals[0].contains("over the 1000-byte limit"), "\(refusals)")
    }
}
