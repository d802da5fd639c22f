/// JPEG 2000 files edited at the box level for tests: OpenJPEG's `opj_compress` and vips
/// write an enumerated colour space only, so a JP2 with an ICC profile is made by replacing
/// the `colr` box in the `jp2h` header box with a restricted-ICC one (method 2), as
/// ISO/IEC 15444-1 Annex I lays them out: each box a 4-byte big-endian length (header
/// included), a 4-byte type, its payload.
package enum JP2Boxes {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// `jp2` with its `colr` box holding `profile` (method 2, precedence 0, approximation 0).
    package static func withICC(_ jp2: [UInt8], profile: [UInt8]) throws -> [UInt8] {
        var result: [UInt8] = []
        var offset = 0
        var replaced = false
        while offset + 8 <= jp2.count {
            let length = Int(readUInt32(jp2, offset))
            let type = String(decoding: jp2[offset + 4..<offset + 8], as: UTF8.self)
            // A length of 0 runs to the end of the file (the codestream box, last).
            let end = length == 0 ? jp2.count : offset + length
            guard length == 0 || length >= 8, end <= jp2.count else { throw Failure(description: "bad box length at \(offset)") }
            if type == "jp2h" {
                var header: [UInt8] = []
                var inner = offset + 8
                while inner + 8 <= end {
                    let innerLength = Int(readUInt32(jp2, inner))
                    guard innerLength >= 8, inner + innerLength <= end else { throw Failure(description: "bad box in jp2h") }
                    if String(decoding: jp2[inner + 4..<inner + 8], as: UTF8.self) == "colr" {
                        header += box("colr", [2, 0, 0] + profile)
                        replaced = true
                    } else {
                        header += jp2[inner..<inner + innerLength]
                    }
                    inner += innerLength
                }
                result += box("jp2h", header)
            } else {
                result += jp2[offset..<end]
            }
            offset = end
        }
        guard replaced else { throw Failure(description: "no colr box in the file's jp2h") }
        return result
    }

    private static func box(_ type: String, _ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(8 + payload.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + Array(type.utf8)
            + payload
    }

    private static func readUInt32(_ bytes: [UInt8], _ offset: Int) -> UInt32 {
        UInt32(bytes[offset]) << 24 | UInt32(bytes[offset + 1]) << 16 | UInt32(bytes[offset + 2]) << 8 | UInt32(bytes[offset + 3])
    }
}
