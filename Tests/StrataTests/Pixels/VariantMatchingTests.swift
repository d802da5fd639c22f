import Testing
@testable import Strata

@Suite struct VariantMatchingTests {
    func v(_ w: Int, _ h: Int, _ mode: ContentMode = .fit, _ style: PixelStyle = .default) -> VariantDescriptor {
        VariantDescriptor(size: PixelSize(width: w, height: h), mode: mode, style: style)
    }

    @Test func fitUsesBindingSide() {
        let q = SizeQuery(box: PixelSize(width: 200, height: 200))
        #expect(VariantMatcher.fillRatio(of: v(200, 100), for: q) == 1.0)
        #expect(VariantMatcher.fillRatio(of: v(100, 220), for: q) == 1.1)
    }

    @Test func boundsAreInclusive() {
        let q = SizeQuery(box: PixelSize(width: 100, height: 100), tolerance: 0.2)
        #expect(VariantMatcher.matches(v(80, 50), q))
        #expect(VariantMatcher.matches(v(120, 50), q))
        #expect(!VariantMatcher.matches(v(79, 50), q))
        #expect(!VariantMatcher.matches(v(121, 50), q))
    }

    @Test func closestWinsAndLargerBreaksTies() {
        let q = SizeQuery(box: PixelSize(width: 100, height: 100))
        #expect(VariantMatcher.bestMatch(in: [v(85, 85), v(110, 110), v(95, 95)], for: q) == v(95, 95))
        #expect(VariantMatcher.bestMatch(in: [v(90, 90), v(110, 110)], for: q) == v(110, 110))
        #expect(VariantMatcher.bestMatch(in: [v(110, 110), v(90, 90)], for: q) == v(110, 110))
    }

    /// Near-ties do not chain: with a box of 2.5·10⁹ px, each pixel is 0.4·10⁻⁹ of fill ratio,
    /// so 1, 1 + 0.8·10⁻⁹ and 1 + 1.6·10⁻⁹ are each within 10⁻⁹ of the next but not of the
    /// first; whatever the order, the exact size wins (found by FuzzSizing; the corpus keeps it).
    @Test func nearTiesDoNotChainPastTheBestMatch() {
        let side = 2_500_000_000
        let q = SizeQuery(box: PixelSize(width: side, height: side))
        let exact = v(side, side), near = v(side + 2, side + 2), farther = v(side + 4, side + 4)
        for order in [[exact, near, farther], [farther, near, exact], [near, exact, farther], [near, farther, exact]] {
            #expect(VariantMatcher.bestMatch(in: order, for: q) == exact, "\(order)")
        }
    }

    @Test func zeroToleranceIsExact() {
        let q = SizeQuery(box: PixelSize(width: 100, height: 100), tolerance: 0)
        #expect(VariantMatcher.bestMatch(in: [v(99, 99), v(101, 101)], for: q) == nil)
        #expect(VariantMatcher.bestMatch(in: [v(99, 99), v(100, 60)], for: q) == v(100, 60))
    }

    @Test func modeAndStyleMustAgree() {
        let q = SizeQuery(box: PixelSize(width: 100, height: 100), mode: .fit, style: .bgra32Premultiplied)
        #expect(VariantMatcher.bestMatch(in: [v(100, 100, .fill), v(100, 100, .fit, .gray8)], for: q) == nil)
    }

    @Test func fillNeedsTheBoxAspect() {
        let q = SizeQuery(box: PixelSize(width: 200, height: 100), mode: .fill)
        #expect(VariantMatcher.matches(v(180, 90, .fill), q))
        #expect(VariantMatcher.matches(v(181, 91, .fill), q))  // rounding
        #expect(!VariantMatcher.matches(v(180, 120, .fill), q))
    }
}
