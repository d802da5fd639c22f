import Strata

/// An absolute `http` or `https` URL split into the parts ``HTTPSource`` needs: where it
/// connects (scheme, host, port) and the path it asks for.
///
/// Parsed strictly, without Foundation: no user information (`user:password@`), no query or
/// fragment in a base URL, a host of letters, digits, `-` and `.` (or a bracketed IPv6
/// literal), a path of already-encoded characters. Everything ``HTTPSource`` sends is built from
/// one of these, so a key can only ever add path segments below the base path.
package struct OriginURL: Hashable, Sendable, CustomStringConvertible {
    /// `http` or `https`, lower-case.
    package var scheme: String
    /// Lower-case host name, or a bracketed IPv6 literal (`[::1]`).
    package var host: String
    /// The explicit port, or `nil` for the scheme's default.
    package var port: Int?
    /// The path (starts with `/`), percent-encoded, possibly with a query (`?…`) for a redirect
    /// target; never with a fragment.
    package var pathAndQuery: String

    package init(scheme: String, host: String, port: Int?, pathAndQuery: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.pathAndQuery = pathAndQuery
    }

    /// The port connections go to.
    package var effectivePort: Int { port ?? (scheme == "https" ? 443 : 80) }

    /// Whether `other` is the same origin (scheme, host, port): redirects to anything else are
    /// refused unless ``HTTPSource/Configuration/allowCrossHostRedirects`` is set.
    package func isSameOrigin(as other: OriginURL) -> Bool {
        scheme == other.scheme && host == other.host && effectivePort == other.effectivePort
    }

    package var description: String {
        let portPart = port.map { ":\($0)" } ?? ""
        return "\(scheme)://\(host)\(portPart)\(pathAndQuery)"
    }

    /// Why a URL was refused.
    package struct ParseError: Error, Equatable {
        package var reason: String
    }

    /// Parses an absolute URL. `allowQuery` admits a query (redirect targets); a fragment is
    /// dropped when `dropFragment` (redirect targets), else refused.
    package static func parse(_ text: String, allowQuery: Bool = false, dropFragment: Bool = false) throws(ParseError) -> OriginURL {
        var rest = Substring(text)
        if let hash = rest.firstIndex(of: "#") {
            guard dropFragment else { throw ParseError(reason: "a fragment ('#…') is not allowed") }
            rest = rest[..<hash]
        }
        guard let colon = rest.firstIndex(of: ":") else { throw ParseError(reason: "not an absolute URL (no scheme)") }
        let scheme = rest[..<colon].lowercased()
        guard scheme == "http" || scheme == "https" else {
            throw ParseError(reason: "the scheme must be http or https, not '\(scheme)'")
        }
        rest = rest[rest.index(after: colon)...]
        guard rest.hasPrefix("//") else { throw ParseError(reason: "no '//' and host after the scheme") }
        rest = rest.dropFirst(2)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        let (host, port) = try parseAuthority(authority)
        var path = String(rest[authorityEnd...])
        if path.isEmpty || path.hasPrefix("?") { path = "/" + path }
        if !allowQuery && path.contains("?") { throw ParseError(reason: "a query ('?…') is not allowed") }
        for byte in path.utf8 where !isPathOrQueryByte(byte) {
            throw ParseError(reason: "the path holds a character that must be percent-encoded: \(printable(byte))")
        }
        try checkPercentEscapes(path)
        return OriginURL(scheme: scheme, host: host, port: port, pathAndQuery: path)
    }

    /// Resolves a `Location` header against `self` (RFC 3986 §5.2, without dot-segment removal:
    /// the origin does that): an absolute URL, `//host/path`, `/path`, or a relative path.
    package func resolving(location: String) throws(ParseError) -> OriginURL {
        let trimmed = location.trimmingSpaces
        if trimmed.isEmpty { throw ParseError(reason: "an empty Location") }
        if trimmed.hasPrefix("//") {
            return try Self.parse(scheme + ":" + trimmed, allowQuery: true, dropFragment: true)
        }
        if Self.hasScheme(trimmed) {
            return try Self.parse(trimmed, allowQuery: true, dropFragment: true)
        }
        var target: String
        if trimmed.hasPrefix("/") {
            target = trimmed
        } else {
            let path = pathAndQuery.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)[0]
            let directory = path[...(path.lastIndex(of: "/") ?? path.startIndex)]
            target = String(directory) + trimmed
        }
        if let hash = target.firstIndex(of: "#") { target = String(target[..<hash]) }
        for byte in target.utf8 where !Self.isPathOrQueryByte(byte) {
            throw ParseError(reason: "the Location holds a character that must be percent-encoded: \(Self.printable(byte))")
        }
        try Self.checkPercentEscapes(target)
        var resolved = self
        resolved.pathAndQuery = target
        return resolved
    }

    /// This URL (whose path is a directory ending in `/`) followed by `segments`, each
    /// percent-encoded so that no byte of it can act as a delimiter.
    package func appending(encodedSegments segments: [String]) -> OriginURL {
        var url = self
        url.pathAndQuery += segments.map(Self.percentEncode).joined(separator: "/")
        return url
    }

    /// `segment` with every byte outside RFC 3986's unreserved set (`A–Z a–z 0–9 - . _ ~`)
    /// written as `%XX`: `/`, `?`, `#`, `%`, `;`, spaces and every non-ASCII byte included.
    package static func percentEncode(_ segment: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(segment.utf8.count)
        for byte in segment.utf8 {
            if isUnreserved(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0xF)])
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func parseAuthority(_ authority: Substring) throws(ParseError) -> (String, Int?) {
        if authority.contains("@") {
            throw ParseError(
                reason: "user information ('user:password@') is not allowed in the URL; send credentials with source.http.headers")
        }
        var hostPart = authority
        var portPart: Substring? = nil
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw ParseError(reason: "an unclosed '[' in the host") }
            hostPart = authority[...close]
            let inner = authority[authority.index(after: authority.startIndex)..<close]
            guard !inner.isEmpty, inner.utf8.allSatisfy({ isHexDigit($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else {
                throw ParseError(reason: "'\(hostPart)' is not an IPv6 address")
            }
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw ParseError(reason: "unexpected '\(after)' after the IPv6 address") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
            guard !hostPart.isEmpty, hostPart.utf8.allSatisfy(isHostByte) else {
                throw ParseError(reason: "'\(hostPart)' is not a host name (letters, digits, '-' and '.')")
            }
        } else {
            guard !hostPart.isEmpty else { throw ParseError(reason: "no host") }
            guard hostPart.utf8.allSatisfy(isHostByte) else {
                throw ParseError(reason: "'\(hostPart)' is not a host name (letters, digits, '-' and '.')")
            }
        }
        var port: Int? = nil
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value), portPart.utf8.allSatisfy(isDigit) else {
                throw ParseError(reason: "the port '\(portPart)' is not a number within 1...65535")
            }
            port = value
        }
        return (hostPart.lowercased(), port)
    }

    /// Every `%` starts a two-hex-digit escape.
    private static func checkPercentEscapes(_ text: String) throws(ParseError) {
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            if bytes[i] == UInt8(ascii: "%") {
                guard i + 2 < bytes.count, isHexDigit(bytes[i + 1]), isHexDigit(bytes[i + 2]) else {
                    throw ParseError(reason: "a '%' that does not start a %XX escape")
                }
                i += 3
            } else {
                i += 1
            }
        }
    }

    /// Whether `text` starts with `scheme:` (a letter, then letters, digits, `+`, `-`, `.`).
    private static func hasScheme(_ text: String) -> Bool {
        guard let first = text.utf8.first, isAlpha(first) else { return false }
        for byte in text.utf8.dropFirst() {
            if byte == UInt8(ascii: ":") { return true }
            if !(isAlpha(byte) || isDigit(byte) || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")) {
                return false
            }
        }
        return false
    }

    private static func printable(_ byte: UInt8) -> String {
        byte >= 0x21 && byte < 0x7F ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
    }

    package static func isUnreserved(_ b: UInt8) -> Bool {
        isAlpha(b) || isDigit(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_")
            || b == UInt8(ascii: "~")
    }

    private static func isAlpha(_ b: UInt8) -> Bool { (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") }
    private static func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
    private static func isHexDigit(_ b: UInt8) -> Bool {
        isDigit(b) || ((b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "f"))
    }
    private static func isHostByte(_ b: UInt8) -> Bool { isAlpha(b) || isDigit(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") }

    /// RFC 3986 `pchar`, `/`, `?` and `%` (escapes checked separately).
    private static func isPathOrQueryByte(_ b: UInt8) -> Bool {
        if isUnreserved(b) { return true }
        switch b {
        case UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"),
            UInt8(ascii: "="), UInt8(ascii: ":"), UInt8(ascii: "@"), UInt8(ascii: "/"), UInt8(ascii: "?"),
            UInt8(ascii: "%"):
            return true
        default:
            return false
        }
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
