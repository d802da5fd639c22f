import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// JPEG XL answers: `format=jxl`, and `Accept: image/jxl` negotiation, which never hands JPEG XL
/// bytes to a client that did not name it (the encoded cache keys each format apart; every
/// negotiated answer says `Vary: Accept`).
@Suite("JPEG XL answers", .timeLimit(.minutes(5)))
struct JXLAnswerTests {
    /// Safari 17's `Accept` for images: the one browser that names `image/jxl`.
    static let safari =
        "image/webp,image/avif,image/jxl,image/heic,image/heic-sequence,video/*;q=0.8,image/png,image/svg+xml,image/*;q=0.8,*/*;q=0.5"
    static let chrome = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
    static let jxlOnly = "image/jxl"
    static let any = "image/*,*/*;q=0.8"
    static let photo = "/images/jpeg/path-2560x1600.jpg?w=240&h=240"

    /// djxl's decode of an answer.
    static func djxl(_ bytes: [UInt8]) throws -> PixelImage {
        let directory = TempDirectory()
        let input = directory.path + "/answer.jxl", output = directory.path + "/answer.png"
        _ = FileManager.default.createFile(atPath: input, contents: Data(bytes))
        try ExternalTools.run("djxl", [input, output, "--bits_per_sample=8"])
        return try ImageDecoder().decode([UInt8](Data(contentsOf: URL(fileURLWithPath: output))))
    }

    @Test(
        "negotiation: JPEG XL only for a client that names image/jxl with q > 0",
        arguments: [
            // The default order: AVIF, JPEG XL, WebP, then JPEG (PNG for alpha).
            ([ImageFormat.avif, .jxl, .webp, .jpeg, .png], safari, FormatNegotiation.Outcome.format(.avif)),
            ([.avif, .jxl, .webp, .jpeg, .png], jxlOnly, .format(.jxl)),
            ([.avif, .jxl, .webp, .jpeg, .png], "image/jxl, image/webp", .format(.jxl)),
            ([.avif, .jxl, .webp, .jpeg, .png], chrome, .format(.avif)),
            ([.avif, .jxl, .webp, .jpeg, .png], "image/webp", .format(.webp)),
            ([.avif, .jxl, .webp, .jpeg, .png], "image/jxl;q=0, image/webp", .format(.webp)),
            ([.avif, .jxl, .webp, .jpeg, .png], any, .byAlpha),
            ([.avif, .jxl, .webp, .jpeg, .png], "", .byAlpha),
            // JPEG XL preferred: Safari gets it, Chrome does not.
            ([.jxl, .avif, .webp, .jpeg, .png], safari, .format(.jxl)),
            ([.jxl, .avif, .webp, .jpeg, .png], chrome, .format(.avif)),
            // Not listed: never.
            ([.avif, .webp, .jpeg, .png], jxlOnly, .byAlpha),
        ])
    func outcome(formats: [ImageFormat], accept: String, expected: FormatNegotiation.Outcome) {
        #expect(FormatNegotiation.negotiate(formats, accept: accept.isEmpty ? [] : [accept]) == expected)
    }

    @Test func formatJXLAnswersAJXLOfTheVariant() async throws {
        let server = try await TestServer.start(disk: false)
        let target = "/images/jpeg/eveningglow-1024x640-progressive.jpg?w=320&format=jxl"
        let answer = try await server.get(target, headers: [("Accept", Self.chrome)])
        #expect(answer.status == 200)
        #expect(answer.header("Content-Type") == "image/jxl")
        #expect(answer.header("Vary") == nil, "format= named: nothing negotiated")
        let quality = server.server.settings.quality
        #expect(answer.header("ETag")?.hasSuffix("-jxl-q\(quality)\"") == true, "\(answer.header("ETag") ?? "")")
        #expect(ImageFormatDetector.detect(answer.body) == .jxl)
        #expect(try Self.djxl(answer.body).size == PixelSize(width: 320, height: 200))
        let finer = try await server.get(target + "&quality=95")
        #expect(finer.header("ETag")?.hasSuffix("-jxl-q95\"") == true)
        #expect(finer.body.count > answer.body.count)
        let again = try await server.get(target)
        #expect(again.header("X-Strata-Tier") == "encoded" && again.body == answer.body)
        try await server.stop()
    }

    /// One variant asked for by a JPEG XL client, then by others: each gets its own format from
    /// the encoded cache's own entry, never the JPEG XL bytes.
    @Test func onlyClientsThatAskGetJXL() async throws {
        let server = try await TestServer.start(disk: false)
        let jxl = try await server.get(Self.photo, headers: [("Accept", Self.jxlOnly)])
        #expect(jxl.header("Content-Type") == "image/jxl")
        #expect(jxl.header("Vary") == "Accept")
        #expect(ImageFormatDetector.detect(jxl.body) == .jxl)
        for (accept, type, format) in [
            (Self.chrome, "image/avif", ImageFormat.avif), (Self.any, "image/jpeg", .jpeg), ("image/webp", "image/webp", .webp),
            (Self.safari, "image/avif", .avif),
        ] {
            let answer = try await server.get(Self.photo, headers: [("Accept", accept)])
            #expect(answer.header("Content-Type") == type, "\(accept)")
            #expect(ImageFormatDetector.detect(answer.body) == format, "\(accept)")
            #expect(answer.header("Vary") == "Accept")
        }
        let none = try await server.get(Self.photo)
        #expect(none.header("Content-Type") == "image/jpeg" && ImageFormatDetector.detect(none.body) == .jpeg)
        let again = try await server.get(Self.photo, headers: [("Accept", Self.jxlOnly)])
        #expect(again.header("X-Strata-Tier") == "encoded" && again.body == jxl.body)
        try await server.stop()
    }

    /// `http.formats` with JPEG XL first: Safari gets JPEG XL, Chrome AVIF; translucent pixels
    /// keep their alpha.
    @Test func jxlFirstInTheConfiguredOrder() async throws {
        let server = try await TestServer.start(["http.formats": "jxl, avif, webp, jpeg, png"], disk: false)
        let safari = try await server.get(Self.photo, headers: [("Accept", Self.safari)])
        #expect(safari.header("Content-Type") == "image/jxl")
        let chrome = try await server.get(Self.photo, headers: [("Accept", Self.chrome)])
        #expect(chrome.header("Content-Type") == "image/avif")
        let translucent = try await server.get("/images/webp/cups-640x400-alpha.webp?w=240&h=240", headers: [("Accept", Self.jxlOnly)])
        #expect(translucent.header("Content-Type") == "image/jxl")
        #expect(try ImageDecoder().readHeader(translucent.body).hasAlpha)
        try await server.stop()
    }
}
