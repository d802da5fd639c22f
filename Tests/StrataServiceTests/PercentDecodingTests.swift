import Foundation
import Testing

@testable import StrataService

/// `PercentDecoding.decode` against Foundation's `removingPercentEncoding`, which it replaces on
/// the request path: the same string, or `nil` for the same inputs — except where Foundation
/// repairs a lone continuation byte (`%A9`) into U+FFFD while refusing every other invalid
/// sequence (`%FF`, `%C3`): invalid UTF-8 is refused here, every time.
@Suite("Percent decoding")
struct PercentDecodingTests {
    /// Foundation's answer, with a repaired byte (a U+FFFD the text did not hold) as `nil`.
    static func expected(_ text: String) -> String? {
        guard let decoded = text.removingPercentEncoding else { return nil }
        return decoded.unicodeScalars.contains("\u{FFFD}") && !text.unicodeScalars.contains("\u{FFFD}") ? nil : decoded
    }

    static let cases = [
        "", "plain", "a+b", "%2F", "jpeg%2Fpath-2560x1600.jpg", "%2f%2F", "%", "%2", "a%", "a%g0", "%0g", "%zz",
        "%00", "%25", "%2525", "%C3%A9t%C3%A9", "%C3%28", "%E2%82", "%FF", "%F0%9F%98%80", "été", "é%20è", "100%",
        "%%41", "%41%", "%7e", "%7E", "%A9", "a%a9b",
    ]

    @Test("the listed edge cases decode as Foundation decodes them", arguments: cases)
    func edgeCases(_ text: String) {
        #expect(PercentDecoding.decode(Substring(text)) == Self.expected(text))
    }

    @Test("random text of escapes, hex digits, multibyte and plain characters decodes as Foundation decodes it")
    func randomText() {
        let alphabet: [String] = ["%", "2", "F", "f", "C", "3", "A", "9", "0", "E", "8", "a", "/", "+", "é", "😀", "z", " "]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<5_000 {
            let length = Int.random(in: 0...12, using: &generator)
            let text = (0..<length).map { _ in alphabet.randomElement(using: &generator)! }.joined()
            // A slice of a longer string, as the parsers hand it.
            let framed = "x/" + text + "/y"
            let slice = framed.dropFirst(2).dropLast(2)
            #expect(PercentDecoding.decode(slice) == Self.expected(text), "\(text.debugDescription)")
        }
    }

    @Test("an escaped U+FFFD is decoded; a lone continuation byte is refused")
    func replacementCharacter() {
        #expect(PercentDecoding.decode("%EF%BF%BD") == "\u{FFFD}")
        #expect(PercentDecoding.decode("%A9") == nil)
        #expect(PercentDecoding.decode("a%a9b") == nil)
    }
}
