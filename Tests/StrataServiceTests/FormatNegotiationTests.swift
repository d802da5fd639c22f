import Foundation
import Strata
import StrataTestSupport
import Testing

@testable import StrataService

/// `Accept` negotiation: the first of `http.formats` that applies — AVIF, WebP when named, then
/// JPEG for opaque pixels and PNG for translucent ones — with `Vary: Accept`; `format=` wins.
@Suite("Format negotiation", .timeLimit(.minutes(5)))
struct FormatNegotiationTests {
    static let browser = "image/avif,image/webp,image/apng,image/svg+xml,image/*,*/*;q=0.8"
    static let webpOnly = "image/webp,*/*"
    static let avifOnly = "image/avif"
    static let any = "image/*,*/*;q=0.8"

    /// The outcome for every `Accept` × `http.formats` pair of the matrix (pixels aside).
    @Test(
        arguments: [
            // The default order: AVIF, WebP, JPEG (PNG for alpha).
            ([ImageFormat.avif, .webp, .jpeg, .png], browser, FormatNegotiation.Outcome.format(.avif)),
            ([.avif, .webp, .jpeg, .png], webpOnly, .format(.webp)),
            ([.avif, .webp, .jpeg, .png], avifOnly, .format(.avif)),
            ([.avif, .webp, .jpeg, .png], "image/avif;q=0, image/webp", .format(.webp)),
            ([.avif, .webp, .jpeg, .png], "IMAGE/AVIF ; q=0.5", .format(.avif)),
            ([.avif, .webp, .jpeg, .png], any, .byAlpha),
            ([.avif, .webp, .jpeg, .png], "", .byAlpha),
            // WebP preferred to AVIF.
            ([.webp, .avif, .jpeg, .png], browser, .format(.webp)),
            ([.webp, .avif, .jpeg, .png], avifOnly, .format(.avif)),
            // No AVIF at all.
            ([.webp, .jpeg, .png], avifOnly, .byAlpha),
            // No PNG: JPEG whatever the pixels.
            ([.avif, .jpeg], webpOnly, .format(.jpeg)),
            ([.avif, .webp, .jpeg], any, .format(.jpeg)),
            // PNG before JPEG, or alone: PNG whatever the pixels.
            ([.avif, .webp, .png, .jpeg], any, .format(.png)),
            ([.avif, .png], webpOnly, .format(.png)),
            // JPEG first: AVIF is never reached.
            ([.jpeg, .png, .avif], avifOnly, .byAlpha),
        ])
    func outcome(formats: [ImageFormat], accept: String, expected: FormatNegotiation.Outcome) {
        #expect(FormatNegotiation.negotiate(formats, accept: accept.isEmpty ? [] : [accept]) == expected)
    }

    @Test func severalAcceptFieldsCount() {
        #expect(FormatNegotiation.negotiate([.avif, .webp, .jpeg], accept: ["image/png", "image/avif"]) == .format(.avif))
    }

    static let photo = "/images/jpeg/path-2560x1600.jpg?w=240&h=240"
    static let translucent = "/images/webp/cups-640x400-alpha.webp?w=240&h=240"

    /// Through the server: each `Accept` × opaque/translucent pixels gets the matrix's format,
    /// always with `Vary: Accept`; AVIF and WebP keep the alpha; `format=` is not negotiated.
    @Test func theServerAnswersTheMatrix() async throws {
        let server = try await TestServer.start(disk: false)
        let cases: [(target: String, accept: String, type: String)] = [
            (Self.photo, Self.browser, "image/avif"), (Self.photo, Self.webpOnly, "image/webp"), (Self.photo, Self.any, "image/jpeg"),
            (Self.translucent, Self.browser, "image/avif"), (Self.translucent, Self.webpOnly, "image/webp"),
            (Self.translucent, Self.any, "image/png"),
        ]
        for (target, accept, type) in cases {
            let answer = try await server.get(target, headers: [("Accept", accept)])
            #expect(answer.status == 200)
            #expect(answer.header("Content-Type") == type, "\(target) with \(accept)")
            #expect(answer.header("Vary") == "Accept", "\(target) with \(accept)")
        }
        let alpha = try await server.get(Self.translucent, headers: [("Accept", Self.avifOnly)])
        #expect(try AVIFReference.info(alpha.body)["Alpha"] == "Not premultiplied")
        // format= wins over Accept, and varies with nothing.
        for (format, type) in [("jpeg", "image/jpeg"), ("png", "image/png"), ("webp", "image/webp"), ("avif", "image/avif")] {
            let named = try await server.get(
                Self.photo + "&format=\(format)", headers: [("Accept", format == "avif" ? "image/webp" : Self.browser)])
            #expect(named.header("Content-Type") == type)
            #expect(named.header("Vary") == nil)
        }
        try await server.stop()
    }

    /// `http.formats` reorders and removes formats: WebP before AVIF, no PNG (translucent pixels
    /// get JPEG, composited over black).
    @Test func theConfiguredOrderIsFollowed() async throws {
        let server = try await TestServer.start(["http.formats": "webp, avif, jpeg"], disk: false)
        let cases: [(target: String, accept: String, type: String)] = [
            (Self.photo, Self.browser, "image/webp"), (Self.photo, Self.avifOnly, "image/avif"), (Self.photo, Self.any, "image/jpeg"),
            (Self.translucent, Self.any, "image/jpeg"), (Self.translucent, Self.avifOnly, "image/avif"),
        ]
        for (target, accept, type) in cases {
            let answer = try await server.get(target, headers: [("Accept", accept)])
            #expect(answer.header("Content-Type") == type, "\(target) with \(accept)")
            #expect(answer.header("Vary") == "Accept")
        }
        try await server.stop()
    }
}
