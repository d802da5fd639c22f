import Testing
@testable import Strata

@Suite struct GeometryTests {
    @Test func fitPreservesAspect() {
        let plan = SizingPlan(source: PixelSize(width: 2048, height: 1536), box: PixelSize(width: 256, height: 256), mode: .fit)
        #expect(plan.output == PixelSize(width: 256, height: 192))
        #expect(plan.sourceRect == SourceRect(x: 0, y: 0, width: 2048, height: 1536))
    }

    @Test func fitDoesNotEnlargeUnlessAsked() {
        let small = PixelSize(width: 100, height: 50)
        #expect(SizingPlan(source: small, box: PixelSize(width: 400, height: 400), mode: .fit).output == small)
        #expect(
            SizingPlan(source: small, box: PixelSize(width: 400, height: 400), mode: .fit, allowUpscale: true).output
                == PixelSize(width: 400, height: 200))
    }

    @Test func fillCropsToTheBox() {
        let plan = SizingPlan(source: PixelSize(width: 2000, height: 1000), box: PixelSize(width: 100, height: 100), mode: .fill)
        #expect(plan.output == PixelSize(width: 100, height: 100))
        #expect(plan.sourceRect == SourceRect(x: 500, y: 0, width: 1000, height: 1000))
    }

    @Test func fillOfASmallSourceKeepsTheBoxAspect() {
        let plan = SizingPlan(source: PixelSize(width: 100, height: 80), box: PixelSize(width: 400, height: 200), mode: .fill)
        #expect(plan.output == PixelSize(width: 100, height: 50))
        #expect(plan.sourceRect == SourceRect(x: 0, y: 15, width: 100, height: 50))
    }

    /// Found by the sizing fuzz harness: a box near `Int.max` (any client can ask for one)
    /// made the rounded side 2⁶³, on which `Int(_:)` trapped.
    @Test func boxesNearIntMaxPlanWithoutTrapping() {
        let huge = PixelSize(width: Int.max, height: Int.max)
        let up = SizingPlan(source: PixelSize(width: Int.max, height: 1), box: huge, mode: .fit, allowUpscale: true)
        #expect(up.output == PixelSize(width: Int.max, height: 1))
        let fit = SizingPlan(source: PixelSize(width: 640, height: 400), box: huge, mode: .fit, allowUpscale: true)
        #expect(fit.output.width == Int.max && fit.output.height >= 1)
        let fill = SizingPlan(source: PixelSize(width: 640, height: 400), box: PixelSize(width: Int.max, height: 3), mode: .fill)
        #expect(fill.output.width >= 1 && fill.output.width <= 640 && fill.output.height == 1)
        let plan = ImageRenderer().plan(
            for: ImageHeader(format: .png, codedSize: PixelSize(width: Int.max, height: Int.max)),
            request: RenderRequest(box: PixelSize(width: 10, height: 10)))
        #expect(plan.minimumDecode.width >= 1 && plan.minimumDecode.width <= Int.max)
    }

    /// Found by the sizing fuzz harness: the centred crop of a `fill` came out a hair larger
    /// than the source through binary rounding of the aspect, with an origin of -3e-14.
    @Test func aFillCropNeverLeavesTheSource() {
        let source = PixelSize(width: 1, height: 474)
        let plan = SizingPlan(source: source, box: PixelSize(width: 65535, height: 3_436_204_669_174_536_667), mode: .fill)
        #expect(plan.sourceRect.x >= 0 && plan.sourceRect.y >= 0)
        #expect(plan.sourceRect.x + plan.sourceRect.width <= Double(source.width))
        #expect(plan.sourceRect.y + plan.sourceRect.height <= Double(source.height))
    }

    @Test func rowsArePaddedTo64Bytes() {
        #expect(PixelLayout.bytesPerRow(width: 1, style: .bgra32Premultiplied) == 64)
        #expect(PixelLayout.bytesPerRow(width: 16, style: .bgra32Premultiplied) == 64)
        #expect(PixelLayout.bytesPerRow(width: 17, style: .bgra32Premultiplied) == 128)
        #expect(PixelLayout.bytesPerRow(width: 33, style: .rgb565) == 128)
        let image = PixelImage(width: 17, height: 3, style: .gray8)
        #expect(image.bytesPerRow == 64 && image.isRowAligned)
    }

    @Test func copyOnWrite() {
        var a = PixelImage(width: 4, height: 4)
        let b = a
        a.withUnsafeMutableBytes { $0[0] = 7 }
        #expect(a.pixelBytes(x: 0, y: 0)[0] == 7)
        #expect(b.pixelBytes(x: 0, y: 0)[0] == 0)
    }
}
