import Foundation
import Hummingbird
import Strata

/// An image request the service refuses or cannot answer: an HTTP status, a short stable code
/// and a message that says what to change. Sent as a small JSON body,
/// `{"status":404,"error":"not_found","message":"…"}`.
///
/// Cost: built only on the error path.
public struct ServiceError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: HTTPResponse.Status
    /// Stable, machine-readable (`bad_parameter`, `bad_signature`, `not_found`, …).
    public var code: String
    public var message: String
    /// Seconds for `Retry-After` (load shedding).
    public var retryAfter: Int?

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String, retryAfter: Int? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    package static func badParameter(_ message: String) -> ServiceError { ServiceError(.badRequest, "bad_parameter", message) }

    /// The code of an original that changed under a request (503: asking again reads the new one).
    package static let originalChanged = "original_changed"

    /// The engine's error as an HTTP answer: 400 for a bad request or a key the source refuses,
    /// 404 for an unknown key, 413 over the pixel or byte limit (an origin's body limit too),
    /// 422 undecodable, 502/504 origin
    /// failures, 500 when a tier's own files fail, 503 when shutting down or when the work is larger
    /// than the whole `render.memoryLimit`.
    package init(_ error: ImageCacheError) {
        switch error {
        case .invalidRequest(_, let reason):
            self.init(.badRequest, "bad_parameter", reason)
        case .notFound(let key), .noSource(let key):
            self.init(.notFound, "not_found", "no image \(key.debugDescription) in the source")
        case .decoding(let key, let decoding):
            if case .operation(let message) = decoding.reason {
                self.init(.badRequest, "bad_parameter", "\(key.debugDescription): \(message)")
            } else if case .tooManyFrames = decoding.reason {
                self.init(.contentTooLarge, "too_large", "\(key.debugDescription): \(decoding)")
            } else if case .tooLarge(let pixels, let limit) = decoding.reason {
                self.init(
                    .contentTooLarge, "too_large",
                    "\(key.debugDescription) has \(pixels) pixels, over the limit of \(limit) (source.maxPixels: raise it, or let a tile pyramid serve it: set iiif.pyramidPath, or disk.path, beside which pyramids go by default; an animation's frames × canvas: source.maxAnimationPixels, or ask frames=1)"
                )
            } else {
                self.init(.unprocessableContent, "undecodable", "\(key.debugDescription) cannot be decoded: \(decoding)")
            }
        case .source(let source):
            switch source.reason {
            case .invalidKey(let why):
                self.init(.badRequest, "bad_key", "\(source.key.debugDescription) is not a valid key: \(why)")
            case .origin(let origin):
                if case .bodyTooLarge = origin.kind {
                    // As a directory's file over source.maxFileSize: the same 413, its key named.
                    self.init(
                        .contentTooLarge, "too_large",
                        "\(source.key.debugDescription): \(origin) (a tile pyramid copies its original to disk instead, up to iiif.maxSourceSize)"
                    )
                } else if case .timeout = origin.kind {
                    self.init(.gatewayTimeout, "origin_timeout", "the origin did not answer in time for \(source.key.debugDescription)")
                } else {
                    self.init(.badGateway, "origin_failed", "the origin failed for \(source.key.debugDescription): \(origin.kind)")
                }
            case .notFound:
                self.init(.notFound, "not_found", "no image \(source.key.debugDescription) in the source")
            case .changed(let why):
                self.init(
                    .serviceUnavailable, Self.originalChanged, "the original \(source.key.debugDescription) changed (\(why))",
                    retryAfter: 1)
            case .tooLarge(let bytes, let limit):
                let size = bytes.map { "is \($0) bytes" } ?? "grew while it was read"
                self.init(
                    .contentTooLarge, "too_large",
                    "the original \(source.key.debugDescription) \(size), over the limit of \(limit) bytes (source.maxFileSize for an original read whole into memory; a tile pyramid copies its original to disk, up to iiif.maxSourceSize: set iiif.pyramidPath, or disk.path, beside which pyramids go by default)"
                )
            default:
                self.init(.internalServerError, "source_failed", "the source failed for \(source.key.debugDescription)")
            }
        case .tier(let failure):
            self.init(.internalServerError, "tier_failed", failure.description)
        case .cancelled:
            self.init(.serviceUnavailable, "cancelled", "the request was cancelled", retryAfter: 1)
        case .shutDown:
            self.init(.serviceUnavailable, "shutting_down", "the service is shutting down", retryAfter: 1)
        case .overMemoryLimit(let key, let refusal):
            // No Retry-After: the same request will not fit later either.
            self.init(.serviceUnavailable, "over_memory_limit", "\(key.debugDescription) \(refusal)")
        }
    }

    /// The JSON response.
    package func response(headers extra: HTTPFields = [:]) -> Response {
        struct Body: Encodable {
            var status: Int
            var error: String
            var message: String
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(Body(status: status.code, error: code, message: message))) ?? Data("{}".utf8)
        var headers = extra
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: json)))
    }
}
