import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// Originals given as bytes.
final class BytesSource: ImageSource, Sendable {
    let originals: [String: [UInt8]]
    init(_ originals: [String: [UInt8]]) { self.originals = originals }

    func fetch(key: String) async throws(SourceError) -> SourceData {
        guard let bytes = originals[key] else { throw SourceError(key: key, reason: .notFound) }
        return SourceData(bytes: bytes, version: "v1")
    }
}

/// Generated hostile inputs through the engine: headers claiming huge dimensions (JPEG SOF,
/// WebP VP8L and VP8X, PNG IHDR), absurd EXIF blocks, and 1 × 100 000 slivers. Each gets a typed
/// error decided from the header (nothing near the claimed size is allocated), or is served
/// correctly, and the engine keeps serving.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct EngineBombTests {
    /// `bytes` with big-endian `value` written at `offset` over `width` bytes.
    static func patchedBigEndian(_ bytes: [UInt8], at offset: Int, width: Int, _ value: UInt64) -> [UInt8] {
        var out = bytes
        for i in 0..<width { out[offset + i] = UInt8(truncatingIfNeeded: value >> (8 * UInt64(width - 1 - i))) }
        return out
    }

    /// Offsets of the JPEG segments before the scan: (marker, offset of the marker).
    static func jpegSegments(_ d: [UInt8]) -> [(marker: UInt8, offset: Int)] {
        var segments: [(UInt8, Int)] = []
        var i = 2
        while i + 4 <= d.count, d[i] == 0xFF {
            segments.append((d[i + 1], i))
            if d[i + 1] == 0xDA { break }
            i += 2 + Int(d[i + 2]) << 8 + Int(d[i + 3])
        }
        return segments
    }

    /// A JPEG whose start-of-frame claims `width` × `height`.
    static func jpegClaiming(width: Int, height: Int) throws -> [UInt8] {
        let d = Fixtures.bytes("jpeg/orientation-1.jpg")
        let sof = try #require(jpegSegments(d).first { [0xC0, 0xC1, 0xC2].contains($0.marker) }).offset
        return patchedBigEndian(patchedBigEndian(d, at: sof + 5, width: 2, UInt64(height)), at: sof + 7, width: 2, UInt64(width))
    }

    /// The JPEG fixture with its APP1 segment replaced by an Exif block with `tiff` as its body.
    static func jpegWithExif(_ tiff: [UInt8]) throws -> [UInt8] {
        let d = Fixtures.bytes("jpeg/orientation-1.jpg")
        let segments = jpegSegments(d)
        let app1 = try #require(segments.first { $0.marker == 0xE1 }).offset
        let end = app1 + 2 + Int(d[app1 + 2]) << 8 + Int(d[app1 + 3])
        let payload = Array("Exif".utf8) + [0, 0] + tiff
        let length = payload.count + 2
        return Array(d[..<app1]) + [0xFF, 0xE1, UInt8(length >> 8), UInt8(length & 0xFF)] + payload + Array(d[end...])
    }

    static func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }

    /// A PNG whose IHDR (with a correct CRC) claims `width` × `height`.
    static func pngClaiming(width: UInt32, height: UInt32) -> [UInt8] {
        var d = patchedBigEndian(Fixtures.bytes("png/red-8x8.png"), at: 16, width: 4, UInt64(width))
        d = patchedBigEndian(d, at: 20, width: 4, UInt64(height))
        return patchedBigEndian(d, at: 29, width: 4, UInt64(crc32(d[12..<29])))
    }

    /// Within each format's own maximum, above the engine's 100-megapixel limit: `tooLarge`.
    static func bombs() throws -> [String: [UInt8]] {
        var bombs: [String: [UInt8]] = [:]
        bombs["jpeg-sof-65500x65500"] = try jpegClaiming(width: 65500, height: 65500)
        bombs["jpeg-sof-65500x1600"] = try jpegClaiming(width: 65500, height: 1600)
        // VP8L: 14-bit width-1 and height-1 after the signature byte 0x2F.
        var vp8l = Fixtures.bytes("webp/kite-320x200-lossless.webp")
        let bits = UInt32(16383) | UInt32(16383) << 14 | UInt32(vp8l[24] & 0xF0) << 24
        for i in 0..<4 { vp8l[21 + i] = UInt8(truncatingIfNeeded: bits >> (8 * UInt32(i))) }
        bombs["webp-vp8l-16384x16384"] = vp8l
        // VP8 (lossy): 14-bit width and height after the start code 9D 01 2A.
        var vp8 = Fixtures.bytes("webp/path-2560x1600.webp")
        for (i, byte) in [0xFF, 0x3F, 0xFF, 0x3F].enumerated() { vp8[26 + i] = UInt8(byte) }
        bombs["webp-vp8-16383x16383"] = vp8
        bombs["png-ihdr-1000000x1000"] = pngClaiming(width: 1_000_000, height: 1000)
        return bombs
    }

    /// Beyond the format's or its library's own maximum, or inconsistent (a VP8X canvas that
    /// is not its frame's size): refused by the library's header checks (`corrupt`,
    /// `unsupported`) or by the limit (`tooLarge`).
    static func beyondFormatMaximum() throws -> [String: [UInt8]] {
        var vp8x = Fixtures.bytes("webp/cups-640x400-alpha.webp")
        for i in 24..<30 { vp8x[i] = 0xFF }
        var vp8x16k = Fixtures.bytes("webp/cups-640x400-alpha.webp")
        for (i, byte) in [0xFF, 0x3F, 0x00, 0xFF, 0x3F, 0x00].enumerated() { vp8x16k[24 + i] = UInt8(byte) }
        return [
            "webp-vp8x-16384x16384": vp8x16k,
            "jpeg-sof-65535x65535": try jpegClaiming(width: 65535, height: 65535),
            "jpeg-sof-0x0": try jpegClaiming(width: 0, height: 0),
            "webp-vp8x-16777216x16777216": vp8x,
            "png-ihdr-2147483647x2147483647": pngClaiming(width: 0x7FFF_FFFF, height: 0x7FFF_FFFF),
            "png-ihdr-0x0": pngClaiming(width: 0, height: 0),
        ]
    }

    /// Exif blocks that lie: an IFD far past the end, an entry count of 65 535, an orientation
    /// of 9999, an IFD that points to itself.
    static func absurdExif() throws -> [String: [UInt8]] {
        let le: [UInt8] = Array("II".utf8) + [0x2A, 0x00]
        return [
            "exif-ifd-beyond-end": try jpegWithExif(le + [0xF0, 0xFF, 0xFF, 0x7F]),
            "exif-65535-entries": try jpegWithExif(le + [8, 0, 0, 0, 0xFF, 0xFF]),
            "exif-orientation-9999": try jpegWithExif(le + [8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 0x0F, 0x27, 0, 0, 0, 0, 0, 0]),
            "exif-ifd-loop": try jpegWithExif(le + [8, 0, 0, 0, 1, 0, 0x69, 0x87, 4, 0, 1, 0, 0, 0, 8, 0, 0, 0, 8, 0, 0, 0]),
            "exif-big-endian-offset-max": try jpegWithExif(Array("MM".utf8) + [0x00, 0x2A, 0xFF, 0xFF, 0xFF, 0xFF]),
        ]
    }

    static func maximumResidentBytes() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss * 1024
    }

    @Test func dimensionBombsGetATypedErrorFromTheHeaderAndTheEngineKeepsServing() async throws {
        let bombs = try Self.bombs()
        let beyond = try Self.beyondFormatMaximum()
        var originals = bombs.merging(beyond) { a, _ in a }
        originals["good"] = Fixtures.bytes("jpeg/orientation-1.jpg")
        let cache = try ImageCache(memory: nil, source: BytesSource(originals))
        let before = Self.maximumResidentBytes()
        for name in originals.keys.sorted() where name != "good" {
            do {
                let served = try await cache.image(for: ImageRequest(key: CacheKey(name), box: PixelSize(width: 256, height: 256)))
                Issue.record("\(name) was served: \(served.image.size)")
            } catch {
                guard case .decoding(_, let decoding) = error else {
                    Issue.record("\(name): not a decoding error: \(error)")
                    continue
                }
                switch decoding.reason {
                case .tooLarge: break
                case .corrupt where beyond[name] != nil, .unsupported where beyond[name] != nil: break
                default: Issue.record("\(name): expected tooLarge from the header, got \(decoding)")
                }
            }
            let good = try await cache.image(for: ImageRequest(key: "good", box: PixelSize(width: 64, height: 64)))
            #expect(good.image.width == 64 || good.image.height == 64)
        }
        // Nothing near the claimed sizes (1 GiB for the smallest, 16384², to petabytes) was
        // allocated. The peak is the process's, and other tests run beside this one (servers,
        // moto's clients, big test images): 768 MiB, below the smallest bomb (a whole-suite run
        // reached 554 MiB with 512 allowed); under the address sanitizer its quarantine keeps up
        // to 256 MiB of freed memory resident as well.
        let allowance = (768 << 20) + (Self.underAddressSanitizer ? 256 << 20 : 0)
        #expect(Self.maximumResidentBytes() - before < allowance)
    }

    /// Whether this process runs under the address sanitizer (its runtime is linked in).
    static var underAddressSanitizer: Bool { dlsym(dlopen(nil, RTLD_NOW), "__asan_init") != nil }

    @Test func absurdExifIsIgnoredOrATypedErrorAndTheEngineKeepsServing() async throws {
        let blocks = try Self.absurdExif()
        let cache = try ImageCache(
            memory: nil, source: BytesSource(blocks.merging(["good": Fixtures.bytes("jpeg/orientation-1.jpg")]) { a, _ in a }))
        let reference = try await cache.image(for: ImageRequest(key: "good", box: PixelSize(width: 64, height: 64)))
        for name in blocks.keys.sorted() {
            do {
                let served = try await cache.image(for: ImageRequest(key: CacheKey(name), box: PixelSize(width: 64, height: 64)))
                // The pixels are the fixture's; a lying orientation is ignored (or swaps sides).
                #expect(
                    served.image.size == reference.image.size
                        || served.image.size == PixelSize(width: reference.image.height, height: reference.image.width), "\(name)")
            } catch {
                guard case .decoding = error else {
                    Issue.record("\(name): not a decoding error: \(error)")
                    continue
                }
            }
            _ = try await cache.image(for: ImageRequest(key: "good", box: PixelSize(width: 32, height: 32)))
        }
    }

    @Test func slivers1By100000AreServedWithinTheirBox() async throws {
        var tall = PixelImage(width: 1, height: 100_000)
        tall.withUnsafeMutableBytes { raw in for i in raw.indices { raw[i] = i % 4 == 3 ? 255 : 0x40 } }
        var wide = PixelImage(width: 100_000, height: 1)
        wide.withUnsafeMutableBytes { raw in for i in raw.indices { raw[i] = i % 4 == 3 ? 255 : 0x40 } }
        let cache = try ImageCache(
            memory: nil,
            source: BytesSource(["tall": try ImageEncoder.encode(tall, as: .png), "wide": try ImageEncoder.encode(wide, as: .png)]))
        for (key, expected) in [("tall", PixelSize(width: 1, height: 256)), ("wide", PixelSize(width: 256, height: 1))] {
            let fit = try await cache.image(for: ImageRequest(key: CacheKey(key), box: PixelSize(width: 256, height: 256)))
            #expect(fit.image.size == expected, "\(key) fit")
            let fill = try await cache.image(for: ImageRequest(key: CacheKey(key), box: PixelSize(width: 64, height: 64), mode: .fill))
            #expect(fill.image.width >= 1 && fill.image.width <= 64 && fill.image.height >= 1 && fill.image.height <= 64, "\(key) fill")
            for image in [fit.image, fill.image] {
                let ok = image.withUnsafeBytes { raw in
                    (0..<image.height).allSatisfy { y in
                        (0..<image.width).allSatisfy { x in abs(Int(raw[y * image.bytesPerRow + x * 4]) - 0x40) <= 2 }
                    }
                }
                #expect(ok, "\(key): the sliver's pixels")
            }
        }
    }
}
