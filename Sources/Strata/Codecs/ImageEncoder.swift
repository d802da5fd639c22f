import CTurboJPEG

/// Encodes a ``PixelImage`` of any ``PixelStyle`` as JPEG (libjpeg-turbo), WebP (libwebp) or
/// PNG (libpng's simplified API), for the CLI and the HTTP service.
///
/// - JPEG has no alpha: premultiplied pixels are written as they are (composited over black);
///   gray8 images become grayscale JPEGs. Chroma is 4:2:0 below quality 90, 4:4:4 from 90.
/// - WebP and PNG get straight (un-premultiplied) colour; alpha is written only when some
///   pixel is not opaque. WebP quality 100 means lossless.
///
/// Cost: one conversion pass into a temporary buffer (except JPEG from BGRA/BGRx/gray) plus
/// the library's encode. Thread-safe: every call uses its own library state.
public enum ImageEncoder {
    /// Encodes `image` as `format`; `quality` (1...100) applies to JPEG and WebP.
    public static func encode(_ image: PixelImage, as format: ImageFormat, quality: Int = 85) throws(ImageEncodingError) -> [UInt8] {
        let quality = min(100, max(1, quality))
        switch format {
        case .jpeg:
            return try encodeJPEG(image, quality: quality)
        case .webp:
            let (pixels, _) = PixelOps.straightBGRA(image)
            return try WebPCodec.encode(straightBGRA: pixels, size: image.size, quality: quality, lossless: quality >= 100)
        case .png:
            let (pixels, hasAlpha) = PixelOps.straightBGRA(image)
            return try PNGCodec.encode(straightBGRA: pixels, size: image.size, alpha: hasAlpha)
        }
    }

    private static func encodeJPEG(_ image: PixelImage, quality: Int) throws(ImageEncodingError) -> [UInt8] {
        guard image.width <= 65_500, image.height <= 65_500 else {
            throw ImageEncodingError(.tooLarge(image.size, maximumSide: 65_500), format: .jpeg)
        }
        let compressor = TurboJPEGCompressor()
        let subsampling = quality >= 90 ? TJSAMP_444 : TJSAMP_420
        switch image.style {
        case .bgra32Premultiplied, .bgrx32:
            return try image.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(ImageEncodingError) in
                try compressor.compress(
                    raw.baseAddress!, size: image.size, pitch: image.bytesPerRow,
                    pixelFormat: TJPF_BGRX, subsampling: subsampling, quality: quality)
            }
        case .gray8:
            return try image.withUnsafeBytes { (raw: UnsafeRawBufferPointer) throws(ImageEncodingError) in
                try compressor.compress(
                    raw.baseAddress!, size: image.size, pitch: image.bytesPerRow,
                    pixelFormat: TJPF_GRAY, subsampling: TJSAMP_GRAY, quality: quality)
            }
        case .rgb565:
            let (pixels, _) = PixelOps.straightBGRA(image)
            let result: Result<[UInt8], ImageEncodingError> = pixels.withUnsafeBytes { raw in
                do throws(ImageEncodingError) {
                    return .success(
                        try compressor.compress(
                            raw.baseAddress!, size: image.size, pitch: image.width * 4,
                            pixelFormat: TJPF_BGRX, subsampling: subsampling, quality: quality))
                } catch { return .failure(error) }
            }
            return try result.get()
        }
    }
}
