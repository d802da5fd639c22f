/// Percent-decoding of URL text (`%2F` → `/`), as Foundation's `removingPercentEncoding`
/// decodes it: `nil` when a `%` is not followed by two hexadecimal digits or the decoded bytes
/// are not UTF-8 (every time: Foundation repairs a lone continuation byte into U+FFFD); `+`
/// stays `+`. Used where a request is parsed, on the event loop for a warm answer (IIIF
/// identifiers, `/images` keys, thumbor signatures): one pass over the bytes and one string,
/// where Foundation's bridging allocates several times per call. Text without `%` comes back as
/// one copy.
package enum PercentDecoding {
    /// `text` percent-decoded once, or `nil` when its escapes or their bytes are not valid.
    package static func decode(_ text: Substring) -> String? {
        let bytes = text.utf8
        guard bytes.contains(UInt8(ascii: "%")) else { return String(text) }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            bytes.formIndex(after: &index)
            guard byte == UInt8(ascii: "%") else {
                decoded.append(byte)
                continue
            }
            guard index != bytes.endIndex, let high = hexValue(bytes[index]) else { return nil }
            bytes.formIndex(after: &index)
            guard index != bytes.endIndex, let low = hexValue(bytes[index]) else { return nil }
            bytes.formIndex(after: &index)
            decoded.append(high << 4 | low)
        }
        return String(validating: decoded, as: UTF8.self)
    }

    /// The value of one hexadecimal digit (either case), or `nil`.
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
