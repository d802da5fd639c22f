import Strata

/// Uncompressed baseline TIFFs of test images (little-endian, one strip), with the tags the
/// decoder reads: orientation, unassociated alpha, an ICC profile. Other storages (LZW, tiles,
/// BigTIFF, big-endian…) are made from these by `tiffcp` at test time.
package enum TIFFWriter {
    package enum Channels: Sendable {
        /// 8-bit gray (the image's green channel).
        case gray
        case rgb
        /// RGB and unassociated (straight) alpha.
        case rgba
    }

    /// `image` (premultiplied BGRA) as a TIFF.
    package static func tiff(_ image: PixelImage, _ channels: Channels, orientation: Int = 1, icc: [UInt8]? = nil) -> [UInt8] {
        let spp = channels == .gray ? 1 : channels == .rgb ? 3 : 4
        var pixels: [UInt8] = []
        pixels.reserveCapacity(image.width * image.height * spp)
        for y in 0..<image.height {
            for x in 0..<image.width {
                let p = image.pixelBytes(x: x, y: y)  // B, G, R, A premultiplied
                let a = Int(p[3])
                func straight(_ c: UInt8) -> UInt8 { a == 0 ? 0 : UInt8(min(255, (Int(c) * 255 + a / 2) / a)) }
                switch channels {
                case .gray: pixels.append(p[1])
                case .rgb: pixels += [p[2], p[1], p[0]]
                case .rgba: pixels += [straight(p[2]), straight(p[1]), straight(p[0]), p[3]]
                }
            }
        }
        // Entries: (tag, type, count, value or the data it points to). Types: 3 SHORT, 4 LONG,
        // 7 UNDEFINED.
        var entries: [(tag: UInt16, type: UInt16, count: UInt32, data: [UInt8])] = []
        func short(_ values: [Int]) -> [UInt8] { values.flatMap { [UInt8($0 & 0xFF), UInt8($0 >> 8)] } }
        func long(_ value: Int) -> [UInt8] { (0..<4).map { UInt8(value >> (8 * $0) & 0xFF) } }
        entries.append((256, 4, 1, long(image.width)))
        entries.append((257, 4, 1, long(image.height)))
        entries.append((258, 3, UInt32(spp), short(Array(repeating: 8, count: spp))))
        entries.append((259, 3, 1, short([1])))
        entries.append((262, 3, 1, short([channels == .gray ? 1 : 2])))
        entries.append((273, 4, 1, long(0)))  // the strip's offset, set below
        entries.append((274, 3, 1, short([orientation])))
        entries.append((277, 3, 1, short([spp])))
        entries.append((278, 4, 1, long(image.height)))
        entries.append((279, 4, 1, long(pixels.count)))
        entries.append((284, 3, 1, short([1])))
        if channels == .rgba { entries.append((338, 3, 1, short([2]))) }
        if let icc { entries.append((34675, 7, UInt32(icc.count), icc)) }
        // Header, the IFD, then the data of entries over 4 bytes, then the strip.
        let ifdSize = 2 + entries.count * 12 + 4
        var data: [UInt8] = []
        var offsets: [Int: Int] = [:]
        var next = 8 + ifdSize
        for (i, entry) in entries.enumerated() where entry.data.count > 4 {
            offsets[i] = next
            data += entry.data
            if data.count % 2 == 1 { data.append(0) }
            next = 8 + ifdSize + data.count
        }
        let stripOffset = 8 + ifdSize + data.count
        var out: [UInt8] = [0x49, 0x49, 42, 0] + long(8) + short([entries.count])
        for (i, entry) in entries.enumerated() {
            out += short([Int(entry.tag)]) + short([Int(entry.type)]) + long(Int(entry.count))
            if entry.tag == 273 {
                out += long(stripOffset)
            } else if let offset = offsets[i] {
                out += long(offset)
            } else {
                out += entry.data + Array(repeating: 0, count: 4 - entry.data.count)
            }
        }
        out += long(0)
        return out + data + pixels
    }
}
