import StrataBase
/// Bounds-checked readers for the metadata Strata needs from the containers: the EXIF
/// orientation (JPEG APP1, WebP `EXIF` chunk), the Adobe APP14 transform of a JPEG and whether
/// it has APP2 `ICC_PROFILE` chunks (read by ``EmbeddedProfiles``).
/// Malformed metadata never traps: it reads as "absent".
package enum Metadata {
    /// What the JPEG markers before the first scan say.
    package struct JPEGMarkers: Equatable {
        package var orientation = 1
        /// The Adobe APP14 transform byte (0 = none/CMYK, 1 = YCbCr, 2 = YCCK), `nil` without APP14.
        package var adobeTransform: Int?
        /// Whether an APP2 segment starts with `ICC_PROFILE\0`.
        package var hasICCProfile = false
        /// Whether the frame is progressive (SOF2, SOF6, SOF10, SOF14): libjpeg then holds the
        /// whole image's coefficients while it decodes.
        package var isProgressive = false
        /// Whether the walk reached the first scan (SOS): every header segment (EXIF, ICC
        /// profile, Adobe, frame) lies in the bytes walked.
        package var reachesScan = false
    }

    /// Whether `bytes`, a PNG's first bytes, reach its first `IDAT` chunk: every chunk the
    /// header is read from (`IHDR`, and the colour chunks, which must precede `IDAT`) lies in
    /// them. A chunk walk of lengths and types; `false` for anything else.
    package static func pngReachesImageData(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        guard bytes.count >= 8, bytes.prefix(8).elementsEqual(signature) else { return false }
        var i = 8
        while i + 8 <= bytes.count {
            let length = (0..<4).reduce(0) { $0 << 8 | Int(bytes[i + $1]) }
            // "IDAT"
            if bytes[i + 4] == 0x49, bytes[i + 5] == 0x44, bytes[i + 6] == 0x41, bytes[i + 7] == 0x54 { return true }
            guard length <= Int(Int32.max) else { return false }
            i += 12 + length
        }
        return false
    }

    /// Walks the JPEG segments from SOI up to SOS (or the end of the data).
    package static func jpegMarkers(_ bytes: UnsafeRawBufferPointer) -> JPEGMarkers {
        var result = JPEGMarkers()
        var sawExif = false
        let n = bytes.count
        guard n >= 4, bytes[0] == 0xFF, bytes[1] == 0xD8 else { return result }
        var i = 2
        while i + 1 < n {
            guard bytes[i] == 0xFF else { break }  // not at a marker: malformed, stop
            var j = i + 1
            while j < n, bytes[j] == 0xFF { j += 1 }  // fill bytes
            guard j < n else { break }
            let marker = bytes[j]
            i = j + 1
            if marker == 0xD8 || marker == 0x01 || (0xD0...0xD7).contains(marker) { continue }  // no length
            if marker == 0xDA { result.reachesScan = true }
            if marker == 0xD9 || marker == 0xDA { break }  // EOI, SOS
            guard i + 2 <= n else { break }
            let length = Int(bytes[i]) << 8 | Int(bytes[i + 1])
            guard length >= 2, i + length <= n else { break }
            let payload = UnsafeRawBufferPointer(rebasing: bytes[(i + 2)..<(i + length)])
            if [0xC2, 0xC6, 0xCA, 0xCE].contains(marker) { result.isProgressive = true }
            if marker == 0xE1, !sawExif, payload.count > 6,
                payload[0] == 0x45, payload[1] == 0x78, payload[2] == 0x69, payload[3] == 0x66,  // "Exif"
                payload[4] == 0, payload[5] == 0
            {
                sawExif = true
                result.orientation = tiffOrientation(UnsafeRawBufferPointer(rebasing: payload[6...]))
            } else if marker == 0xEE, result.adobeTransform == nil, payload.count >= 12,
                payload[0] == 0x41, payload[1] == 0x64, payload[2] == 0x6F, payload[3] == 0x62,
                payload[4] == 0x65
            {  // "Adobe"
                result.adobeTransform = Int(payload[11])
            } else if marker == 0xE2, payload.count >= 14, Array(payload[0..<12]) == EmbeddedProfiles.jpegChunkName {
                result.hasICCProfile = true
            }
            i += length
        }
        return result
    }

    /// Whether a WebP's header is read from its first bytes alone: a simple file (`VP8 `, `VP8L`)
    /// has no metadata chunks, and an extended one (`VP8X`) whose flags announce neither `EXIF`
    /// (bit 3), which usually follows the image data, nor `ICCP` (bit 5), which libwebp's demux
    /// reads from a whole container only. `false` for anything else.
    package static func webpHeaderNeedsNoTrailingChunk(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 30, bytes[0] == 0x52, bytes[1] == 0x49, bytes[2] == 0x46, bytes[3] == 0x46,  // "RIFF"
            bytes[8] == 0x57, bytes[9] == 0x45, bytes[10] == 0x42, bytes[11] == 0x50,  // "WEBP"
            bytes[12] == 0x56, bytes[13] == 0x50, bytes[14] == 0x38  // "VP8"
        else { return false }
        switch bytes[15] {
        case 0x20, 0x4C: return true  // "VP8 ", "VP8L"
        case 0x58: return bytes[20] & (0x08 | 0x20) == 0  // "VP8X"
        default: return false
        }
    }

    /// The EXIF orientation in a WebP file's `EXIF` chunk (1 when absent or malformed), read
    /// when the file's `VP8X` flags announce one (bit 3), as the container's specification
    /// says: a simple file has no metadata chunks.
    package static func webpOrientation(_ bytes: UnsafeRawBufferPointer) -> Int {
        let n = bytes.count
        guard n >= 21, bytes[12] == 0x56, bytes[13] == 0x50, bytes[14] == 0x38, bytes[15] == 0x58, bytes[20] & 0x08 != 0 else {
            return 1
        }
        var i = 12
        var chunks = 0
        while i + 8 <= n, chunks < 64 {
            chunks += 1
            let size = Int(bytes[i + 4]) | Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]) << 16 | Int(bytes[i + 7]) << 24
            let start = i + 8
            guard size >= 0, start + size <= n else { return 1 }
            if bytes[i] == 0x45, bytes[i + 1] == 0x58, bytes[i + 2] == 0x49, bytes[i + 3] == 0x46 {  // "EXIF"
                var payload = UnsafeRawBufferPointer(rebasing: bytes[start..<(start + size)])
                if payload.count > 6, payload[0] == 0x45, payload[1] == 0x78, payload[4] == 0, payload[5] == 0 {
                    payload = UnsafeRawBufferPointer(rebasing: payload[6...])  // "Exif\0\0" prefix
                }
                return tiffOrientation(payload)
            }
            i = start + size + (size & 1)
        }
        return 1
    }

    /// Tag 0x0112 of IFD0 in a TIFF structure; 1 when absent, out of range or malformed.
    package static func tiffOrientation(_ tiff: UnsafeRawBufferPointer) -> Int {
        let n = tiff.count
        guard n >= 8 else { return 1 }
        let little: Bool
        if tiff[0] == 0x49, tiff[1] == 0x49 { little = true } else if tiff[0] == 0x4D, tiff[1] == 0x4D { little = false } else { return 1 }
        func u16(_ at: Int) -> Int? {
            guard at >= 0, at + 2 <= n else { return nil }
            let a = Int(tiff[at]), b = Int(tiff[at + 1])
            return little ? a | b << 8 : a << 8 | b
        }
        func u32(_ at: Int) -> Int? {
            guard let lo = u16(little ? at : at + 2), let hi = u16(little ? at + 2 : at) else { return nil }
            return hi << 16 | lo
        }
        guard u16(2) == 42, let ifd = u32(4), let count = u16(ifd) else { return 1 }
        for k in 0..<min(count, 1024) {
            let entry = ifd + 2 + 12 * k
            guard let tag = u16(entry) else { return 1 }
            guard tag == 0x0112 else { continue }
            guard let type = u16(entry + 2), let components = u32(entry + 4), components >= 1 else { return 1 }
            let value: Int?
            switch type {
            case 3: value = u16(entry + 8)  // SHORT
            case 4: value = u32(entry + 8)  // LONG (lenient)
            default: value = nil
            }
            guard let value, (1...8).contains(value) else { return 1 }
            return value
        }
        return 1
    }
}
