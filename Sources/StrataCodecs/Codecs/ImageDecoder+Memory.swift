import StrataBase

extension ImageDecoder {
    /// An estimate of the bytes a codec allocates for itself (beyond the image it writes into)
    /// to decode `header`'s image at `decodedSize`: what the engine's `render.memoryLimit`
    /// counts for it. From the libraries' own buffers, rounded up:
    /// - JPEG: a progressive file keeps every DCT coefficient of the full-size image (2 bytes
    ///   each, 3 bytes a pixel at 4:2:0, up to 6 at 4:4:4: counted as 4) however small the
    ///   scaled decode; a baseline file keeps a few rows (0).
    /// - WebP: a lossless or alpha image is decoded through a full-size ARGB buffer (4 bytes a
    ///   pixel); lossy without alpha writes into the image's rows (0).
    /// - AVIF and HEIC: the decoded YUV planes at full size (up to 3 bytes a pixel at 8 bits, 6 at
    ///   more: counted as 4), plus HEVC's reference frames for HEIC (another 2).
    /// - GIF: a full canvas of indices and one of colours (5 bytes a pixel).
    /// - JPEG 2000: OpenJPEG's 32-bit plane per component at the decoded size, plus its
    ///   code-block buffers (`JP2Codec.workingBytes(components:decodedSize:)`).
    /// - JPEG XL: libjxl's float planes of the frame at full size (three colours and alpha, 4
    ///   bytes each: 16 bytes a pixel).
    /// - PNG and TIFF: rows or strips (0).
    public static func workingBytes(for header: ImageHeader, decodedSize: PixelSize, bytes: UnsafeRawBufferPointer) -> Int {
        let full = header.size.width * header.size.height
        switch header.format {
        case .jpeg: return Self.isProgressiveJPEG(bytes) ? 4 * full : 0
        case .webp: return header.hasAlpha || Self.isLosslessWebP(bytes) ? 4 * full : 0
        case .avif: return 4 * full
        case .heic: return 6 * decodedSize.width * decodedSize.height
        case .gif: return 5 * full
        case .jp2:
            let colours = header.isCMYK ? 4 : header.isGrayscale ? 1 : 3
            return JP2Codec.workingBytes(components: colours + (header.hasAlpha ? 1 : 0), decodedSize: decodedSize)
        case .jxl: return 16 * full
        case .png, .tiff: return 0
        }
    }

    /// Whether a JPEG's frame header is a progressive one (SOF2, SOF6, SOF10, SOF14): a walk of
    /// the markers before the first scan.
    package static func isProgressiveJPEG(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 2
        while i + 4 <= bytes.count {
            guard bytes[i] == 0xFF else { return false }
            let marker = bytes[i + 1]
            if marker == 0xFF {
                i += 1
                continue
            }
            if marker == 0xDA { return false }  // start of scan: no progressive frame before it
            if marker == 0xC2 || marker == 0xC6 || marker == 0xCA || marker == 0xCE { return true }
            if (0xD0...0xD7).contains(marker) || marker == 0x01 {
                i += 2
                continue
            }
            i += 2 + (Int(bytes[i + 2]) << 8 | Int(bytes[i + 3]))
        }
        return false
    }

    /// Whether a WebP file's image is lossless (a `VP8L` chunk first, or after `VP8X`).
    package static func isLosslessWebP(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var i = 12
        while i + 8 <= bytes.count {
            let tag = (bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3])
            if tag == (0x56, 0x50, 0x38, 0x4C) { return true }  // "VP8L"
            if tag == (0x56, 0x50, 0x38, 0x20) { return false }  // "VP8 "
            let size = Int(bytes[i + 4]) | Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]) << 16 | Int(bytes[i + 7]) << 24
            i += 8 + size + (size & 1)
        }
        return false
    }
}
