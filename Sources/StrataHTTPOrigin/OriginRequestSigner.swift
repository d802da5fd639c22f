import NIOHTTP1

/// Signs each request an ``HTTPSource`` sends to its base URL's origin (never to another host
/// after a redirect): S3's Signature Version 4 (`S3Source`). Called last, when every other
/// header is set, so that the signature covers the request as it goes out. Cost: one HMAC
/// chain per request.
package protocol OriginRequestSigner: Sendable {
    /// Adds the signature's headers to `headers` (those of a `method` request for `url`).
    func sign(_ headers: inout HTTPHeaders, method: HTTPMethod, url: OriginURL) throws
}
