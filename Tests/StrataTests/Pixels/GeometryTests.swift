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
