import Strata
import Testing

@testable import StrataService

/// The IIIF URL grammar: every region, size, rotation, quality and format form parses to its
/// value; malformed ones are 400s naming the part.
@Suite("IIIF grammar")
struct IIIFGrammarTests {
    @Test(arguments: [
        ("full", IIIFRegion.full),
        ("square", .square),
        ("0,0,10,20", .pixels(x: 0, y: 0, width: 10, height: 20)),
        ("125,15,120,140", .pixels(x: 125, y: 15, width: 120, height: 140)),
        ("pct:41.6,7.5,40,70", .percent(x: 41.6, y: 7.5, width: 40, height: 70)),
        ("pct:0,0,100,100", .percent(x: 0, y: 0, width: 100, height: 100)),
        ("pct:.5,0,50.,1", .percent(x: 0.5, y: 0, width: 50, height: 1)),
    ])
    func regions(text: String, expected: IIIFRegion) throws {
        #expect(try IIIFRegion(parsing: Substring(text)) == expected)
    }

    @Test(arguments: [
        "", "Full", "0,0,10", "0,0,10,20,5", "-1,0,10,10", "0,0,0,10", "0,0,10,0", "a,b,c,d", "1.5,0,10,10", "pct:", "pct:1,2,3",
        "pct:0,0,0,10", "pct:1e2,0,10,10", "pct:nan,0,1,1", " 0,0,1,1", "0,0,1,1 ", "+1,0,1,1",
    ])
    func malformedRegions(text: String) {
        #expect(throws: ServiceError.self) { try IIIFRegion(parsing: Substring(text)) }
        do {
            _ = try IIIFRegion(parsing: Substring(text))
        } catch {
            #expect(error.status == .badRequest)
            #expect(error.code == "bad_region")
        }
    }

    @Test(arguments: [
        ("max", IIIFSize(.max)),
        ("^max", IIIFSize(.max, upscale: true)),
        ("150,", IIIFSize(.width(150))),
        ("^150,", IIIFSize(.width(150), upscale: true)),
        (",150", IIIFSize(.height(150))),
        ("^,150", IIIFSize(.height(150), upscale: true)),
        ("pct:50", IIIFSize(.percent(50))),
        ("^pct:150.5", IIIFSize(.percent(150.5), upscale: true)),
        ("225,100", IIIFSize(.exact(width: 225, height: 100))),
        ("^360,360", IIIFSize(.exact(width: 360, height: 360), upscale: true)),
        ("!225,100", IIIFSize(.fit(width: 225, height: 100))),
        ("^!225,100", IIIFSize(.fit(width: 225, height: 100), upscale: true)),
    ])
    func sizes3(text: String, expected: IIIFSize) throws {
        #expect(try IIIFSize(parsing: Substring(text), version: .v3) == expected)
    }

    @Test(arguments: [
        ("full", IIIFSize(.max)),
        ("max", IIIFSize(.max)),
        ("150,", IIIFSize(.width(150))),
        (",150", IIIFSize(.height(150))),
        ("pct:50", IIIFSize(.percent(50))),
        ("225,100", IIIFSize(.exact(width: 225, height: 100))),
        ("!225,100", IIIFSize(.fit(width: 225, height: 100))),
    ])
    func sizes2(text: String, expected: IIIFSize) throws {
        #expect(try IIIFSize(parsing: Substring(text), version: .v2) == expected)
    }

    @Test(arguments: [
        ("full", IIIFVersion.v3), ("^full", .v3), ("^max", .v2), ("^150,", .v2), ("", .v3), (",", .v3), ("!150,", .v3),
        ("!,150", .v3), ("150", .v3), ("a,", .v3), ("1,2,3", .v3), ("pct:", .v3), ("pct:0", .v3), ("pct:-5", .v3), ("^^max", .v3),
        ("-5,", .v3), ("max,", .v2),
    ])
    func malformedSizes(text: String, version: IIIFVersion) {
        do {
            _ = try IIIFSize(parsing: Substring(text), version: version)
            Issue.record("\(text) parsed")
        } catch {
            #expect(error.status == .badRequest)
            #expect(error.code == "bad_size")
        }
    }

