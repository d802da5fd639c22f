import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// The quality target: thumbnails of a 2048+ px JPEG photo within 44 dB PSNR of Pillow's
/// Lanczos resize of the full decode (references in Fixtures/reference, made by
/// Scripts/quality/reference.py).
@Suite("Resampler quality")
struct ResamplerQualityTests {
    static let photo = "jpeg/path-2560x1600.jpg"
    static let target = 44.0

    /// A committed reference (raw RGB) as a BGRx image.
    static func reference(_ name: String, width: Int, height: Int) throws -> PixelImage {
        let rgb = Fixtures.bytes("reference/\(name)")
        try #require(rgb.count == width * height * 3, "reference \(name) has the wrong size")
        return ResamplerTests.image(width, height, .bgrx32) { x, y, c in
            c == 3 ? 255 : rgb[(y * width + x) * 3 + (2 - c)]
        }
    }

    /// The part of `image` at (x, y) of `size`, as BGRx.
    static func window(_ image: PixelImage, x: Int, y: Int, size: PixelSize) -> PixelImage {
        var out = PixelImage(width: size.width, height: size.height, style: image.style)
        let stride = out.bytesPerRow, bpp = image.style.bytesPerPixel
        image.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                for row in 0..<size.height {
                    let from = (y + row) * image.bytesPerRow + x * bpp
                    dst[(row * stride)..<(row * stride + size.width * bpp)]
                        .copyBytes(from: src[from..<(from + size.width * bpp)])
                }
            }
        }
        return out
    }

    @Test func thumbnailOf256PixelsThroughTheDCTScaledPipeline() throws {
        let bytes = Fixtures.bytes(Self.photo)
        let decoder = ImageDecoder()
        let box = PixelSize(width: 256, height: 256)
        let output = SizingPlan(source: try decoder.readHeader(bytes).size, box: box, mode: .fit).output
        // The source tier's plan: shrink-on-load to at least twice the output, then Lanczos.
        let decoded = try decoder.decode(bytes, minimumSize: PixelSize(width: output.width * 2, height: output.height * 2))
        #expect(decoded.width < 2560, "the decoder should have used DCT scaling")
        let thumbnail = Resampler().resize(decoded, box: box, mode: .fit)
        #expect(thumbnail.size == PixelSize(width: 256, height: 160))
        let psnr = thumbnail.peakSignalToNoiseRatio(against: try Self.reference("path-lanczos-256x160.rgb", width: 256, height: 160))
        #expect(psnr >= Self.target, "PSNR \(psnr) dB")
    }

    @Test func thumbnailsFromTheFullDecodeMatchPillowsLanczos() throws {
        let full = try ImageDecoder().decode(Fixtures.bytes(Self.photo))
        #expect(full.size == PixelSize(width: 2560, height: 1600))
        let resampler = Resampler()
        // Only windows of the thumbnails are computed (a debug build resamples slowly): the
        // window at (x, y) of an output scaled by s is the output of the source region at
        // (x·s, y·s), because taps are clipped to the image, not to the region.
        // 1024 px: twice the headroom leaves no DCT scale, so this is the source-tier pipeline;
        // the committed reference is the 384×240 window at (320, 200) of the 1024×640 thumbnail.
        let large = resampler.resample(
            full, region: SourceRect(x: 800, y: 500, width: 960, height: 600),
            to: PixelSize(width: 384, height: 240))
        let largeReference = try Self.reference("path-lanczos-1024x640-crop-320-200-384x240.rgb", width: 384, height: 240)
        let largePSNR = large.peakSignalToNoiseRatio(against: largeReference)
        #expect(largePSNR >= Self.target, "PSNR \(largePSNR) dB")
        // 256 px straight from the full decode: same filter and geometry as Pillow, so far closer
        // than the pipeline's 44 dB. Window 64×40 at (96, 60) of the 256×160 thumbnail.
        let small = resampler.resample(
            full, region: SourceRect(x: 960, y: 600, width: 640, height: 400),
            to: PixelSize(width: 64, height: 40))
        let smallReference = Self.window(
            try Self.reference("path-lanczos-256x160.rgb", width: 256, height: 160),
            x: 96, y: 60, size: PixelSize(width: 64, height: 40))
        let smallPSNR = small.peakSignalToNoiseRatio(against: smallReference)
        #expect(smallPSNR >= 50, "PSNR \(smallPSNR) dB")
    }

    @Test func aWindowOfTheOutputIsTheOutputOfTheMatchingRegion() {
        // The property the test above relies on, checked on a small image.
        let source = ResamplerTests.pattern(200, 120, .bgra32Premultiplied)
        let resampler = Resampler()
        let whole = resampler.resample(
            source, region: SourceRect(x: 0, y: 0, width: 200, height: 120),
            to: PixelSize(width: 50, height: 30))
        let part = resampler.resample(
            source, region: SourceRect(x: 40, y: 20, width: 80, height: 48),
            to: PixelSize(width: 20, height: 12))
        #expect(part.hasSamePixels(as: Self.window(whole, x: 10, y: 5, size: PixelSize(width: 20, height: 12))))
    }

    @Test func referenceFixturesAreConsistent() throws {
        // The committed 1024 px window, downscaled by 4, must look like the matching window of
        // the committed 256 px thumbnail (guards against stale or swapped reference files).
        let small = try Self.reference("path-lanczos-256x160.rgb", width: 256, height: 160)
        let window = try Self.reference("path-lanczos-1024x640-crop-320-200-384x240.rgb", width: 384, height: 240)
        let shrunk = Resampler().resample(
            window, region: SourceRect(x: 0, y: 0, width: 384, height: 240),
            to: PixelSize(width: 96, height: 60))
        let matching = Self.window(small, x: 80, y: 50, size: PixelSize(width: 96, height: 60))
        let psnr = shrunk.peakSignalToNoiseRatio(against: matching)
        #expect(psnr > 30, "PSNR \(psnr) dB")
    }
}
