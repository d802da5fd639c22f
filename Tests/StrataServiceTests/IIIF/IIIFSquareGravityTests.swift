import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// IIIF's `square` region placed by `iiif.squareGravity`: the canonical `Link` names the region
/// chosen, and a `smart` square finds the subject of a wide image.
@Suite("IIIF square gravity", .timeLimit(.minutes(5)))
struct IIIFSquareGravityTests {
    /// A source directory holding `scene.jpg`: 1280×800, an orange disc near the right edge.
    static func sceneDirectory() throws -> String {
        let directory = makeScratchDirectory("square-scene")
        let scene = SubjectScenes.disc(PixelSize(width: 1280, height: 800), cx: 1150, cy: 420, radius: 100)
        try Data(ImageEncoder.encode(scene, as: .jpeg, quality: 92)).write(to: URL(fileURLWithPath: directory + "/scene.jpg"))
        return directory
    }

    static func region(_ gravity: String?, directory: String) async throws -> String? {
        var settings = ["source.directory": directory]
        if let gravity { settings["iiif.squareGravity"] = gravity }
        let server = try await TestServer.start(settings)
        let answer = try await server.get("/iiif/3/scene.jpg/square/200,/0/default.jpg")
        try await server.stop()
        #expect(answer.status == 200, "\(answer.text)")
        // …/scene.jpg/{region}/200,200/0/default.jpg>;rel="canonical"
        let link = answer.header("Link") ?? ""
        guard let range = link.range(of: "/scene.jpg/") else { return nil }
        return String(link[range.upperBound...].prefix { $0 != "/" })
    }

    @Test func theSquareSitsWhereTheGravitySays() async throws {
        let directory = try Self.sceneDirectory()
        #expect(try await Self.region(nil, directory: directory) == "240,0,800,800")
        #expect(try await Self.region("west", directory: directory) == "0,0,800,800")
        #expect(try await Self.region("fp:1,0.5", directory: directory) == "480,0,800,800")
        #expect(try await Self.region("smart", directory: directory) == "480,0,800,800", "the disc is at x 1050…1250")
    }

    @Test func aBadGravityIsAConfigurationErrorNamingTheKey() async throws {
        await #expect {
            _ = try await TestServer.start(["iiif.squareGravity": "middle"])
        } throws: { error in
            "\(error)".contains("iiif.squareGravity")
        }
    }
}
