import Strata

extension Fuzzing {
    /// One decoder (1-megapixel limit) per harness process; libFuzzer runs inputs on one thread.
    nonisolated(unsafe) private static let decoder = ImageDecoder(limits: DecodingLimits(maxPixels: 1_000_000))
    nonisolated(unsafe) private static let renderer = ImageRenderer(
        limits: DecodingLimits(maxPixels: 1_000_000), resampleThreads: 1)

    /// An AVIF, HEIF, GIF, TIFF, JPEG 2000 or JPEG XL decoder over arbitrary bytes (the FuzzAVIF,
    /// FuzzHEIF, FuzzGIF, FuzzTIFF, FuzzJP2 and FuzzJXL harnesses): inputs not of `format` are skipped. A header that reads is within the limit;
    /// a decode at the full size and, when the header lists thumbnails (HEIF), at the smallest
    /// one fills exactly that size or throws ``ImageDecodingError``; one input in four is also
    /// rendered, within its box; a TIFF whose images make a pyramid of 64-px tiles has every tile
    /// read from them (``TIFFPyramidLevels``), each of its size, and a JPEG 2000 file's pyramid
    /// is made from its region decodes (``JP2PyramidLevels``). The decoder is reused, so a
    /// failure must leave it usable for the next input.
    package static func decode(_ bytes: UnsafeRawBufferPointer, as format: ImageFormat) {
        guard bytes.count > 0, ImageFormatDetector.detect(bytes) == format else { return }
        defer {
            decoder.releaseScratch()
            renderer.decoder.releaseScratch()
        }
        let whole = try? decoder.readHeader(bytes)
        headerFromPrefix(bytes, whole: whole, decoder: decoder)
        guard let header = whole else {
            require(
                (try? renderer.render(bytes, request: RenderRequest(box: PixelSize(width: 16, height: 16)))) == nil,
                "rendered an input whose header does not read")
            return
        }
        require(header.format == format, "the header's format is not the detected one")
        require(
            header.size.pixelCount <= 1_000_000 && header.size.width > 0 && header.size.height > 0, "header beyond the limit")
        var minimums: [PixelSize?] = [nil]
        if let smallest = header.thumbnails.first { minimums.append(smallest) }
        if let smallest = header.levels.first { minimums.append(smallest) }
        for minimum in minimums {
            let size = decoder.decodedSize(for: header, minimumSize: minimum)
            require(size.width <= header.size.width && size.height <= header.size.height, "decodedSize beyond the image")
            require(minimum == nil || size == minimum, "a listed thumbnail or level is not the decoded size for itself")
            var image = PixelImage(uninitializedWidth: size.width, height: size.height, style: .bgra32Premultiplied)
            if (try? decoder.decode(bytes, header: header, minimumSize: minimum, into: &image)) != nil {
                _ = image.withUnsafeBytes { $0.reduce(UInt8(0)) { $0 &+ $1 } }  // every byte readable
            }
        }
        if format == .tiff, header.orientation == 1 { tiffPyramid(bytes, size: header.size) }
        if format == .jp2 { jp2Pyramid(bytes, size: header.size, waiting: bytes.count % 3 == 0) }
        guard bytes.count % 4 == 0 else { return }
        let box = PixelSize(width: 1 + bytes.count % 97, height: 1 + bytes.count % 61)
        let mode: ContentMode = bytes.count % 8 == 0 ? .fit : .fill
        if let image = try? renderer.render(bytes, request: RenderRequest(box: box, mode: mode)) {
            require(image.width <= box.width && image.height <= box.height, "rendered beyond the box")
        }
    }

    /// A header read from the first part of `bytes` (``ImageDecoder/readHeader(prefix:)``, as an
    /// `info.json` reads a large original's first megabyte), cut where the input's length says:
    /// when the prefix is taken to hold the whole header, it must be the whole input's.
    package static func headerFromPrefix(_ bytes: UnsafeRawBufferPointer, whole: ImageHeader?, decoder: ImageDecoder) {
        let cut = bytes.count * (1 + bytes.count % 7) / 8
        let prefix = UnsafeRawBufferPointer(rebasing: bytes[..<cut])
        guard let partial = try? decoder.readHeader(prefix: prefix) else { return }
        require(partial == whole, "the header from the first \(cut) bytes is not the whole input's")
    }

    /// Every tile of a TIFF's own pyramid (when its images make one), each of its rect's size,
    /// or a typed error.
    private static func tiffPyramid(_ bytes: UnsafeRawBufferPointer, size: PixelSize) {
        let geometry = PyramidGeometry(size: size, tileSize: 64)
        guard let images = try? TIFFCodec.levels(bytes), let levels = TIFFPyramidLevels(images: images, geometry: geometry) else {
            return
        }
        do {
            try levels.run(bytes, geometry: geometry, waiting: { [] }) { tile, image in
                require(image.size == geometry.rect(of: tile).size, "a pyramid tile of another size")
            }
        } catch {
            require(error is ImageDecodingError, "a pyramid's read threw \(error)")
        }
    }

