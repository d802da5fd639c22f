import Testing
@testable import Strata
import StrataTestSupport

@Suite("EXIF and marker parsing")
struct MetadataTests {
    /// A minimal TIFF with one IFD entry for the orientation.
    static func tiff(littleEndian: Bool, orientation: Int, type: Int = 3, ifdOffset: Int = 8) -> [UInt8] {
        func u16(_ v: Int) -> [UInt8] { littleEndian ? [UInt8(v & 255), UInt8(v >> 8)] : [UInt8(v >> 8), UInt8(v & 255)] }
        func u32(_ v: Int) -> [UInt8] { littleEndian ? u16(v & 0xFFFF) + u16(v >> 16) : u16(v >> 16) + u16(v & 0xFFFF) }
        var t: [UInt8] = littleEndian ? [0x49, 0x49] : [0x4D, 0x4D]
        t += u16(42) + u32(ifdOffset)
        t += u16(1) + u16(0x0112) + u16(type) + u32(1)
        t += type == 3 ? u16(orientation) + [0, 0] : u32(orientation)
        t += u32(0)
        return t
    }

    @Test("both byte orders", arguments: [true, false])
    func byteOrders(little: Bool) {
        for n in 1...8 {
            let t = Self.tiff(littleEndian: little, orientation: n)
            #expect(t.withUnsafeBytes { Metadata.tiffOrientation($0) } == n)
        }
    }

    @Test("malformed EXIF reads as orientation 1")
    func malformed() {
        let cases: [[UInt8]] = [
            [],
            [0x49, 0x49],
            Self.tiff(littleEndian: true, orientation: 9),
            Self.tiff(littleEndian: true, orientation: 0),
            Self.tiff(littleEndian: true, orientation: 6, type: 7),
            Self.tiff(littleEndian: true, orientation: 6, ifdOffset: 4000),
            Self.tiff(littleEndian: true, orientation: 6, ifdOffset: 0x7FFF_FFF0),
            Array(Self.tiff(littleEndian: false, orientation: 6).prefix(18)),
            [0x4D, 0x4D, 0, 43, 0, 0, 0, 8, 0, 1],
        ]
        for bytes in cases {
            #expect(bytes.withUnsafeBytes { Metadata.tiffOrientation($0) } == 1)
        }
    }

    @Test("every truncation of a JPEG's markers is handled")
    func truncatedMarkers() {
        let bytes = Fixtures.bytes("jpeg/orientation-7.jpg")
        #expect(bytes.withUnsafeBytes { Metadata.jpegMarkers($0).orientation } == 7)
        for cut in 0..<min(bytes.count, 300) {
            let o = Array(bytes[..<cut]).withUnsafeBytes { Metadata.jpegMarkers($0).orientation }
            #expect((1...8).contains(o))
        }
    }

    @Test("Adobe APP14 transform is read")
    func adobe() {
        let cmyk = Fixtures.bytes("jpeg/cups-320x200-cmyk-adobe-inverted.jpg")
        #expect(cmyk.withUnsafeBytes { Metadata.jpegMarkers($0).adobeTransform } == 0)
        let ycck = Fixtures.bytes("jpeg/cups-320x200-ycck-adobe.jpg")
        #expect(ycck.withUnsafeBytes { Metadata.jpegMarkers($0).adobeTransform } == 2)
        let plain = Fixtures.bytes("jpeg/cups-320x200-cmyk-plain.jpg")
        #expect(plain.withUnsafeBytes { Metadata.jpegMarkers($0).adobeTransform } == nil)
    }

    @Test("WebP EXIF chunk orientation, read when the VP8X flags announce the chunk")
    func webpExif() {
        let exif = Self.tiff(littleEndian: true, orientation: 6)
        var chunk: [UInt8] = Array("EXIF".utf8) + [UInt8(exif.count), 0, 0, 0] + exif
        if exif.count % 2 == 1 { chunk.append(0) }
        func file(flags: UInt8) -> [UInt8] {
            let body: [UInt8] =
                Array("WEBP".utf8) + Array("VP8X".utf8) + [10, 0, 0, 0] + [flags] + [UInt8](repeating: 0, count: 9) + chunk
            return Array("RIFF".utf8) + [UInt8(body.count), 0, 0, 0] + body
        }
        #expect(file(flags: 0x08).withUnsafeBytes { Metadata.webpOrientation($0) } == 6)
        // A chunk the flags do not announce is not read (the specification: set when the file
        // has EXIF metadata), so a header read from a file's first bytes can rely on the flags.
        #expect(file(flags: 0).withUnsafeBytes { Metadata.webpOrientation($0) } == 1)
        #expect(Fixtures.bytes("webp/cups-640x400-alpha.webp").withUnsafeBytes { Metadata.webpOrientation($0) } == 1)
        #expect(Fixtures.bytes("webp/orientation-6-lossless.webp").withUnsafeBytes { Metadata.webpOrientation($0) } == 6)
    }
}
