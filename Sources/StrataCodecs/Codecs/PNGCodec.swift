import CPNG
import StrataBase

/// libpng's simplified API (png_image): header, full-size decode, encode. Every png_image is
/// freed before returning.
package enum PNGCodec {
    package struct Features {
        package var size: PixelSize
        package var hasAlpha: Bool
        package var isGrayscale: Bool
    }

    private static func message(_ image: inout png_image) -> String {
        withUnsafeBytes(of: &image.message) { raw in
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
    }

    private static func failure(_ image: inout png_image) -> ImageDecodingError { error(message(&image)) }

    /// libpng's message as a typed error: data that ends early is truncated, anything else
    /// corrupt.
    package static func error(_ text: String) -> ImageDecodingError {
        let lower = text.lowercased()
        if lower.contains("eof") || lower.contains("truncat") || lower.contains("not enough") || lower.contains("too short") {
            return ImageDecodingError(.truncated, format: .png)
        }
        return ImageDecodingError(.corrupt(text.isEmpty ? "libpng error" : text), format: .png)
    }

    package static func features(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> Features {
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        guard png_image_begin_read_from_memory(&image, bytes.baseAddress, bytes.count) != 0 else {
            throw failure(&image)
        }
        defer { png_image_free(&image) }
        return Features(
            size: PixelSize(width: Int(image.width), height: Int(image.height)),
            hasAlpha: image.format & UInt32(PNG_FORMAT_FLAG_ALPHA) != 0,
            isGrayscale: image.format & UInt32(PNG_FORMAT_FLAG_COLOR) == 0)
    }

    /// Decodes at full size to premultiplied BGRA; `expectedSize` (the destination's size) must
    /// be the file's size.
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, expectedSize: PixelSize,
        into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        guard png_image_begin_read_from_memory(&image, bytes.baseAddress, bytes.count) != 0 else {
            throw failure(&image)
        }
        guard Int(image.width) == expectedSize.width, Int(image.height) == expectedSize.height else {
            png_image_free(&image)
            throw ImageDecodingError(.corrupt("PNG is \(image.width)x\(image.height), expected \(expectedSize)"), format: .png)
        }
        image.format = UInt32(PNG_FORMAT_BGRA)
        // A 16-bit file without gAMA or sRGB is sRGB-encoded, as every writer of such files
        // means it (libpng's simplified API would otherwise take it as linear).
        image.flags |= UInt32(PNG_IMAGE_FLAG_16BIT_sRGB)
        let ok = png_image_finish_read(&image, nil, destination, Int32(stride), nil)
        if ok == 0 {
            let error = failure(&image)
            png_image_free(&image)
            throw error
        }
        png_image_free(&image)
        PixelOps.premultiply(destination, size: PixelSize(width: Int(image.width), height: Int(image.height)), stride: stride)
    }

    /// Encodes straight (un-premultiplied), tightly packed BGRA; `alpha` false writes RGB.
    package static func encode(straightBGRA pixels: [UInt8], size: PixelSize, alpha: Bool) throws(ImageEncodingError) -> [UInt8] {
        var packed = pixels
        var format = UInt32(PNG_FORMAT_BGRA)
        var stride = size.width * 4
        if !alpha {
            // Drop the alpha byte: BGRA → BGR, tightly packed.
            var bgr = [UInt8](repeating: 0, count: size.width * size.height * 3)
            for i in 0..<(size.width * size.height) {
                bgr[3 * i] = pixels[4 * i]
                bgr[3 * i + 1] = pixels[4 * i + 1]
                bgr[3 * i + 2] = pixels[4 * i + 2]
            }
            packed = bgr
            format = UInt32(PNG_FORMAT_BGR)
            stride = size.width * 3
        }
        var image = png_image()
        image.version = UInt32(PNG_IMAGE_VERSION)
        image.width = UInt32(size.width)
        image.height = UInt32(size.height)
        image.format = format
        var byteCount = 0
        let measured = packed.withUnsafeBytes { p in
            png_image_write_to_memory(&image, nil, &byteCount, 0, p.baseAddress, Int32(stride), nil)
        }
        guard measured != 0, byteCount > 0 else {
            let text = message(&image)
            png_image_free(&image)
            throw ImageEncodingError(.encoderFailed(text), format: .png)
        }
        var output = [UInt8](repeating: 0, count: byteCount)
        let written = output.withUnsafeMutableBytes { o in
            packed.withUnsafeBytes { p in
                png_image_write_to_memory(&image, o.baseAddress, &byteCount, 0, p.baseAddress, Int32(stride), nil)
            }
        }
        guard written != 0 else {
            let text = message(&image)
            png_image_free(&image)
            throw ImageEncodingError(.encoderFailed(text), format: .png)
        }
        png_image_free(&image)
        output.removeSubrange(byteCount...)
        return output
    }
}