    /// Every tile of a JPEG 2000 file's pyramid of 64-px tiles from its banded region decodes
    /// (``JP2PyramidLevels``), a tile waited for made out of turn when `waiting`: each of its
    /// rect's size, or a typed error. The inputs are far smaller than a screen, so half of them
    /// (those with a tile waited for) are given a coarse pass from level 2 (the file's level 1,
    /// moved and halved) whatever their size.
    private static func jp2Pyramid(_ bytes: UnsafeRawBufferPointer, size: PixelSize, waiting: Bool) {
        let geometry = PyramidGeometry(size: size, tileSize: 64)
        guard let features = try? JP2Codec.features(bytes), let feed = JP2PyramidLevels(features: features, geometry: geometry) else {
            return
        }
        let levels = waiting && feed.coarse == nil && geometry.levels.count > 2 ? JP2PyramidLevels(coarse: 2) : feed
        let last = TileAddress(level: 0, column: geometry.grid(0).columns - 1, row: geometry.grid(0).rows - 1)
        var asked = waiting
        do {
            try levels.run(
                bytes, geometry: geometry,
                waiting: {
                    defer { asked = false }
                    return asked ? [last] : []
                }
            ) { tile, image in
                require(image.size == geometry.rect(of: tile).size, "a pyramid tile of another size")
            }
        } catch {
            require(error is ImageDecodingError, "a pyramid's read threw \(error)")
        }
    }

    /// A PNG through libpng's row API, as a tile pyramid's pass reads it (FuzzDecode): every
    /// row of a non-interlaced image within the 1-megapixel limit, or ``ImageDecodingError``;
    /// when the whole decode of an untagged file succeeds too, the same bytes.
    package static func pngRows(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, ImageFormatDetector.detect(bytes) == .png, let header = try? decoder.readHeader(bytes) else { return }
        defer { decoder.releaseScratch() }
        guard let reader = try? PNGRowReader(bytes), !reader.isInterlaced else { return }
        require(reader.size == header.codedSize, "the row reader's size is not the header's")
        rowsMatchTheWholeDecode(bytes, header: header) { (rows, stride, count) throws(ImageDecodingError) in
            try reader.read(into: rows, stride: stride, count: count)
        }
    }

    /// A still WebP through libwebp's incremental decoder, as a tile pyramid's pass reads it
    /// (FuzzDecode): every row within the 1-megapixel limit, or ``ImageDecodingError``; when
    /// the whole decode of an untagged file succeeds too, the same bytes.
    package static func webpRows(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, ImageFormatDetector.detect(bytes) == .webp, let header = try? decoder.readHeader(bytes),
            !header.isAnimated
        else { return }
        defer { decoder.releaseScratch() }
        guard let reader = try? WebPRowReader(bytes) else { return }
        require(reader.size == header.codedSize, "the row reader's size is not the header's")
        rowsMatchTheWholeDecode(bytes, header: header) { (rows, stride, count) throws(ImageDecodingError) in
            try reader.read(into: rows, stride: stride, count: count)
        }
    }

    /// A JPEG at 1/8 scale through ``JPEGEighthReader`` (FuzzDecode), as a tile pyramid's
    /// coarse pass reads it: in one part a round, and in three small parts whose speculative
    /// decodes must fall in step with the true one or be redone by it. Both throw
    /// ``ImageDecodingError`` or both give the same bytes, every row.
    package static func jpegEighth(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0, ImageFormatDetector.detect(bytes) == .jpeg, let header = try? decoder.readHeader(bytes),
            header.codedSize.pixelCount <= 1_000_000
        else { return }
        defer { decoder.releaseScratch() }
        let here = ForkJoin { _ in false }  // every part on this thread, in order
        func read(parts: Int, partBytes: Int) -> Result<PixelImage, ImageDecodingError>? {
            do throws(ImageDecodingError) {
                guard let reader = try JPEGEighthReader(bytes, partBytes: partBytes) else { return nil }
                let size = reader.size
                var image = PixelImage(width: size.width, height: size.height)
                let stride = image.bytesPerRow
                var next = 0
                do {
                    try image.withUnsafeMutableBytes { out in
                        try reader.read(parts: parts, forkJoin: here) { rows, rowStride, count in
                            for row in 0..<count {
                                (out.baseAddress! + (next + row) * stride).copyMemory(
                                    from: rows + row * rowStride, byteCount: size.width * 4)
                            }
                            next += count
                        }
                    }
                } catch let error as ImageDecodingError {
                    return .failure(error)
                } catch {
                    fatalError("the 1/8 reader threw \(error)")
                }
                require(next == size.height, "the 1/8 reader made \(next) rows of \(size.height)")
                return .success(image)
            } catch {
                return .failure(error)
            }
        }
        let one = read(parts: 1, partBytes: 1 << 20)
        let many = read(parts: 3, partBytes: 64 + bytes.count % 500)
        switch (one, many) {
        case (nil, nil), (.failure, .failure): break
        case (.success(let a), .success(let b)): require(a.hasSamePixels(as: b), "the parts' decode differs from one part's")
        default: fatalError("one part and many parts disagree: \(String(describing: one)) against \(String(describing: many))")
        }
    }

    /// Reads every row of `header`'s coded size through `read` (a row reader's: rows, stride,
    /// count → rows written), a few at a time; when that and the whole decode of an untagged,
    /// upright file both succeed, they must be the same bytes.
    private static func rowsMatchTheWholeDecode(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader,
        read: (UnsafeMutableRawPointer, Int, Int) throws(ImageDecodingError) -> Int
    ) {
        let size = header.codedSize
        var rows = PixelImage(uninitializedWidth: size.width, height: size.height, style: .bgra32Premultiplied)
        let stride = rows.bytesPerRow
        var done = 0
        do {
            try rows.withUnsafeMutableBytes { (raw) throws(ImageDecodingError) in
                while done < size.height {
                    let n = try read(raw.baseAddress! + done * stride, stride, min(1 + bytes.count % 13, size.height - done))
                    require(n > 0 && done + n <= size.height, "a row reader returned \(n) rows at \(done)")
                    done += n
                }
            }
        } catch {
            return
        }
        guard header.orientation == 1, case .none = header.colour, let whole = try? decoder.decode(bytes, minimumSize: nil) else { return }
        require(whole.hasSamePixels(as: rows), "the rows differ from the whole decode")
    }
}
