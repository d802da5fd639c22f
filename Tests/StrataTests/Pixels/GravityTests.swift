import Strata
import Testing

/// Gravity: parsing, the crop each one places, and the focal point's promise.
@Suite("Gravity")
struct GravityTests {
    @Test func everyGravityReadsBackFromItsName() {
        for gravity in Gravity.named + [.focalPoint(x: 0, y: 100), .focalPoint(x: 5, y: 50), .focalPoint(x: 37, y: 99)] {
            #expect(Gravity(parsing: gravity.description) == gravity, "\(gravity)")
        }
        #expect(Gravity(parsing: "fp:0.333,0.5") == .focalPoint(x: 33, y: 50))
        #expect(Gravity(parsing: "fp:1,0") == .focalPoint(x: 100, y: 0))
        #expect(Gravity(parsing: "fp:.5,0.25") == .focalPoint(x: 50, y: 25))
        for bad in [
            "", "centre", "NORTH", "fp:", "fp:0.5", "fp:0.5,", "fp:1.5,0", "fp:-0.1,0.5", "fp:nan,0", "fp:1e-1,0", "fp:0.5,0.5,1", "fp:.,1",
        ] {
            #expect(Gravity(parsing: bad) == nil, "\(bad)")
        }
    }

    /// A 400×100 source filled into a 100×100 box: the crop is 100×100 of the source and slides
    /// along x only; a 100×400 source slides along y.
    @Test func compassGravitiesKeepTheirEdge() throws {
        let wide = PixelSize(width: 400, height: 100), tall = PixelSize(width: 100, height: 400)
        let box = PixelSize(width: 100, height: 100)
        let expectations: [(Gravity, wideX: Double, tallY: Double)] = [
            (.center, 150, 150), (.north, 150, 0), (.south, 150, 300), (.east, 300, 150), (.west, 0, 150),
            (.northeast, 300, 0), (.northwest, 0, 0), (.southeast, 300, 300), (.southwest, 0, 300),
        ]
        for (gravity, wideX, tallY) in expectations {
            let focus = try #require(gravity.focus)
            let w = SizingPlan(source: wide, box: box, mode: .fill, focus: focus)
            #expect(w.sourceRect == SourceRect(x: wideX, y: 0, width: 100, height: 100), "\(gravity) wide")
            let t = SizingPlan(source: tall, box: box, mode: .fill, focus: focus)
            #expect(t.sourceRect == SourceRect(x: 0, y: tallY, width: 100, height: 100), "\(gravity) tall")
        }
        // The centre is exactly the plan without a focus (caches made before gravity agree).
        #expect(
            SizingPlan(source: PixelSize(width: 2560, height: 1600), box: PixelSize(width: 301, height: 307), mode: .fill)
                == SizingPlan(
                    source: PixelSize(width: 2560, height: 1600), box: PixelSize(width: 301, height: 307), mode: .fill,
                    focus: .center))
    }

    /// The focal point stays inside the crop, and is at its centre unless an edge stops it.
    @Test func aFocalPointStaysInTheCropAsNearItsCentreAsTheEdgesAllow() throws {
        let source = PixelSize(width: 1000, height: 600)
        for box in [PixelSize(width: 100, height: 100), PixelSize(width: 300, height: 60), PixelSize(width: 50, height: 200)] {
            for x in stride(from: 0, through: 100, by: 10) {
                for y in stride(from: 0, through: 100, by: 10) {
                    let focus = try #require(Gravity.focalPoint(x: x, y: y).focus)
                    let rect = SizingPlan(source: source, box: box, mode: .fill, focus: focus).sourceRect
                    let px = focus.x * 1000, py = focus.y * 600
                    #expect(
                        px >= rect.x - 1e-9 && px <= rect.x + rect.width + 1e-9 && py >= rect.y - 1e-9 && py <= rect.y + rect.height + 1e-9)
                    #expect(rect.x >= 0 && rect.y >= 0 && rect.x + rect.width <= 1000 + 1e-9 && rect.y + rect.height <= 600 + 1e-9)
                    // Centred unless clamped at an edge.
                    let cx = rect.x + rect.width / 2
                    if rect.x > 1e-9 && rect.x + rect.width < 1000 - 1e-9 { #expect(abs(cx - px) < 1e-6) }
                }
            }
        }
    }

    @Test func keysDeriveTheGravityAndGiveBackTheSourceKey() {
        let plain = CacheKey("photos/a.jpg", colour: .srgb, gravity: .center)
        #expect(plain == CacheKey("photos/a.jpg"))
        for colour in ColourOutput.allCases {
            for gravity in Gravity.named + [.focalPoint(x: 12, y: 88)] {
                let key = CacheKey("photos/a.jpg", colour: colour, gravity: gravity)
                #expect(key.gravity == gravity && key.colourOutput == colour && key.sourceKey == "photos/a.jpg")
                if gravity != .center || colour != .srgb { #expect(key.entityID != plain.entityID) }
            }
        }
        let derived = CacheKey.allDerived(from: "photos/a.jpg")
        #expect(derived.count == 2 * (Gravity.named.count + 101 * 101))
        #expect(Set(derived).count == derived.count)
        #expect(derived.contains(CacheKey("photos/a.jpg", colour: .original, gravity: .focalPoint(x: 100, y: 3))))
    }
}
