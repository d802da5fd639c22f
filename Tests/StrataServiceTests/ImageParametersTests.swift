import Strata
import Testing

@testable import StrataService

/// `ImageParameters` parses the target's bytes in one pass: every parameter, percent-decoding,
/// and the refusals, checked without a server.
@Suite("Image parameters")
struct ImageParametersTests {
    static func parse(_ path: Substring, _ query: Substring?) throws(ServiceError) -> ImageParameters {
        try ImageParameters(path: path, query: query, maxDimension: 4000)
    }

    static func refusal(_ path: Substring, _ query: Substring?) -> String? {
        do {
            _ = try parse(path, query)
            return nil
        } catch {
            return error.message
        }
    }

    @Test func dprMultipliesTheBoxWithinTheMaximum() throws {
        let doubled = try Self.parse("a.jpg", "w=300&h=200&dpr=2")
        #expect(doubled.box == PixelSize(width: 600, height: 400) && doubled.dpr == 2 && doubled.dprText == "2")
        let half = try Self.parse("a.jpg", "w=301&dpr=1.5")
        #expect(half.box == PixelSize(width: 452, height: 4000) && half.dprText == "1.5")
        // Capped: the ratio is lowered so the larger side fits http.maxDimension (4000 here),
        // the box keeps its shape, and Content-DPR says the ratio used.
        let capped = try Self.parse("a.jpg", "w=2500&h=1000&mode=fill&dpr=4")
        #expect(capped.box == PixelSize(width: 4000, height: 1600) && capped.dpr == 1.6 && capped.dprText == "1.6")
        #expect(try Self.parse("a.jpg", "w=4000&dpr=3").box.width == 4000)
        #expect(try Self.parse("a.jpg", "w=300").dpr == nil)
        for bad in ["0.5", "1.25", "4.5", "two", "", "-1"] {
            #expect(Self.refusal("a.jpg", Substring("w=10&dpr=\(bad)"))?.contains("dpr=") == true, "dpr=\(bad)")
        }
    }

    @Test func gravityIsReadForFillOnly() throws {
        #expect(try Self.parse("a.jpg", "w=10&h=10&mode=fill").gravity == .center)
        #expect(try Self.parse("a.jpg", "w=10&h=10&mode=fill&gravity=northeast").gravity == .northeast)
        #expect(try Self.parse("a.jpg", "w=10&h=10&mode=fill&gravity=smart").gravity == .smart)
        #expect(try Self.parse("a.jpg", "w=10&h=10&mode=fill&gravity=fp:0.25,0.9").gravity == .focalPoint(x: 25, y: 90))
        #expect(try Self.parse("a.jpg", "w=10&h=10&mode=fill&gravity=fp%3A0.25%2C0.9").gravity == .focalPoint(x: 25, y: 90))
        #expect(Self.refusal("a.jpg", "w=10&h=10&gravity=north")?.contains("needs mode=fill") == true)
        for bad in ["up", "fp:2,0", "fp:0.5", "Smart", ""] {
            #expect(Self.refusal("a.jpg", Substring("w=10&h=10&mode=fill&gravity=\(bad)"))?.contains("gravity=") == true, "\(bad)")
        }
    }

    @Test func everyParameterIsRead() throws {
        let p = try Self.parse("jpeg/a.jpg", "w=300&h=200&mode=fill&tolerance=0.1&format=webp&quality=55&exact=1")
        #expect(p.key == "jpeg/a.jpg")
        #expect(p.box == PixelSize(width: 300, height: 200))
        #expect(p.mode == .fill)
        #expect(p.tolerance == 0.1)
        #expect(p.format == .webp)
        #expect(p.quality == 55)
        #expect(p.exact)
        // Defaults, one side only, an empty pair, `exact` without a value, the signature.
        let q = try Self.parse("x", "&h=90&&exact&sig=abc&")
        #expect(q.box == PixelSize(width: 4000, height: 90))
        #expect(q.mode == .fit && q.tolerance == nil && q.format == nil && q.quality == nil && q.exact)
        #expect(try Self.parse("x", "w=5&exact=false").exact == false)
    }

    @Test func valuesAndKeysArePercentDecoded() throws {
        let p = try Self.parse("photos/summer%202024/a%2Bb.jpg", "w=%33%30&format=%6apeg")
        #expect(p.key == "photos/summer 2024/a+b.jpg")
        #expect(p.box.width == 30 && p.format == .jpeg)
        #expect(try Self.parse("caf%C3%A9.jpg", "w=1").key == "café.jpg")
        #expect(try Self.parse("café.jpg", "w=1").key == "café.jpg")
    }

    @Test func refusalsNameWhatIsWrong() {
        let cases: [(Substring, Substring?, String)] = [
            ("a.jpg", "w=10&width=3", "unknown parameter \"width\""),
            ("a.jpg", "w=10&ww=3", "unknown parameter \"ww\""),
            ("a.jpg", "w=10&=3", "unknown parameter \"\""),
            ("a.jpg", "w=10&W=3", "unknown parameter \"W\""),
            ("a.jpg", "w=10&h=3&w=20", "parameter w is given twice"),
            ("a.jpg", "w=4001", "http.maxDimension"),
            ("a.jpg", "w=-1", "w=-1"),
            ("a.jpg", "h=1&mode=fill", "needs both"),
            ("a.jpg", nil, "give w, h or both"),
            ("a.jpg", "w=1&format=tiff", "format=tiff"),
            ("a.jpg", "w=1&exact=maybe", "exact=maybe"),
            ("a//b.jpg", "w=1", "segment"),
            ("../a.jpg", "w=1", "segment"),
            ("a/./b.jpg", "w=1", "segment"),
            ("a/", "w=1", "segment"),
            ("", "w=1", "segment"),
            ("a/%2e%2e/b.jpg", "w=1", "segment"),
            ("a%2Fb.jpg", "w=1", "segment"),
            ("a%00.jpg", "w=1", "segment"),
            ("a%zz.jpg", "w=1", "not valid percent-encoding"),
        ]
        for (path, query, named) in cases {
            let message = Self.refusal(path, query)
            #expect(message?.contains(named) == true, "\(path)?\(query ?? ""): \(message ?? "accepted")")
        }
    }
}

extension ImageParametersTests {
    /// Every name is read back as itself, and nothing else is (the parse picks a candidate by
    /// its first byte, then its second or third byte or its length where names share one): no
    /// prefix, extension or one-letter change of a name is taken for any name.
    @Test func namesRoundTrip() {
        let all = ImageParameters.Name.allCases
        for name in all {
            #expect(ImageParameters.Name(Substring(name.text).utf8) == name)
            #expect(ImageParameters.Name(Substring(name.text + "x").utf8) == nil)
            #expect(ImageParameters.Name(Substring(String(name.text.dropLast())).utf8) == nil)
            for i in name.text.indices {
                var changed = name.text
                changed.replaceSubrange(i...i, with: "q")
                let parsed = ImageParameters.Name(Substring(changed).utf8)
                #expect(parsed == nil || parsed?.text == changed, "\(changed) read as \(String(describing: parsed))")
            }
        }
        #expect(Set(all.map(\.text)).count == all.count)
    }
}
