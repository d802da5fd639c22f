import Strata
import Testing

@testable import StrataService

/// The engine's errors as HTTP answers: an original over a byte limit — a directory's file over
/// `source.maxFileSize`, a pyramid's over `iiif.maxSourceSize`, an origin's body over its
/// `maxBodySize` — is a 413 that names the key to raise; other origin failures stay 502 / 504.
@Suite struct ServiceErrorTests {
    static func answer(_ reason: SourceError.Reason) -> ServiceError {
        ServiceError(ImageCacheError.source(SourceError(key: "scans/a.tif", reason: reason)))
    }

    static func origin(_ kind: HTTPOriginError.Kind, settings: String = "source.s3") -> SourceError.Reason {
        .origin(HTTPOriginError(kind: kind, url: "http://127.0.0.1:9000/originals/scans/a.tif", settings: settings))
    }

    @Test func anOriginalOverAByteLimitIs413NamingTheKeys() {
        let file = Self.answer(.tooLarge(bytes: 324_000_790, limit: 268_435_456))
        #expect(file.status == .contentTooLarge && file.code == "too_large")
        #expect(file.message.contains("324000790 bytes") && file.message.contains("268435456"), "\(file.message)")
        #expect(file.message.contains("source.maxFileSize") && file.message.contains("iiif.maxSourceSize"), "\(file.message)")
        let grown = Self.answer(.tooLarge(bytes: nil, limit: 4096))
        #expect(grown.status == .contentTooLarge && grown.message.contains("grew while it was read"), "\(grown.message)")
        for kind in [HTTPOriginError.Kind.bodyTooLarge(limit: 1000, declared: 2000), .bodyTooLarge(limit: 1000, declared: nil)] {
            let body = Self.answer(Self.origin(kind))
            #expect(body.status == .contentTooLarge && body.code == "too_large", "\(body)")
            #expect(body.message.contains("source.s3.maxBodySize") && body.message.contains("iiif.maxSourceSize"), "\(body.message)")
        }
    }

    @Test func otherOriginFailuresStay502And504() {
        #expect(Self.answer(Self.origin(.timeout(.read))).status == .gatewayTimeout)
        #expect(Self.answer(Self.origin(.status(500))).status == .badGateway)
        #expect(Self.answer(Self.origin(.connection("refused"), settings: "source.http")).status == .badGateway)
    }
}
