import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// A decoder that has just refused a broken file must decode the next good one: the engine
/// keeps serving after bad input.
@Suite struct DecoderRecoveryTests {
    @Test func aDecoderRecoversAfterEveryBrokenFixture() throws {
        let broken = try FileManager.default.contentsOfDirectory(atPath: Fixtures.url("broken").path).sorted()
        let good = Fixtures.bytes("jpeg/orientation-1.jpg")
        let goodWebP = Fixtures.bytes("webp/kite-320x200-lossless.webp")
        let expected = try ImageDecoder().decode(good)
        for name in broken {
            let decoder = ImageDecoder()
            #expect(throws: ImageDecodingError.self, "broken/\(name)") { _ = try decoder.decode(Fixtures.bytes("broken/\(name)")) }
            do {
                let again = try decoder.decode(good)
                #expect(again.hasSamePixels(as: expected), "good JPEG after broken/\(name) decoded differently")
            } catch {
                Issue.record("good JPEG after broken/\(name): \(error)")
            }
            #expect(throws: Never.self, "good WebP after broken/\(name)") { _ = try decoder.decode(goodWebP) }
        }
    }
}
