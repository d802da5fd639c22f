import NIOHTTP1
import StrataHTTPOrigin

/// Signs requests to a bucket with AWS Signature Version 4 (``SigV4Signer``): the `Host` header
/// set to what the connection will send, the payload hash of an empty body (GET, HEAD, DELETE)
/// or the one given, and the time from this machine's clock.
struct S3RequestSigner: OriginRequestSigner {
    var signer: SigV4Signer

    func sign(_ headers: inout HTTPHeaders, method: HTTPMethod, url: OriginURL) throws {
        sign(&headers, method: method, url: url, payloadHash: SigV4Signer.emptyPayloadHash)
    }

    /// Signs the request with `headers` whose body hashes to `payloadHash` (hex SHA-256).
    func sign(_ headers: inout HTTPHeaders, method: HTTPMethod, url: OriginURL, payloadHash: String) {
        let host = url.port.map { "\(url.host):\($0)" } ?? url.host
        headers.replaceOrAdd(name: "host", value: host)
        let parts = url.pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let query = parts.count > 1 ? Self.decodedQuery(String(parts[1])) : []
        var signed: [(String, String)] = [("host", host)]
        for name in ["range", "if-none-match", "if-modified-since", "content-type", "content-length"] {
            if let value = headers.first(name: name) { signed.append((name, value)) }
        }
        for header in headers where header.name.lowercased().hasPrefix("x-amz-") {
            signed.append((header.name.lowercased(), header.value))
        }
        let added = signer.sign(
            method: method.rawValue, path: String(parts[0]), query: query, headers: signed, payloadHash: payloadHash,
            date: SigV4Date.now())
        for (name, value) in added { headers.replaceOrAdd(name: name, value: value) }
    }

    /// `a=1&b=x%20y` as decoded pairs (the signer encodes them again, canonically).
    static func decodedQuery(_ query: String) -> [(String, String)] {
        query.split(separator: "&").map { item in
            let pair = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (percentDecoded(pair[0]), pair.count > 1 ? percentDecoded(pair[1]) : "")
        }
    }

    static func percentDecoded(_ text: Substring) -> String {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            if byte == UInt8(ascii: "%"), bytes.count >= 2,
                let value = UInt8(String(decoding: bytes.prefix(2), as: UTF8.self), radix: 16)
            {
                out.append(value)
                bytes = bytes.dropFirst(2)
            } else {
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