    @Test(arguments: [
        ("0", IIIFRotation()), ("90", IIIFRotation(quarterTurns: 1)), ("180", IIIFRotation(quarterTurns: 2)),
        ("270", IIIFRotation(quarterTurns: 3)), ("360", IIIFRotation()), ("90.0", IIIFRotation(quarterTurns: 1)),
        ("!0", IIIFRotation(mirrored: true)), ("!90", IIIFRotation(mirrored: true, quarterTurns: 1)),
        ("!270", IIIFRotation(mirrored: true, quarterTurns: 3)),
    ])
    func rotations(text: String, expected: IIIFRotation) throws {
        #expect(try IIIFRotation(parsing: Substring(text)) == expected)
    }

    @Test(arguments: ["", "-90", "361", "!", "!!90", "abc", "90deg", "1e2"])
    func malformedRotations(text: String) {
        do {
            _ = try IIIFRotation(parsing: Substring(text))
            Issue.record("\(text) parsed")
        } catch {
            #expect(error.status == .badRequest)
            #expect(error.code == "bad_rotation")
        }
    }

    @Test(arguments: ["22.5", "45", "!10", "359.9"])
    func arbitraryAnglesAreNotImplemented(text: String) {
        do {
            _ = try IIIFRotation(parsing: Substring(text))
            Issue.record("\(text) parsed")
        } catch {
            #expect(error.status == .notImplemented)
        }
    }

    @Test func qualitiesAndFormats() throws {
        for quality in IIIFQuality.allCases { #expect(try IIIFQuality(parsing: Substring(quality.rawValue)) == quality) }
        for format in IIIFFormat.allCases { #expect(try IIIFFormat(parsing: Substring(format.rawValue)) == format) }
        for bad in ["", "grey", "Default", "native"] {
            #expect(throws: ServiceError.self) { try IIIFQuality(parsing: Substring(bad)) }
        }
        for bad in ["", "jpeg", "tif", "gif", "JPG"] {
            #expect(throws: ServiceError.self) { try IIIFFormat(parsing: Substring(bad)) }
        }
    }

    @Test func routes() throws {
        let id = try IIIFIdentifier(raw: "jpeg%2Fphoto.jpg")
        #expect(id.key == "jpeg/photo.jpg")
        #expect(id.raw == "jpeg%2Fphoto.jpg")
        #expect(try IIIFRoute(path: "/iiif/3/jpeg%2Fphoto.jpg") == .base(.v3, identifier: id))
        #expect(try IIIFRoute(path: "/iiif/2/jpeg%2Fphoto.jpg/info.json") == .info(.v2, identifier: id))
        let image = try IIIFRoute(path: "/iiif/3/jpeg%2Fphoto.jpg/0,0,512,512/!256,256/!90/gray.png")
        #expect(
            image
                == .image(
                    IIIFImageRequest(
                        version: .v3, identifier: id, region: .pixels(x: 0, y: 0, width: 512, height: 512),
                        size: IIIFSize(.fit(width: 256, height: 256)), rotation: IIIFRotation(mirrored: true, quarterTurns: 1),
                        quality: .gray, format: .png)))
        // Decoded once: %2525 is a literal %25 in the key.
        #expect(try IIIFIdentifier(raw: "a%2525b").key == "a%25b")
    }

    @Test(arguments: ["/iiif/3/a/b", "/iiif/3/a/full/max/0", "/iiif/3/a/full/max/0/default.jpg/x", "/iiif/3/a/b/full/max/0/default.jpg"])
    func otherSegmentCountsAreNotFound(path: String) {
        do {
            _ = try IIIFRoute(path: Substring(path))
            Issue.record("\(path) parsed")
        } catch {
            #expect(error.status == .notFound, "\(path): \(error)")
        }
    }

    @Test(arguments: [
        "/iiif/3/", "/iiif/3/a/full/max/0/default",
        "/iiif/3/%2E%2E%2Fetc/info.json", "/iiif/3/a%2F%2Fb/info.json", "/iiif/3/a%00b/info.json", "/iiif/3/%ZZ/info.json",
        "/iiif/3/.%2Fa/info.json", "/iiif/3/a/bad/max/0/default.jpg", "/iiif/3/a/full/bad/0/default.jpg",
        "/iiif/3/a/full/max/x/default.jpg", "/iiif/3/a/full/max/0/best.jpg", "/iiif/3/a/full/max/0/default.tif",
    ])
    func malformedRoutes(path: String) {
        // (The empty identifier of "/iiif/3/" is a 400 too.)
        do {
            _ = try IIIFRoute(path: Substring(path))
            Issue.record("\(path) parsed")
        } catch {
            #expect(error.status == .badRequest, "\(path): \(error)")
        }
    }
}
