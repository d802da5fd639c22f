import Testing
import StrataTestSupport

@testable import Strata

/// The encoders embed a profile byte for byte (`original` answers), read back by the
/// libraries' own readers (libjpeg-turbo's `jpeg_read_icc_profile`, libwebp's demux; PNG's
/// chunk list), and the pixels are those of the untagged encoding.
@Suite("Encoders embed ICC profiles")
struct ProfileEmbeddingTests {
    static let photo = ColourFixtures.photo(PixelSize(width: 200, height: 120))

    @Test(
        "JPEG, WebP and PNG answers carry the profile byte for byte; the pixels are unchanged",
        arguments: [ImageFormat.jpeg, .webp, .png], [30_000, 200_000])
    func embeds(format: ImageFormat, bytes count: Int) throws {
        let base = ColourFixtures.profile(.swappedMatrix)
        var bytes = base + [UInt8](repeating: 7, count: max(0, count - base.count))
        bytes.replaceSubrange(0..<4, with: ColourFixtures.be32(UInt32(bytes.count)))
        let profile = try ColourProfile(bytes: bytes)
        let tagged = try ImageEncoder.encode(Self.photo, as: format, quality: format == .webp ? 100 : 90, profile: profile)
        let plain = try ImageEncoder.encode(Self.photo, as: format, quality: format == .webp ? 100 : 90)
        let decoder = ImageDecoder()
        #expect(try decoder.readHeader(tagged).colour.profile?.bytes == bytes)
        #expect(try decoder.readHeader(plain).colour == .none)
        #expect(ColourFixtures.packedBytes(try decoder.decode(tagged)) == ColourFixtures.packedBytes(try decoder.decode(plain)))
    }

    @Test("gray8 images are encoded without a profile (an RGB profile cannot describe them)")
    func grayHasNone() throws {
        let gray = PixelConversion.convert(Self.photo, to: .gray8)
        let profile = try ColourProfile(bytes: ColourFixtures.profile(.swappedMatrix))
        let encoded = try ImageEncoder.encode(gray, as: .jpeg, profile: profile)
        #expect(try ImageDecoder().readHeader(encoded).colour == .none)
    }
}
