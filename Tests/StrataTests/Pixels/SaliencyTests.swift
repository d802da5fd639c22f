import StrataTestSupport
import Testing

@_spi(Fuzzing) @testable import Strata

/// The smart crop on scenes with a known subject: a saturated bright disc on a neutral textured
/// background, at each corner and off-centre, in wide and tall images. The crop chosen by
/// ``Saliency`` must contain the whole disc — from the image itself, from a small copy (as the
/// engine reads a variant the tiers hold), and through a whole render.
@Suite("Saliency")
struct SaliencyTests {
    static func scene(_ size: PixelSize, cx: Int, cy: Int, radius: Int) -> PixelImage {
        SubjectScenes.disc(size, cx: cx, cy: cy, radius: radius)
    }

    /// Subjects at each corner, each edge's middle and off-centre (fractions of the image).
    static let placements: [(Double, Double)] = [
        (0.1, 0.15), (0.9, 0.15), (0.1, 0.85), (0.9, 0.85), (0.5, 0.15), (0.15, 0.5), (0.7, 0.6), (0.35, 0.4), (0.62, 0.3),
    ]

    static func check(_ size: PixelSize, box: PixelSize, radiusFraction: Double, source: (PixelImage) -> PixelImage) throws {
        for (fx, fy) in placements {
            let radius = Int(Double(min(size.width, size.height)) * radiusFraction)
            let cx = min(size.width - radius - 1, max(radius, Int(fx * Double(size.width))))
            let cy = min(size.height - radius - 1, max(radius, Int(fy * Double(size.height))))
            let image = scene(size, cx: cx, cy: cy, radius: radius)
            let centred = SizingPlan(source: size, box: box, mode: .fill)
            let focus = Saliency.focus(
                of: source(image), cropWidth: centred.sourceRect.width / Double(size.width),
                cropHeight: centred.sourceRect.height / Double(size.height))
            let rect = SizingPlan(source: size, box: box, mode: .fill, focus: focus).sourceRect
            let inside =
                Double(cx - radius) >= rect.x - 1 && Double(cx + radius) <= rect.x + rect.width + 1
                && Double(cy - radius) >= rect.y - 1 && Double(cy + radius) <= rect.y + rect.height + 1
            #expect(inside, "\(size) into \(box): disc at \(cx),\(cy) r\(radius) outside the crop \(rect)")
        }
    }

    @Test func theSmartCropHoldsTheSubjectWhereverItIs() throws {
        let square = PixelSize(width: 300, height: 300)
        try Self.check(PixelSize(width: 960, height: 600), box: square, radiusFraction: 0.12) { $0 }
        try Self.check(PixelSize(width: 600, height: 960), box: square, radiusFraction: 0.12) { $0 }
        // A wide box out of a tall image, and a thin crop out of a wide one.
        try Self.check(PixelSize(width: 600, height: 960), box: PixelSize(width: 400, height: 200), radiusFraction: 0.1) { $0 }
        try Self.check(PixelSize(width: 1200, height: 500), box: PixelSize(width: 200, height: 300), radiusFraction: 0.08) { $0 }
    }

    @Test func aSmallCopyChoosesTheSameCrop() throws {
        // The engine reads saliency from a small variant (about 192 px); the crop must agree.
        try Self.check(PixelSize(width: 1280, height: 800), box: PixelSize(width: 256, height: 256), radiusFraction: 0.1) {
            Resampler().resize($0, box: PixelSize(width: 200, height: 200), mode: .fit)
        }
    }

    @Test func aUniformImageKeepsTheCentre() {
        let flat = PixelImage(width: 400, height: 100)
        #expect(Saliency.focus(of: flat, cropWidth: 0.25, cropHeight: 1) == CropFocus(x: 0.5, y: 0.5))
        let tiny = PixelImage(width: 2, height: 2)
        #expect(Saliency.focus(of: tiny, cropWidth: 0.5, cropHeight: 1) == .center)
    }

    /// Through the renderer (a JPEG, as a client would upload it): every orange pixel of the
    /// disc is in the answer, which a centre crop would cut off.
    @Test func aSmartRenderKeepsTheSubjectAndACentreOneLosesIt() throws {
        let mode = ContentMode.fill
        let size = PixelSize(width: 1280, height: 800)
        let image = Self.scene(size, cx: 1170, cy: 300, radius: 90)
        let jpeg = try ImageEncoder.encode(image, as: .jpeg, quality: 95)
        let box = PixelSize(width: 300, height: 300)
        func orange(_ image: PixelImage) -> Int {
            var count = 0
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let p = image.pixelBytes(x: x, y: y)
                    if p[2] > 200 && p[0] < 100 && p[1] > 100 && p[1] < 180 { count += 1 }
                }
            }
            return count
        }
        let renderer = ImageRenderer()
        let smart = try renderer.render(jpeg, request: RenderRequest(box: box, mode: mode, gravity: .smart))
        let centre = try renderer.render(jpeg, request: RenderRequest(box: box, mode: mode))
        // The disc covers π·90² source pixels, scaled by (300/800)² into the answer.
        let expected = Double.pi * 90 * 90 * (300.0 / 800) * (300.0 / 800)
        #expect(Double(orange(smart)) > 0.85 * expected, "smart: \(orange(smart)) of about \(Int(expected))")
        #expect(orange(centre) == 0)
        // A focus given by the caller is used as is.
        let east = try renderer.render(jpeg, request: RenderRequest(box: box, mode: mode, gravity: .east))
        let given = try renderer.render(
            jpeg, request: RenderRequest(box: box, mode: mode, gravity: .smart, smartFocus: CropFocus(x: 1, y: 0.5)))
        #expect(east.hasSamePixels(as: given))
    }

    /// A smart crop on a large JPEG whose geometry would overlap decode and resample: the
    /// render decodes, reads the saliency, then resamples the chosen crop (no overlap), and the
    /// subject is in it.
    @Test func aLargeJPEGsSmartRenderChoosesBeforeItResamples() throws {
        let size = PixelSize(width: 2560, height: 1600)
        let jpeg = try ImageEncoder.encode(Self.scene(size, cx: 400, cy: 1200, radius: 220), as: .jpeg, quality: 92)
        let renderer = ImageRenderer(resampleThreads: 2)
        renderer.overlapEveryDecode()
        let centre = try renderer.render(jpeg, request: RenderRequest(box: PixelSize(width: 512, height: 512), mode: .fill))
        #expect(renderer.lastRenderOverlapped && renderer.lastSmartFocus == nil)
        let smart = try renderer.render(
            jpeg, request: RenderRequest(box: PixelSize(width: 512, height: 512), mode: .fill, gravity: .smart))
        #expect(!renderer.lastRenderOverlapped)
        let focus = try #require(renderer.lastSmartFocus)
        #expect(focus.y == 0.5 && focus.x < 0.35, "\(focus)")
        #expect(smart.size == centre.size)
        // The disc (x 180…620 of 2560) is in the crop: orange at its centre.
        let left = SizingPlan(source: size, box: PixelSize(width: 512, height: 512), mode: .fill, focus: focus).sourceRect.x
        let p = smart.pixelBytes(x: Int((400 - left) * 512 / 1600), y: 384)
        #expect(p[2] > 200 && p[0] < 100, "\(p)")
    }
}
