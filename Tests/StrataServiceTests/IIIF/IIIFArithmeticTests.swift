import Strata
import StrataConfiguration
import Testing

@testable import StrataService

/// Regions and sizes resolved against an image: clipping at the edges, `square`, percentages,
/// upscaling rules and the limits; the engine box a tile asks for.
@Suite("IIIF region and size arithmetic")
struct IIIFArithmeticTests {
    static let landscape = PixelSize(width: 300, height: 200)
    static let portrait = PixelSize(width: 200, height: 300)
    static var limits: IIIFSettings {
        var settings = IIIFSettings()
        settings.maxWidth = 1000
        settings.maxHeight = 800
        settings.maxArea = 500_000
        return settings
    }

    @Test func regions() throws {
        #expect(try IIIFRegion.full.resolve(in: Self.landscape) == IIIFRect(x: 0, y: 0, width: 300, height: 200))
        #expect(try IIIFRegion.square.resolve(in: Self.landscape) == IIIFRect(x: 50, y: 0, width: 200, height: 200))
        #expect(try IIIFRegion.square.resolve(in: Self.portrait) == IIIFRect(x: 0, y: 50, width: 200, height: 200))
        #expect(
            try IIIFRegion.pixels(x: 10, y: 20, width: 30, height: 40).resolve(in: Self.landscape)
                == IIIFRect(x: 10, y: 20, width: 30, height: 40))
        // Crossing the right and bottom edges: clipped.
        #expect(
            try IIIFRegion.pixels(x: 256, y: 150, width: 256, height: 256).resolve(in: Self.landscape)
                == IIIFRect(x: 256, y: 150, width: 44, height: 50))
        #expect(
            try IIIFRegion.percent(x: 50, y: 25, width: 50, height: 50).resolve(in: Self.landscape)
                == IIIFRect(x: 150, y: 50, width: 150, height: 100))
        #expect(
            try IIIFRegion.percent(x: 90, y: 90, width: 50, height: 50).resolve(in: Self.landscape)
                == IIIFRect(x: 270, y: 180, width: 30, height: 20))
        // Starting outside the image: 400.
        for outside in [
            IIIFRegion.pixels(x: 300, y: 0, width: 10, height: 10), .pixels(x: 0, y: 200, width: 10, height: 10),
            .percent(x: 100, y: 0, width: 10, height: 10),
        ] {
            #expect(throws: ServiceError.self) { try outside.resolve(in: Self.landscape) }
        }
    }

    @Test func sizes3() throws {
        let region = PixelSize(width: 300, height: 200)
        func size(_ text: String) throws(ServiceError) -> PixelSize {
            try IIIFSize(parsing: Substring(text), version: .v3).resolve(region: region, limits: Self.limits, version: .v3)
        }
        #expect(try size("max") == region)
        #expect(try size("150,") == PixelSize(width: 150, height: 100))
        #expect(try size(",50") == PixelSize(width: 75, height: 50))
        #expect(try size("pct:50") == PixelSize(width: 150, height: 100))
        #expect(try size("100,100") == PixelSize(width: 100, height: 100))
        #expect(try size("!100,100") == PixelSize(width: 100, height: 67))
        #expect(try size("^!600,600") == PixelSize(width: 600, height: 400))
        #expect(try size("^600,") == PixelSize(width: 600, height: 400))
        #expect(try size("^pct:200") == PixelSize(width: 600, height: 400))
        // ^max: as large as the limits allow (maxArea 500 000 at 3:2 → 866×577).
        let upMax = try size("^max")
        #expect(upMax.width <= 1000 && upMax.height <= 800 && upMax.width * upMax.height <= 500_000)
        #expect(upMax.width > 800)
        // Upscaling without ^: 400.
        for text in ["301,", ",201", "pct:101", "301,200", "300,201", "!600,600"] {
            #expect(throws: ServiceError.self, "\(text)") { try size(text) }
        }
        // Over the limits: 400, even with ^.
        for text in ["^1001,", "^,801", "^pct:400"] {
            #expect(throws: ServiceError.self, "\(text)") { try size(text) }
        }
        // max of a region over the limits is scaled down to them.
        let huge = try IIIFSize(.max).resolve(region: PixelSize(width: 4000, height: 1000), limits: Self.limits, version: .v3)
        #expect(huge == PixelSize(width: 1000, height: 250))
    }

    @Test func sizes2AllowUpscaling() throws {
        let region = PixelSize(width: 300, height: 200)
        func size(_ text: String) throws(ServiceError) -> PixelSize {
            try IIIFSize(parsing: Substring(text), version: .v2).resolve(region: region, limits: Self.limits, version: .v2)
        }
        #expect(try size("full") == region)
        #expect(try size("600,") == PixelSize(width: 600, height: 400))
        #expect(try size("pct:200") == PixelSize(width: 600, height: 400))
        #expect(try size("!600,600") == PixelSize(width: 600, height: 400))
        #expect(throws: ServiceError.self) { try size("1001,") }
    }

    @Test func engineBoxIsTheWholeImageAtTheTileScale() {
        let original = PixelSize(width: 2048, height: 1280)
        // Every tile of scale factor 2 asks for about the same box.
        let first = IIIFRendering.engineBox(
            original: original, region: IIIFRect(x: 0, y: 0, width: 1024, height: 1024), output: PixelSize(width: 512, height: 512))
        let edge = IIIFRendering.engineBox(
            original: original, region: IIIFRect(x: 1024, y: 1024, width: 1024, height: 256), output: PixelSize(width: 512, height: 128))
        #expect(first == PixelSize(width: 1024, height: 640))
        #expect(edge == first)
        // Upscaling asks for the original.
        #expect(
            IIIFRendering.engineBox(
                original: original, region: IIIFRect(x: 0, y: 0, width: 100, height: 100), output: PixelSize(width: 200, height: 200))
                == original)
        let rect = IIIFRendering.variantRect(
            region: IIIFRect(x: 1024, y: 512, width: 512, height: 512), original: original, variant: PixelSize(width: 1024, height: 640))
        #expect(rect == SourceRect(x: 512, y: 256, width: 256, height: 256))
    }

    @Test func infoListsReductionsAndScaleFactors() {
        let settings = IIIFSettings()
        #expect(IIIFInfo.scaleFactors(for: PixelSize(width: 2048, height: 1280), tile: 512) == [1, 2, 4])
        #expect(IIIFInfo.scaleFactors(for: PixelSize(width: 300, height: 200), tile: 512) == [1])
        let sizes = IIIFInfo.reductions(of: PixelSize(width: 2048, height: 1280), settings: settings)
        #expect(sizes.first == PixelSize(width: 128, height: 80))
        #expect(sizes.last == PixelSize(width: 2048, height: 1280))
    }
}
