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

    /// `png` with a private ancillary chunk of `bytes` bytes (CRC included) after `IHDR`.
    static func pngWithChunk(_ png: [UInt8], bytes: Int) -> [UInt8] {
        func crc32(_ data: ArraySlice<UInt8>) -> UInt32 {
            var crc: UInt32 = 0xFFFF_FFFF
            for byte in data {
                crc ^= UInt32(byte)
                for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
            }
            return ~crc
        }
        func be(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(value >> (24 - 8 * $0) & 0xFF) } }
        let chunk = Array("prVt".utf8) + [UInt8](repeating: 0x5A, count: bytes)
        let ihdrEnd = 8 + 12 + 13
        return Array(png[..<ihdrEnd]) + be(UInt32(bytes)) + chunk + be(crc32(chunk[...])) + png[ihdrEnd...]
    }

    @Test func aBigJPEGsHeaderComesFromItsFirstMegabyte() async throws {
        // Seconds of encoding, on a thread of its own.
        let (big, png, webp) = try await offThePool("originals") { () throws -> ([UInt8], [UInt8], [UInt8]) in
            let big = try Mosaic.jpeg(PixelSize(width: 4000, height: 3000))
            let photo = try ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
            return (big, try ImageEncoder.encode(photo, as: .png), try ImageEncoder.encode(photo, as: .webp, quality: 100))
        }
        #expect(big.count > ImageCache.headerPrefixBytes, "the JPEG must be larger than the prefix (\(big.count) bytes)")
        let small = Fixtures.bytes("jpeg/orientation-6.jpg")
        let late = Self.padded(Fixtures.bytes("jpeg/path-2560x1600.jpg"), bytes: ImageCache.headerPrefixBytes + 1000)
        #expect(png.count > ImageCache.headerPrefixBytes && webp.count > ImageCache.headerPrefixBytes)
        let cases: [(String, [UInt8], whole: Int)] = [
            ("big.jpg", big, 0),  // the scan starts in the first megabyte
            ("small.jpg", small, 0),  // the prefix is the whole file
            ("late.jpg", late, 1),  // a megabyte of segments before the scan: read whole
            ("big.png", png, 0),  // its first IDAT starts in the first megabyte
            ("late.png", Self.pngWithChunk(png, bytes: ImageCache.headerPrefixBytes), 1),  // a megabyte before IDAT: read whole
            ("big.webp", webp, 0),  // a simple WebP: no metadata chunks
            ("exif.webp", Self.webpWithExif(webp, orientation: 6), 1),  // EXIF follows the image data: read whole
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

    /// `webp` (a simple lossy file) as an extended one with an `EXIF` chunk after its image
    /// data, holding `orientation`, as cwebp's `-metadata exif` and libwebp's mux place it.
    static func webpWithExif(_ webp: [UInt8], orientation: UInt8) -> [UInt8] {
        func le(_ value: Int, _ count: Int) -> [UInt8] { (0..<count).map { UInt8(value >> (8 * $0) & 0xFF) } }
        let header = try! ImageDecoder().readHeader(webp)
        // VP8X: flags (bit 3: EXIF), 3 reserved bytes, the canvas's width and height less one.
        let vp8x = Array("VP8X".utf8) + le(10, 4) + [0x08, 0, 0, 0] + le(header.size.width - 1, 3) + le(header.size.height - 1, 3)
        // A little-endian TIFF: one IFD with Orientation (0x0112, SHORT, 1).
        let tiff: [UInt8] = [0x49, 0x49, 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, orientation, 0, 0, 0, 0, 0, 0, 0]
        let exif = Array("EXIF".utf8) + le(tiff.count, 4) + tiff
        let body = Array("WEBP".utf8) + vp8x + webp[12...] + exif
        return Array("RIFF".utf8) + le(body.count, 4) + body
    }

    /// JPEG 2000 (a JP2 file with an ICC profile, a raw codestream) and JPEG XL originals over
    /// the first megabyte have their header from it: describing an archive's large original
    /// reads a megabyte, also past a directory's `maxFileBytes`. A JP2 whose boxes before the
    /// codestream run past the prefix is read whole; the header is the whole file's each time.
    @Test func jpeg2000AndJPEGXLHeadersComeFromTheirFirstMegabyte() async throws {
        let photo = TilePyramidsTests.oddPhoto()
        // Lossless, so larger than the prefix; seconds of encoding, on a thread of their own.
        let (jp2, j2k, jxl) = try await offThePool("opj_compress, cjxl") { [photo] () throws -> ([UInt8], [UInt8], [UInt8]) in
            let tools = FormatTools()
            let tiff = TIFFWriter.tiff(photo, .rgb)
            let jp2 = try JP2Boxes.withICC(
                JP2DecodingTests.compress(tiff, ["-t", "512,512", "-n", "5"], tools: tools),
                profile: ColourFixtures.profile(.swappedMatrix))
            let j2k = try JP2DecodingTests.compress(tiff, [], suffix: "j2k", tools: tools)
            return (jp2, j2k, try tools.cjxl(tools.png(photo), ["-d", "0"]))
        }
        // An XML box of a megabyte before the header box (ISO/IEC 15444-1 allows one after
        // `ftyp`): the header lies past the prefix.
        let ftypEnd = 12 + Int(jp2[12]) << 24 + Int(jp2[13]) << 16 + Int(jp2[14]) << 8 + Int(jp2[15])
        let xmlLength = ImageCache.headerPrefixBytes + 100
        let xml =
            [UInt8(xmlLength >> 24), UInt8(xmlLength >> 16 & 0xFF), UInt8(xmlLength >> 8 & 0xFF), UInt8(xmlLength & 0xFF)]
            + Array("xml ".utf8) + [UInt8](repeating: 0x20, count: xmlLength - 8)
        let lateJP2 = Array(jp2[..<ftypEnd]) + xml + jp2[ftypEnd...]
        let cases: [(String, [UInt8], whole: Int)] = [
            ("archive.jp2", jp2, 0), ("archive.j2k", j2k, 0), ("photo.jxl", jxl, 0), ("late.jp2", lateJP2, 1),
        ]
        for (key, bytes, whole) in cases {
            #expect(bytes.count > ImageCache.headerPrefixBytes, "\(key) must be larger than the prefix (\(bytes.count) bytes)")
            let expected = try ImageDecoder().readHeader(bytes)
            #expect(expected.size == photo.size, "\(key)")
            let source = CountingSource([key: bytes])
            let (header, version) = try await ImageCache(source: source).originalHeader(for: CacheKey(key))
            #expect(header == expected, "\(key)")
            #expect(version == SourceVersion(token: "v1"))
            let reads = source.reads.withLock { $0 }
            #expect(reads.prefix == 1 && reads.whole == whole, "\(key): \(reads)")
        }
        #expect(try ImageDecoder().readHeader(jp2).colour.profile?.bytes == ColourFixtures.profile(.swappedMatrix))
        // Over a directory's file limit, whose whole read is refused.
        let scratch = TempDirectory()
        try Data(jp2).write(to: URL(fileURLWithPath: scratch.path + "/archive.jp2"))
        let directory = try DirectorySource(root: scratch.path, maxFileBytes: ImageCache.headerPrefixBytes)
        let fromDirectory = try await ImageCache(source: directory).originalHeader(for: "archive.jp2")
        #expect(fromDirectory.header == (try ImageDecoder().readHeader(jp2)))
        // Over a pixel limit: refused from the prefix, as a whole read would be.
        await #expect(throws: ImageCacheError.self) {
            _ = try await ImageCache(source: CountingSource(["archive.jp2": jp2])).originalHeader(for: "archive.jp2", maxPixels: 1000)
        }
    }

    @Test func aDirectoryReadsAPrefixOfAnyFileAndRefusesAWholeReadOverItsLimit() throws {
        let scratch = TempDirectory()
        let bytes = Fixtures.bytes("jpeg/path-2560x1600.jpg")
        try Data(bytes).write(to: URL(fileURLWithPath: scratch.path + "/a.jpg"))
        let source = try DirectorySource(root: scratch.path)
        let whole = try source.fetchBlocking(key: "a.jpg")
        let prefix = try source.fetchPrefixBlocking(key: "a.jpg", maxBytes: 1000)
        #expect(prefix.bytes == Array(bytes.prefix(1000)) && prefix.version == whole.version)
        #expect(try source.fetchPrefixBlocking(key: "a.jpg", maxBytes: 1 << 30).bytes == bytes)
        // Over maxFileBytes: the header's prefix is read (a tile pyramid serves such an
        // original); the whole file is refused by size.
        let limited = try DirectorySource(root: scratch.path, maxFileBytes: 1000)
        #expect(try limited.fetchPrefixBlocking(key: "a.jpg", maxBytes: 10).bytes == Array(bytes.prefix(10)))
        do {
            _ = try limited.fetchBlocking(key: "a.jpg")
            Issue.record("a file over the limit was read")
        } catch {
            guard case .tooLarge(let size, let limit) = error.reason else {
                Issue.record("not a refusal by size: \(error)")
                return
            }
            #expect(size == bytes.count && limit == 1000 && "\(error)".contains("over the 1000-byte limit"), "\(error)")
        }
    }

    /// A TIFF whose first directory follows its pixels (as libtiff's `tiffcp` and vips write
    /// it): its header from the first megabyte and one more part at the directory, never the
    /// whole file, also from a directory whose `maxFileBytes` the file is over. A source that
    /// cannot read parts reads it whole.
    @Test func aTIFFsHeaderComesFromItsPrefixAndItsDirectory() async throws {
        let scratch = TempDirectory()
        let photo = try ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        try Data(TIFFWriter.tiff(photo, .rgb)).write(to: URL(fileURLWithPath: scratch.path + "/plain.tif"))
        _ = try ExternalTools.run("tiffcp", ["-c", "none", scratch.path + "/plain.tif", scratch.path + "/photo.tif"])
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: scratch.path + "/photo.tif")))
        let offset = try #require(bytes.withUnsafeBytes { TIFFCodec.firstDirectoryOffset($0) })
        #expect(offset > ImageCache.headerPrefixBytes, "the directory follows the pixels: at \(offset) of \(bytes.count)")
        let expected = try ImageDecoder().readHeader(bytes)
        #expect(expected.size == photo.size && expected.format == .tiff)
        let directory = try DirectorySource(root: scratch.path, maxFileBytes: ImageCache.headerPrefixBytes)
        let (header, version) = try await ImageCache(source: directory).originalHeader(for: "photo.tif")
        #expect(header == expected)
        #expect(version == SourceVersion(token: try directory.versionBlocking(key: "photo.tif")))
        // Over a pixel limit: refused as a whole read would be.
        await #expect(throws: ImageCacheError.self) {
            _ = try await ImageCache(source: directory).originalHeader(for: "photo.tif", maxPixels: 1000)
        }
        let counting = CountingSource(["photo.tif": bytes])
        let whole = try await ImageCache(source: counting).originalHeader(for: "photo.tif")
        let reads = counting.reads.withLock { $0 }
        #expect(whole.header == expected && reads.prefix == 1 && reads.whole == 1, "\(reads)")
        // An origin whose ranged read at the directory fails (it ignores `Range` past the start):
        // the whole original is read, and the header is the same.
        let refusing = RangeRefusingSource(bytes)
        let fromWhole = try await ImageCache(source: refusing).originalHeader(for: "photo.tif")
        #expect(fromWhole.header == expected && refusing.wholeReads.withLock { $0 } == 1)
    }

    /// An origin that reads a prefix and the whole original, but refuses ranges past the start.
    final class RangeRefusingSource: ImageSource {
        let bytes: [UInt8]
        let wholeReads = Lock(0)
        init(_ bytes: [UInt8]) { self.bytes = bytes }

        func fetch(key: String) async throws(SourceError) -> SourceData {
            wholeReads.withLock { $0 += 1 }
            return SourceData(bytes: bytes, version: "v1")
        }
        func fetchPrefix(key: String, maxBytes: Int) async throws(SourceError) -> SourceData {
            SourceData(bytes: Array(bytes.prefix(maxBytes)), version: "v1")
        }
        func fetchRange(key: String, offset: Int, maxBytes: Int) async throws(SourceError) -> SourceRange? {
            throw SourceError(key: key, reason: .failed("a ranged GET after the first was answered 200, not 206"))
        }
    }

    @Test func firstDirectoryOffsets() {
        let cases: [([UInt8], Int?)] = [
            ([0x49, 0x49, 42, 0, 0x10, 0x20, 0x30, 0x00], 0x30_2010),
            ([0x4D, 0x4D, 0, 42, 0x00, 0x30, 0x20, 0x10], 0x30_2010),
            ([0x49, 0x49, 43, 0, 8, 0, 0, 0, 0x10, 0x20, 0x30, 0, 0, 0, 0, 0], 0x30_2010),
            ([0x49, 0x49, 43, 0, 4, 0, 0, 0, 0x10, 0x20, 0x30, 0, 0, 0, 0, 0], nil),
            ([0x49, 0x49, 41, 0, 0x10, 0x20, 0x30, 0x00], nil),
            ([0xFF, 0xD8, 0xFF, 0xE0, 0, 0, 0, 0], nil),
            ([0x49, 0x49, 42], nil),
        ]
        for (bytes, expected) in cases {
            #expect(bytes.withUnsafeBytes { TIFFCodec.firstDirectoryOffset($0) } == expected, "\(bytes)")
        }
    }
}
