import Foundation
import Testing

@testable import Strata
import StrataTestSupport

/// One table of match cases, run against the memory tier, the disk tier's index and the image
/// tables' format choice: the same rule (``VariantMatcher``) must decide all three.
@Suite("The one variant rule: memory, disk and tables decide alike", .timeLimit(.minutes(5)))
struct VariantRuleTests {
    struct Held: Sendable, CustomStringConvertible {
        var width: Int
        var height: Int
        var mode: ContentMode = .fit
        var style: PixelStyle = .default
        var whole = false
        var descriptor: VariantDescriptor {
            VariantDescriptor(size: PixelSize(width: width, height: height), mode: mode, style: style)
        }
        var description: String { "\(descriptor)\(whole ? " whole" : "")" }
    }

    struct Case: Sendable, CustomStringConvertible {
        var name: String
        var held: [Held]
        var query: SizeQuery
        /// The index in `held` of the winner, or `nil` for a miss.
        var winner: Int?
        var description: String { name }
    }

    static func box(
        _ w: Int, _ h: Int, _ mode: ContentMode = .fit, t: Double = 0.2, upscale: Bool = false, style: PixelStyle = .default,
        below: Double? = nil
    )
        -> SizeQuery
    {
        SizeQuery(
            box: PixelSize(width: w, height: h), mode: mode, style: style, tolerance: t, allowUpscale: upscale, upscaleTolerance: below)
    }

    static let cases: [Case] = [
        Case(
            name: "the closer of two", held: [Held(width: 100, height: 100), Held(width: 200, height: 200)], query: box(190, 190), winner: 1
        ),
        Case(
            name: "a tie goes to the larger", held: [Held(width: 80, height: 80), Held(width: 120, height: 120)], query: box(100, 100),
            winner: 1),
        Case(name: "outside the tolerance", held: [Held(width: 100, height: 100)], query: box(200, 200), winner: nil),
        Case(name: "edge of the tolerance", held: [Held(width: 80, height: 50)], query: box(100, 100), winner: 0),
        Case(
            name: "tolerance 0 is exact", held: [Held(width: 101, height: 101), Held(width: 100, height: 100)], query: box(100, 100, t: 0),
            winner: 1),
        Case(name: "another style", held: [Held(width: 100, height: 100, style: .bgrx32)], query: box(100, 100), winner: nil),
        Case(name: "another mode", held: [Held(width: 100, height: 100)], query: box(100, 100, .fill), winner: nil),
        Case(name: "fill, same aspect", held: [Held(width: 200, height: 100, mode: .fill)], query: box(220, 110, .fill), winner: 0),
        Case(name: "fill, another aspect", held: [Held(width: 200, height: 100, mode: .fill)], query: box(200, 200, .fill), winner: nil),
        Case(
            name: "a whole original in a larger box", held: [Held(width: 320, height: 200, whole: true)], query: box(1024, 1024), winner: 0),
        Case(
            name: "a whole original beats a farther plain variant",
            held: [Held(width: 320, height: 200, whole: true), Held(width: 260, height: 163)], query: box(1024, 1024, t: 0.9), winner: 0),
        Case(name: "a plain variant in a larger box", held: [Held(width: 320, height: 200)], query: box(1024, 1024), winner: nil),
        Case(
            name: "a whole original, upscaling allowed", held: [Held(width: 320, height: 200, whole: true)],
            query: box(1024, 1024, upscale: true), winner: nil),
        Case(
            name: "a whole original larger than the box", held: [Held(width: 320, height: 200, whole: true)], query: box(200, 200),
            winner: nil),
        // IIIF tiles (`iiif.upscaleTolerance` 0): nothing smaller than the box.
        Case(
            name: "upscale tolerance 0: a closer smaller variant is passed over",
            held: [Held(width: 98, height: 98), Held(width: 115, height: 115)], query: box(100, 100, below: 0), winner: 1),
        Case(
            name: "upscale tolerance 0: only smaller variants", held: [Held(width: 512, height: 320)], query: box(640, 400, below: 0),
            winner: nil),
        Case(name: "upscale tolerance 0: the exact size", held: [Held(width: 640, height: 400)], query: box(640, 400, below: 0), winner: 0),
        Case(
            name: "upscale tolerance 0: a whole original in a larger box", held: [Held(width: 320, height: 200, whole: true)],
            query: box(1024, 1024, below: 0), winner: 0),
        Case(
            name: "an upscale tolerance of its own", held: [Held(width: 88, height: 88), Held(width: 70, height: 70)],
            query: box(100, 100, t: 0.05, below: 0.15), winner: 0),
    ]

    static let key = "rule/photo.jpg"

    /// The answer of `tier` through the one tier interface.
    static func answer(_ tier: any CacheTier, _ c: Case) throws -> String? {
        let found = try tier.load(CacheKey(key), c.query)
        if case .hit(let quick) = tier.lookup(CacheKey(key), c.query) {
            #expect(Held(from: quick.variant).description == found.map { Held(from: $0.variant).description }, "\(c)")
        }
        return found.map { Held(from: $0.variant).description }
    }

    @Test(arguments: cases) func memory(_ c: Case) throws {
        let memory = ImageMemoryTier()
        for held in c.held {
            let variant = ImageVariant(descriptor: held.descriptor, isWholeOriginal: held.whole)
            memory.store(PixelImage(width: held.width, height: held.height, style: held.style), key: CacheKey(Self.key), variant: variant)
        }
        #expect(try Self.answer(memory, c) == c.winner.map { c.held[$0].description }, "\(c)")
    }

    @Test(arguments: cases) func disk(_ c: Case) throws {
        let scratch = ScratchDirectory()
        // Restarted: the index is rebuilt from the names alone, so the names must carry the rule's inputs.
        do {
            let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
            defer { disk.close() }
            for held in c.held {
                try disk.storeSynchronously(
                    PixelImage(width: held.width, height: held.height, style: held.style), forKey: Self.key, mode: held.mode,
                    isWholeOriginal: held.whole)
            }
        }
        let disk = try DiskTier(directory: scratch.path, configuration: unwatchedConfiguration())
        defer { disk.close() }
        #expect(disk.contains(key: Self.key, matching: c.query) == (c.winner != nil), "\(c)")
        #expect(try Self.answer(disk, c) == c.winner.map { c.held[$0].description }, "\(c)")
    }

    /// Tables hold fixed formats, never a whole original: the cases without one, each held
    /// variant a configured format holding the key's entry.
    @Test(arguments: cases.filter { !$0.held.contains(where: \.whole) }) func tables(_ c: Case) throws {
        let scratch = ScratchDirectory()
        let formats = c.held.enumerated().map { i, held in
            ImageTableFormat(
                name: "f\(i)", family: "rule", size: held.descriptor.size, style: held.style, mode: held.mode, maximumCount: 4)
        }
        let tables = try ImageTableCache(directory: scratch.path, formats: formats)
        for (format, held) in zip(formats, c.held) {
            _ = try tables.table(named: format.name).setImage(
                PixelImage(width: held.width, height: held.height, style: held.style), for: CacheKey(Self.key).entityID, sourceVersion: 1)
        }
        #expect(tables.format(for: c.query)?.name == c.winner.map { "f\($0)" }, "\(c)")
        #expect(try Self.answer(tables, c) == c.winner.map { c.held[$0].description }, "\(c)")
    }
}

extension VariantRuleTests.Held {
    init(from variant: ImageVariant) {
        let d = variant.descriptor
        self.init(width: d.size.width, height: d.size.height, mode: d.mode, style: d.style, whole: variant.isWholeOriginal)
    }

}
