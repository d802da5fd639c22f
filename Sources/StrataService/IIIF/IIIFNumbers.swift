import Strata

/// The number syntax of IIIF URL parameters: whole numbers are ASCII digits only (no sign, no
/// spaces), decimals are digits with at most one `.` (no exponent, no `inf`/`nan`). Pure.
package enum IIIFNumbers {
    /// A whole number of at most nine digits, or `nil`.
    package static func whole(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.count <= 9, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }

    /// A non-negative decimal (`12`, `12.5`, `.5`, `12.`), or `nil`.
    package static func decimal(_ text: Substring) -> Double? {
        var dots = 0
        var digits = 0
        for byte in text.utf8 {
            if byte == UInt8(ascii: ".") {
                dots += 1
            } else if byte >= 0x30 && byte <= 0x39 {
                digits += 1
            } else {
                return nil
            }
        }
        guard dots <= 1, digits > 0, digits <= 12 else { return nil }
        return Double(text.hasPrefix(".") ? "0" + text : String(text))
    }

    /// `count` comma-separated fields of `text`, or `nil` when there are more or fewer.
    package static func fields(_ text: Substring, count: Int) -> [Substring]? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
        return parts.count == count ? parts : nil
    }
}

/// A rectangle of whole pixels: a region of the original, or an output size placed at 0,0.
public struct IIIFRect: Sendable, Hashable, CustomStringConvertible {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }

    public var size: PixelSize { PixelSize(width: width, height: height) }
    public var description: String { "\(x),\(y),\(width),\(height)" }
}
