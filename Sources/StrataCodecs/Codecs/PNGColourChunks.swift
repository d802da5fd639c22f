import CZlib
import StrataBase

/// A PNG's colour chunks, read from the chunk list before the first `IDAT` (bounds-checked,
/// CRCs not checked: libpng checks them when it decodes), and an `iCCP` chunk written into an
/// encoded PNG. What they mean for the pixels (PNG's order of precedence):
/// - `iCCP`: the profile (inflated, at most ``ColourProfile/maximumByteCount`` bytes);
/// - `sRGB`: sRGB, nothing to convert;
/// - `cHRM`: primaries that Little CMS turns into a profile; its tone curve is a pure 2.2 when
///   the file has `gAMA` (libpng's simplified decoder has already turned the file's gamma into
///   2.2) and sRGB's when it has none;
/// - `gAMA` alone: libpng's decoder applies it; nothing more to convert.
package enum PNGColourChunks {
    private static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    package static func colour(_ bytes: UnsafeRawBufferPointer) -> EmbeddedColour {
        var iccp: UnsafeRawBufferPointer?
        var hasSRGB = false, hasGamma = false
        var chrm: [Double]?
        let n = bytes.count
        guard n >= 8, Array(bytes[0..<8]) == signature else { return .none }
        var i = 8
        while i + 8 <= n {
            let length = bigEndian32(bytes, at: i)
            let type = String(decoding: bytes[(i + 4)..<(i + 8)], as: UTF8.self)
            let start = i + 8
            guard length >= 0, start + length <= n else { break }
            let data = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + length)])
            switch type {
            case "IDAT", "IEND": i = n
            case "iCCP": if iccp == nil { iccp = data }
            case "sRGB": hasSRGB = true
            case "gAMA": hasGamma = length == 4
            case "cHRM" where length == 32:
                chrm = (0..<8).map { k in Double(bigEndian32(data, at: 4 * k)) / 100_000 }
            default: break
            }
            i = start + length + 4
        }
        if let iccp { return profile(iccp) }
        if hasSRGB { return .none }
        guard let c = chrm else { return .none }
        guard
            let made = LittleCMS.Profile.rgb(
                white: (c[0], c[1]), red: (c[2], c[3]), green: (c[4], c[5]), blue: (c[6], c[7]), gamma: hasGamma ? 2.2 : nil),
            let bytes = made.serialised()
        else { return .unusable(.invalid("the cHRM chunk's primaries make no profile")) }
        return EmbeddedProfiles.profile(bytes)
    }

    private static func bigEndian32(_ bytes: UnsafeRawBufferPointer, at i: Int) -> Int {
        var value = 0
        for k in 0..<4 { value = value << 8 | Int(bytes[i + k]) }
        return value
    }

    /// The profile in an `iCCP` chunk's data: a name of 1–79 bytes, NUL, method 0, zlib data.
    private static func profile(_ data: UnsafeRawBufferPointer) -> EmbeddedColour {
        guard let nul = data.prefix(80).firstIndex(of: 0), nul >= 1, nul + 2 <= data.count, data[nul + 1] == 0 else {
            return .unusable(.malformedContainer("the iCCP chunk's name or compression method is invalid"))
        }
        let compressed = UnsafeRawBufferPointer(rebasing: data[(nul + 2)...])
        switch inflate(compressed, limit: ColourProfile.maximumByteCount) {
        case .success(let bytes): return EmbeddedProfiles.profile(bytes)
        case .failure(let problem): return .unusable(problem)
        }
    }

    /// zlib-inflates `data`, refusing more than `limit` bytes of output.
    private static func inflate(_ data: UnsafeRawBufferPointer, limit: Int) -> Result<[UInt8], ColourProfileProblem> {
        var stream = z_stream()
        guard inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else {
            return .failure(.malformedContainer("zlib cannot start"))
        }
        defer { inflateEnd(&stream) }
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        stream.next_in = UnsafeMutablePointer(mutating: data.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.avail_in = uInt(data.count)
        while true {
            let status = chunk.withUnsafeMutableBufferPointer { out -> Int32 in
                stream.next_out = out.baseAddress
                stream.avail_out = uInt(out.count)
                return CZlib.inflate(&stream, Z_NO_FLUSH)
            }
            let produced = chunk.count - Int(stream.avail_out)
            output.append(contentsOf: chunk[0..<produced])
            if output.count > limit { return .failure(.tooLarge(bytes: output.count)) }
            if status == Z_STREAM_END { return .success(output) }
            if status != Z_OK { return .failure(.malformedContainer("the iCCP chunk does not inflate (zlib \(status))")) }
            if produced == 0 && stream.avail_in == 0 {
                return .failure(.truncated(bytes: output.count, declared: nil))
            }
        }
    }

    /// `png` with an `iCCP` chunk of `profile` inserted after its `IHDR`.
    package static func embed(_ profile: ColourProfile, inPNG png: [UInt8]) -> [UInt8] {
        guard png.count >= 33, Array(png[0..<8]) == signature else { return png }
        let ihdrEnd = 8 + 8 + 13 + 4
        var data = Array("ICC Profile".utf8) + [0, 0]
        var compressedCount = compressBound(uLong(profile.bytes.count))
        var compressed = [UInt8](repeating: 0, count: Int(compressedCount))
        let status = compressed.withUnsafeMutableBufferPointer { out in
            profile.bytes.withUnsafeBufferPointer { input in
                compress2(out.baseAddress, &compressedCount, input.baseAddress, uLong(input.count), Z_BEST_COMPRESSION)
            }
        }
        guard status == Z_OK else { return png }
        data += compressed[0..<Int(compressedCount)]
        var chunk: [UInt8] = []
        let length = data.count
        chunk += [UInt8(length >> 24 & 0xFF), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
        let typed = Array("iCCP".utf8) + data
        chunk += typed
        let crc = typed.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, uInt($0.count))) }
        chunk += [UInt8(crc >> 24), UInt8(crc >> 16 & 0xFF), UInt8(crc >> 8 & 0xFF), UInt8(crc & 0xFF)]
        return Array(png[0..<ihdrEnd]) + chunk + Array(png[ihdrEnd...])
    }
}
