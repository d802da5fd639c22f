import Foundation
import Strata

/// The encodings an image can be sent in. `raw` is the BGRA (or the variant's style) rows as
/// the engine holds them.
public enum ResponseFormat: String, Sendable, Hashable, CaseIterable {
    case webp, jpeg, png, raw

    /// The encoder's format (`nil` for `raw`).
    var imageFormat: ImageFormat? {
        switch self {
        case .webp: return .webp
        case .jpeg: return .jpeg
        case .png: return .png
        case .raw: return nil
        }
    }

    var contentType: String {
        switch self {
        case .webp: return "image/webp"
        case .jpeg: return "image/jpeg"
        case .png: return "image/png"
        case .raw: return "application/octet-stream"
        }
    }
}

/// What an image URL asks for — `/images/{key}?w=&h=&mode=&tolerance=&format=&quality=&exact=`
/// — parsed and checked, before anything else runs.
///
/// The key is the path after `/images/`, each segment percent-decoded; a segment that is
/// empty, `.`, `..`, or decodes to one containing `/` or NUL is refused, so a key never
/// names anything outside the source. Unknown or repeated parameters are refused too (a
/// typo is a 400, not a silently different image). Cost: one pass over the target.
public struct ImageParameters: Sendable, Hashable {
    public var key: String
    public var box: PixelSize
    public var mode: ContentMode
    public var tolerance: Double?
    /// `nil`: negotiate from `Accept`.
    public var format: ResponseFormat?
    public var quality: Int?
    public var exact: Bool

    /// The route's prefix.
    static let prefix = "/images/"
    static let known: Set<Substring> = ["w", "h", "mode", "tolerance", "format", "quality", "exact", Substring(URLSigner.parameter)]

    /// Parses the raw path (after the route prefix) and query of a request target.
    public init(path: Substring, query: Substring?, maxDimension: Int) throws(ServiceError) {
        key = try Self.key(fromPath: path)
        // At most eight known names: a linear scan beats a dictionary here.
        var values: [(name: Substring, value: Substring)] = []
        for pair in (query ?? "").split(separator: "&", omittingEmptySubsequences: true) {
            let equals = pair.firstIndex(of: "=")
            let name = pair[..<(equals ?? pair.endIndex)]
            guard Self.known.contains(name) else {
                throw .badParameter(
                    "unknown parameter \(String(name).debugDescription): use w, h, mode, tolerance, format, quality, exact")
            }
            guard !values.contains(where: { $0.name == name }) else { throw .badParameter("parameter \(name) is given twice") }
            let raw = equals.map { pair[pair.index(after: $0)...] } ?? ""
            values.append((name, Self.decoded(raw)))
        }
        func value(_ name: Substring) -> Substring? { values.first { $0.name == name }?.value }
        func dimension(_ name: Substring) throws(ServiceError) -> Int? {
            guard let text = value(name) else { return nil }
            guard let value = Int(text), value >= 1, value <= maxDimension else {
                throw .badParameter("\(name)=\(text): expected a whole number of pixels, 1…\(maxDimension) (http.maxDimension)")
            }
            return value
        }
        let width = try dimension("w")
        let height = try dimension("h")
        switch value("mode") {
        case nil, "fit": mode = .fit
        case "fill": mode = .fill
        case let other?: throw .badParameter("mode=\(other): expected fit or fill")
        }
        switch (width, height) {
        case (nil, nil): throw .badParameter("give w, h or both (the box, in pixels)")
        case (let w?, let h?): box = PixelSize(width: w, height: h)
        case (let w?, nil), (nil, let w?):
            guard mode == .fit else { throw .badParameter("mode=fill needs both w and h") }
            // One side: the other is unbounded (up to the maximum), so it alone limits the fit.
            box = width != nil ? PixelSize(width: w, height: maxDimension) : PixelSize(width: maxDimension, height: w)
        }
        if let text = value("tolerance") {
            guard let value = Double(text), (0...1).contains(value) else {
                throw .badParameter("tolerance=\(text): expected a number in 0…1 (0: exactly this size)")
            }
            tolerance = value
        }
        if let text = value("format") {
            guard let value = ResponseFormat(rawValue: String(text)) else {
                throw .badParameter("format=\(text): expected webp, jpeg, png or raw")
            }
            format = value
        }
        if let text = value("quality") {
            guard let value = Int(text), (1...100).contains(value) else {
                throw .badParameter("quality=\(text): expected 1…100")
            }
            quality = value
        }
        switch value("exact") {
        case nil, "0", "false": exact = false
        case "1", "true", "": exact = true
        case let other?: throw .badParameter("exact=\(other): expected true or false")
        }
    }

    /// `text` percent-decoded (as it is when it has no `%`, or when the escapes are invalid).
    static func decoded(_ text: Substring) -> Substring {
        guard text.utf8.contains(UInt8(ascii: "%")) else { return text }
        return Substring(String(text).removingPercentEncoding ?? String(text))
    }

    /// Checks an already decoded key against the same rules: no empty, `.` or `..` segment,
    /// no NUL (an IIIF identifier, decoded once, may hold `/`).
    static func checkKey(_ key: String) throws(ServiceError) {
        for segment in key.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            guard !segment.isEmpty, !segment.elementsEqual(".".utf8), !segment.elementsEqual("..".utf8), !segment.contains(0) else {
                throw ServiceError(
                    .badRequest, "bad_key",
                    "the key \(key.debugDescription) has an empty, `.` or `..` segment or a NUL: keys name files inside the source only")
            }
        }
    }

    /// The key: path segments, percent-decoded and checked. A path without `%` (the common
    /// case) is checked in place and copied once.
    static func key(fromPath path: Substring) throws(ServiceError) -> String {
        let escaped = path.utf8.contains(UInt8(ascii: "%"))
        var segments: [String] = []
        for raw in path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            let text = Substring(raw)
            let segment: Substring
            if escaped, text.utf8.contains(UInt8(ascii: "%")) {
                guard let decoded = String(text).removingPercentEncoding else {
                    throw ServiceError(
                        .badRequest, "bad_key", "the key segment \(String(text).debugDescription) is not valid percent-encoding")
                }
                segment = Substring(decoded)
            } else {
                segment = text
            }
            let bytes = segment.utf8
            guard !bytes.isEmpty, segment != ".", segment != "..", !bytes.contains(UInt8(ascii: "/")), !bytes.contains(0) else {
                throw ServiceError(
                    .badRequest, "bad_key",
                    "the key \(String(path).debugDescription) has an empty, `.` or `..` segment: keys name files inside the source only")
            }
            if escaped { segments.append(String(segment)) }
        }
        return escaped ? segments.joined(separator: "/") : String(path)
    }
}
