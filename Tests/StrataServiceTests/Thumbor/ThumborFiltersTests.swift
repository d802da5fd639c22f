import Foundation
import Strata
import Testing

@testable import StrataService

/// thumbor's filters: their arguments read as its `BaseFilter` patterns read them (spaces, quoted
/// strings, optional trailing arguments), refusals that name the filter, and the colour
/// arithmetic of its C extensions on known pixels (values worked out from its C code by hand).
@Suite("thumbor filters")
struct ThumborFiltersTests {
    @Test func argumentsParseAsThumborReadsThem() throws {
        let filters = try ThumborFilter.parse(
            "quality(85):fill( red , true):blur(3):blur(2,1.5):sharpen(1.5,.5,True):watermark('a,b.png', -10p, center, 50, none, 20)"
                + ":round_corner(20|10,255,0,0):rotate(-90):focal(10x20:30x40):saturation(-.5):format(JPG):max_bytes(1000)")
        #expect(
            filters == [
                .quality(85), .fill(.colour(BackgroundColour(red: 255, green: 0, blue: 0)), transparentToo: true),
                .blur(radius: 3, sigma: 0), .blur(radius: 2, sigma: 1.5), .sharpen(amount: 1.5, radius: 0.5, luminanceOnly: true),
                .watermark(
                    ThumborFilter.Watermark(
                        key: "a,b.png", x: .percent(10, fromEnd: true), y: .center, alpha: 50, widthRatio: nil, heightRatio: 20)),
                .roundCorner(a: 20, b: 10, red: 255, green: 0, blue: 0, transparent: false), .rotate(270),
                .focal(ThumborURL.Crop(left: 10, top: 20, right: 30, bottom: 40)), .saturation(-0.5), .format(.jpeg), .maxBytes(1000),
            ])
        #expect(
            try ThumborFilter.parse("fill(fff)") == [
                .fill(.colour(BackgroundColour(red: 255, green: 255, blue: 255)), transparentToo: false)
            ])
        #expect(
            try ThumborFilter.parse("background_color(ff000080)") == [
                .backgroundColor(BackgroundColour(red: 255, green: 0, blue: 0, alpha: 128))
            ])
        #expect(try ThumborFilter.parse("grayscale():no_upscale()") == [.grayscale, .noUpscale])
    }

    @Test func refusalsNameTheFilter() {
        let cases: [(String, String)] = [
            ("nosuch(1)", "nosuch"), ("frame(a.png)", "frame"), ("quality(abc)", "quality"), ("blur(0)", "blur"),
            ("rgb(1,2)", "rgb"), ("fill(notacolour)", "fill"), ("rotate(45)", "rotate"), ("format(heic)", "format"),
            ("sharpen(1,2)", "sharpen"), ("grayscale(1)", "grayscale"), ("quality(80", "quality"), ("watermark(a.png,x,1,1)", "watermark"),
        ]
        for (text, name) in cases {
            do {
                _ = try ThumborFilter.parse(Substring(text))
                Issue.record("\(text) was accepted")
            } catch {
                #expect(error.status == .badRequest && error.message.contains(name), "\(text): \(error.message)")
            }
        }
    }

    /// One opaque pixel (100, 150, 200) through each filter.
    static func pixel(_ change: (PixelImage) -> PixelImage) -> [UInt8] {
        var image = PixelImage(width: 1, height: 1, style: .bgra32Premultiplied)
        image.withUnsafeMutableBytes { raw in
            raw[0] = 200
            raw[1] = 150
            raw[2] = 100
            raw[3] = 255
        }
        return change(image).withUnsafeBytes { [$0[2], $0[1], $0[0], $0[3]] }
    }

    @Test func colourArithmeticIsThumbors() {
        // brightness: + 255·10/100 = 25.
        #expect(Self.pixel { ThumborPixels.brightness($0, 10) } == [125, 175, 225, 255])
        // contrast(20): factor (120²/100) = 144; (144·(c − 128))/100 + 128, truncated.
        #expect(Self.pixel { ThumborPixels.contrast($0, 20) } == [88, 159, 231, 255])
        // rgb(10, −20, 30): + 25, − 51, + 76 (clamped).
        #expect(Self.pixel { ThumborPixels.rgb($0, 10, -20, 30) } == [125, 99, 255, 255])
        // saturation(0.5): p = √(.299·100² + .587·150² + .114·200²) = 144.08; p + (c − p)/2.
        #expect(Self.pixel { ThumborPixels.saturation($0, 0.5) } == [122, 147, 172, 255])
        // grayscale: (19595·100 + 38470·150 + 7471·200 + 2¹⁵) >> 16 = 141.
        #expect(Self.pixel { ThumborPixels.grayscale($0) } == [141, 141, 141, 255])
    }

    @Test func roundCornersPaintOnlyTheCorners() {
        let image = ThumborPixels.solid(PixelSize(width: 40, height: 30), BackgroundColour(red: 0, green: 0, blue: 255))
        let rounded = ThumborPixels.roundCorners(image, a: 10, b: 10, colour: .transparent, transparent: true)
        rounded.withUnsafeBytes { raw in
            func alpha(_ x: Int, _ y: Int) -> UInt8 { raw[y * rounded.bytesPerRow + 4 * x + 3] }
            #expect(alpha(0, 0) == 0 && alpha(39, 0) == 0 && alpha(0, 29) == 0 && alpha(39, 29) == 0, "the corners are cleared")
            #expect(alpha(20, 15) == 255 && alpha(20, 0) == 255 && alpha(0, 15) == 255, "the middle and the edges' middles stay")
        }
    }

    @Test func blurSpreadIsThatOfThumborsCutKernel() {
        // blur(N): sigma N cut at N taps each side: a spread of 0.56·N; a wide radius keeps the sigma.
        #expect(abs(ThumborPixels.blurSigma(radius: 10, sigma: 0) - 5.62) < 0.01)
        #expect(abs(ThumborPixels.blurSigma(radius: 100, sigma: 5) - 5) < 0.01)
    }
}
