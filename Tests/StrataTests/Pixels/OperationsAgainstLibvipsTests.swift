import Foundation
import Strata
import StrataTestSupport
import Testing

/// Each operation against libvips (the `vips` command of libvips-tools) on the same decoded
/// photo: the blur, the sharpen and the padding within 40 dB, the trim box within a pixel. The
/// parameters on both sides are the ones docs/Benchmarks.md's table states.
@Suite("Operations against libvips", .timeLimit(.minutes(3)))
struct OperationsAgainstLibvipsTests {
    /// The photo as a lossless PNG (what both sides read), decoded.
    final class Photo {
        let directory = TempDirectory()
        var png: String { directory.path + "/photo.png" }
        let image: PixelImage

        init(_ fixture: String = "jpeg/eveningglow-1024x640-progressive.jpg") throws {
            try ExternalTools.run("vips", ["copy", Fixtures.url(fixture).path, directory.path + "/photo.png"])
            image = try ImageDecoder().decode(Array(try Data(contentsOf: URL(fileURLWithPath: directory.path + "/photo.png"))))
        }

        /// `vips` `arguments` with `IN` and `OUT` standing for the photo and an output PNG, decoded.
        func vips(_ arguments: [String]) throws -> PixelImage {
            let out = directory.path + "/out.png"
            try ExternalTools.run("vips", arguments.map { $0 == "IN" ? png : $0 == "OUT" ? out : $0 })
            return try ImageDecoder().decode(Array(try Data(contentsOf: URL(fileURLWithPath: out))))
        }
    }

    @Test(arguments: [1.0, 2.5, 6.0])
    func blurMatchesGaussblur(sigma: Double) throws {
        let photo = try Photo()
        // libvips cuts its mask where it falls below `min-ampl` (0.2 by default: a narrower blur);
        // 0.01 is the 3σ of Strata's kernel.
        let theirs = try photo.vips(["gaussblur", "IN", "OUT", "\(sigma)", "--min-ampl", "0.01"])
        let ours = photo.image.blurred(sigma: sigma, threads: 2)
        let db = psnr(ours, theirs)
        #expect(db >= 40, "blur \(sigma): \(db) dB")
    }

    @Test(arguments: [0.5, 1.0, 2.0])
    func sharpenMatchesSharpen(sigma: Double) throws {
        let photo = try Photo()
        let theirs = try photo.vips(["sharpen", "IN", "OUT", "--sigma", "\(sigma)"])
        let ours = photo.image.sharpened(sigma: sigma)
        let db = psnr(ours, theirs)
        #expect(db >= 40, "sharpen \(sigma): \(db) dB")
        #expect(psnr(ours, photo.image) < 60, "the sharpen changed nothing")
    }

    @Test(arguments: ["background", "copy", "mirror"])
    func padMatchesGravity(extend: String) throws {
        let photo = try Photo("jpeg/cups-320x200-rgb-reference.jpg")
        let theirs = try photo.vips(["gravity", "IN", "OUT", "centre", "401", "333", "--extend", extend, "--background", "255 128 0"])
        let ours = photo.image.padded(
            to: PixelSize(width: 401, height: 333), extend: ImageOperations.PadExtension(rawValue: extend)!,
            background: BackgroundColour(red: 255, green: 128, blue: 0).premultipliedBGRA)
        #expect(psnr(ours, theirs) == .infinity, "pad \(extend): \(psnr(ours, theirs)) dB")
        let corner = try photo.vips(["gravity", "IN", "OUT", "south-east", "401", "333", "--extend", extend])
        let ourCorner = photo.image.padded(
            to: PixelSize(width: 401, height: 333), focus: CropFocus(x: 1, y: 1), extend: ImageOperations.PadExtension(rawValue: extend)!,
            background: SIMD4(0, 0, 0, 255))
        #expect(psnr(ourCorner, corner) == .infinity, "pad \(extend) south-east: \(psnr(ourCorner, corner)) dB")
    }

    @Test func compositeMatchesCompositeInLinearLight() throws {
        let photo = try Photo()
        // A watermark with alpha: the cups with their transparent background, at 320×200.
        let overlay = photo.directory.path + "/overlay.png"
        try ExternalTools.run("vips", ["thumbnail", Fixtures.url("webp/cups-640x400-alpha.webp").path, overlay, "320"])
        let mark = try ImageDecoder().decode(Array(try Data(contentsOf: URL(fileURLWithPath: overlay))))
        #expect(mark.pixelBytes(x: 0, y: 0)[3] < 255, "the watermark has transparency")
        // scRGB: libvips' blend in linear light (its default, sRGB, blends the encoded values).
        // (its float scRGB result is encoded to sRGB by `colourspace`, as a save does not).
        let linear = photo.directory.path + "/composite.v"
        try ExternalTools.run(
            "vips", ["composite2", photo.png, overlay, linear, "over", "--x", "300", "--y", "200", "--compositing-space", "scrgb"])
        let theirs = try photo.vips(["colourspace", linear, "OUT", "srgb"])
        let ours = photo.image.composited(mark, x: 300, y: 200)
        #expect(psnr(ours, theirs) >= 40, "composite: \(psnr(ours, theirs)) dB")
        #expect(psnr(ours, photo.image) < 40, "the watermark is not there")
    }

    @Test(arguments: [(10, "250 250 250"), (25, "30 60 90")])
    func trimFindsFindTrimsBox(threshold: Int, border: String) throws {
        let photo = try Photo("jpeg/cups-320x200-rgb-reference.jpg")
        // The photo in an uneven border, through a JPEG: ringing and noise in the border.
        let framed = photo.directory.path + "/framed.jpg"
        try ExternalTools.run(
            "vips", ["embed", photo.png, framed + "[Q=80]", "37", "11", "420", "260", "--extend", "background", "--background", border])
        let image = try ImageDecoder().decode(Array(try Data(contentsOf: URL(fileURLWithPath: framed))))
        let corner = image.pixelBytes(x: 0, y: 0)
        let output = try ExternalTools.run(
            "vips", ["find_trim", framed, "--threshold", "\(threshold)", "--background", "\(corner[2]) \(corner[1]) \(corner[0])"])
        let numbers = String(decoding: output, as: UTF8.self).split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        try #require(numbers.count == 4, "find_trim said \(String(decoding: output, as: UTF8.self))")
        let box = image.trimBox(threshold: threshold)
        let ours = [box.x, box.y, box.width, box.height]
        #expect(zip(ours, numbers).allSatisfy { abs($0 - $1) <= 1 }, "ours \(ours), libvips \(numbers)")
        // The photo (at 37, 11), give or take a JPEG block of ringing outside it or light edges
        // of its own inside it.
        #expect(abs(box.x - 37) <= 8 && abs(box.y - 11) <= 8 && abs(box.width - 320) <= 16 && abs(box.height - 200) <= 16, "\(ours)")
    }
}
