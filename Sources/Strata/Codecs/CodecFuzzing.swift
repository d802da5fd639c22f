extension Fuzzing {
    /// One decoder (1-megapixel limit) per harness process; libFuzzer runs inputs on one thread.
    nonisolated(unsafe) private static let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: 1_000_000))
    nonisolated(unsafe) private static let renderer = ImageRenderer(
        limits: DecodingLimits(maxPixels: 1_000_000), resampleThreads: 1)

    /// An AVIF, HEIF or GIF decoder over arbitrary bytes (the FuzzAVIF, FuzzHEIF and FuzzGIF
    /// harnesses): inputs not of `format` are skipped. A header that reads is within the limit;
    /// a decode at the full size and at every size ``ImageDecoder/decodedSize(for:minimumSize:)``
    /// picks for a few minimum sizes (HEIF thumbnails) fills exactly that size or throws
    /// ``ImageDecodingError``; a render stays within its box. The decoder is reused, so a
    /// failure must leave it usable for the next input.
    public static func decode(_ bytes: UnsafeRawBufferPointer, as format: ImageFormat) {
        guard bytes.count > 0, ImageFormatDetector.detect(bytes) == format else { return }
        guard let header = try? decoder.readHeader(bytes) else {
            require(
                (try? renderer.render(bytes, request: RenderRequest(box: PixelSize(width: 64, height: 64)))) == nil,
                "rendered an input whose header does not read")
            return
        }
        require(header.format == format, "the header's format is not the detected one")
        require(header.size.pixelCount <= 1_000_000 && header.size.width > 0 && header.size.height > 0, "header beyond the limit")
        let minimums: [PixelSize?] = [nil, PixelSize(width: 8, height: 8), PixelSize(width: 64, height: 48)]
        var sizes = Set<PixelSize>()
        for minimum in minimums {
            let size = decoder.decodedSize(for: header, minimumSize: minimum)
            require(size.width <= header.size.width && size.height <= header.size.height, "decodedSize beyond the image")
            guard sizes.insert(size).inserted else { continue }
            var image = PixelImage(uninitializedWidth: size.width, height: size.height, style: .bgra32Premultiplied)
            if (try? decoder.decode(bytes, header: header, minimumSize: minimum, into: &image)) != nil {
                _ = image.withUnsafeBytes { $0.reduce(UInt8(0)) { $0 &+ $1 } }  // every byte readable
            }
        }
        let box = PixelSize(width: 1 + bytes.count % 97, height: 1 + bytes.count % 61)
        if let image = try? renderer.render(bytes, request: RenderRequest(box: box, mode: bytes.count % 2 == 0 ? .fit : .fill)) {
            require(image.width <= box.width && image.height <= box.height, "rendered beyond the box")
        }
        decoder.releaseScratch()
        renderer.decoder.releaseScratch()
    }
}
