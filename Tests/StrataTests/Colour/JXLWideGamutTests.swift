import Testing
@testable import Strata
import StrataTestSupport

/// Wide-gamut JPEG XL files (`cjxl` of PNGs that `vips icc_transform` moved into Adobe RGB and
/// ProPhoto/ROMM RGB, the profiles Ghostscript ships) rendered to sRGB: the colours of the sRGB
/// photo they were made from come back, lossless (the original ICC profile through Little CMS)
/// and lossy (XYB, which libjxl renders to sRGB itself).
@Suite("Colour: wide-gamut JPEG XL")
struct JXLWideGamutTests {
    static let photo = "jpeg/cups-320x200-rgb-reference.jpg"
    static let profiles = ["/usr/share/color/icc/ghostscript/a98.icc", "/usr/share/color/icc/ghostscript/rommrgb.icc"]

    /// The photo in `profile`'s colour space, 16 bits a sample, the profile embedded.
    static func wideGamutPNG(_ profile: String, tools: FormatTools) throws -> String {
        let output = tools.path("png")
        try ExternalTools.run(
            "vips", ["icc_transform", Fixtures.url(photo).path, output + "[bitdepth=16]", profile, "--input-profile=srgb", "--depth=16"])
        return output
    }

    @Test(
        "rendered to sRGB, the source's colours within rounding (lossless) or coding error (lossy); the profile ignored is far off",
        arguments: profiles, [["-d", "0"], ["-d", "1"]])
    func renderedToSRGB(profile: String, arguments: [String]) throws {
        let tools = FormatTools()
        let jxl = try tools.cjxl(Self.wideGamutPNG(profile, tools: tools), arguments)
        let header = try ImageDecoder().readHeader(jxl)
        let lossless = arguments == ["-d", "0"]
        if lossless {
            #expect(header.colour.profile != nil, "the original ICC profile, for Little CMS")
        } else {
            #expect(header.colour == .none, "libjxl renders XYB to sRGB")
        }
        let source = try decodeFixture(Self.photo)
        let rendered = try ImageRenderer().render(jxl, request: RenderRequest(box: source.size))
        #expect(rendered.size == source.size)
        let psnr = ColourFixtures.psnr(rendered, source)
        let diff = PixelDiff.compare(rendered, source)
        if lossless {
            #expect(psnr >= 45, "\(profile): \(psnr) dB")
            #expect(diff.max <= 4, "\(profile): max difference \(diff.max)")
        } else {
            #expect(psnr >= 38, "\(profile): \(psnr) dB")
        }
        // The same pixels taken as sRGB (the profile ignored) are visibly off: the test can fail.
        let raw = try ImageDecoder().decode(try tools.cjxl(Self.wideGamutPNG(profile, tools: tools), ["-d", "0"]))
        let ignored = ColourFixtures.psnr(raw, source)
        #expect(ignored < psnr - 6, "\(profile): ignoring the profile is \(ignored) dB from the source, against \(psnr)")
    }
}
