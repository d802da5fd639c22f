import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif
import CTurboJPEG

/// Decodes JPEG (libjpeg-turbo), WebP (libwebp), PNG (libpng), AVIF (libavif with dav1d),
/// HEIC/HEIF (libheif with libde265), GIF (giflib), TIFF (libtiff), JPEG 2000 (OpenJPEG) and
/// JPEG XL (libjxl) into premultiplied BGRA, applying the orientation (EXIF; AVIF
/// `irot`/`imir`; the JPEG XL codestream's), with
/// shrink-on-load (JPEG DCT scaling, WebP scaled decode, HEIF embedded thumbnails, JPEG 2000
/// resolution levels).
///
/// The format is detected from the bytes. The header is read first and the pixel limit
/// (``DecodingLimits``) checked before any pixel memory is allocated. Truncated or corrupt
/// data throws (libjpeg-turbo warnings are errors); a decode that throws never reports
/// partial pixels as a result.
///
/// One decoder per thread: it owns a TurboJPEG handle and a scratch buffer that is reused
/// across decodes (fresh anonymous pages are expensive), so it is not `Sendable`. Cost of
/// creating one: a TurboJPEG handle (a few kilobytes); keep it for many decodes.
///
/// The scratch buffer is used only when the pixels cannot go straight into the destination:
/// an EXIF orientation other than 1, grayscale or CMYK/YCCK JPEGs, animated WebPs. It keeps
/// its largest size up to ``scratchRetentionLimit`` bytes and is freed after a larger decode.
///
/// Decisions (measured with `strata-bench codecs` / `strata-bench resample`, release build):
/// - **Shrink-on-load.** ``decodedSize(for:minimumSize:)`` returns the smallest decode that
///   covers `minimumSize`; the caller picks the headroom. Asking for ≥ 2× the final size costs
///   1.2–2× the time of decoding straight to ≥ 1× but gains ~8 dB PSNR after the Lanczos reduce
///   (vs Pillow's Lanczos of the full decode: 2560×1600 photo → 256 px: 41 dB at 1/8, 50 dB at
///   1/4; → 1024 px: 40 dB at 1/2, 56 dB at 1/1), so the source tier asks for 2×.
/// - **JPEG factors.** Only 1, 1/2, 1/4, 1/8 by default: libjpeg-turbo's 7/8, 3/4, 5/8 and
///   3/8 IDCTs are scalar and measured slower than the next power of two (7/8 and 3/4 slower
///   than a full decode). ``jpegScaling`` = `.all` allows them.
/// - **WebP scale.** libwebp's scaled decode only down to half the full size or less; above
///   that it measured slower than the full decode (2560×1600 → 2048×1280: 37.9 against
///   24.0 ms), so the full decode is reduced by the Lanczos pass instead.
/// - **Progressive JPEG** decodes on two threads when ``splitsProgressiveJPEG`` is on and a core
///   is idle (`ProgressiveJPEGSplit`): 0.67–0.97× the time, the same bytes.
/// - **Grayscale JPEG** decodes as TJPF_GRAY and is expanded here (0.78× the time of
///   libjpeg-turbo's own gray → BGRA conversion at 2048×1280).
/// - **Animated WebP** decodes its *first frame* (composited on the canvas, via
///   WebPAnimDecoder) at the full canvas size (no scaled decode): a still preview is what a
///   thumbnail cache can serve, and an error would make such sources unusable.
/// - **CMYK/YCCK JPEG**: files with an Adobe APP14 marker are taken as inverted (Photoshop's
///   polarity), files without it as straight CMYK. With a CMYK profile they are converted to
///   sRGB by Little CMS (``ColourConversion``) at the decoded size, in every ``/StrataBase/ColourOutput``;
///   without one (or with an unusable one), naively with R = (255−C)(255−K)/255, as most
///   viewers show untagged CMYK.
/// - **AVIF, HEIF, GIF** (``AVIFCodec``, `HEIFCodec`, `GIFCodec`): 10/12-bit reduced to
///   8; animated AVIF and GIF decode their first frame (a GIF's composed on its logical
///   screen); a HEIF decodes an embedded thumbnail instead of the primary image when one covers
///   the minimum size (``decodedSize(for:minimumSize:)``).
/// - **Colour**: the embedded profile is read with the header (``ImageHeader/colour``); the
///   RGB and gray conversions happen after the resample (``ImageRenderer``), not here.
public final class ImageDecoder {
    public let limits: DecodingLimits
    /// Scratch buffers up to this many bytes are kept between decodes (default 64 MiB).
    public var scratchRetentionLimit = 64 << 20
    /// How JPEG DCT scaling factors are chosen (see ``JPEGScaling``).
    public var jpegScaling: JPEGScaling = .powersOfTwo
    /// Whether a progressive YCbCr JPEG with EXIF orientation 1 is decoded on two threads, its
    /// luma's scans on one and its chroma's on the other, when the process has an idle core
    /// (default false; an ``ImageRenderer`` turns it on with more than one resample thread).
    /// The same bytes as one thread's decode, in about 0.67–0.97× its time and 1.1–1.4× its CPU
    /// time (see `ProgressiveJPEGSplit`). Baseline files are not affected.
    public var splitsProgressiveJPEG = false
    /// Where a split progressive decode runs its second half (``/StrataBase/ForkJoin/dispatch`` unless the
    /// owner says otherwise: the engine's renderers use its pool, in the job's lane).
    public var forkJoin: ForkJoin = .dispatch

    /// Which libjpeg-turbo scaling factors ``ImageDecoder/decodedSize(for:minimumSize:)`` may use.
    public enum JPEGScaling: Sendable, Hashable {
        /// 1, 1/2, 1/4, 1/8 only: the factors with fast (SIMD) inverse DCTs. The default
        /// (the other factors' scalar IDCTs measured slower than a full decode; see the Codecs
        /// documentation).
        case powersOfTwo
        /// Every factor ≤ 1 that libjpeg-turbo offers (15/16 … 1/8).
        case all
        /// Never scale (full-size decode).
        case none
    }

    package let jpeg = TurboJPEGDecompressor()
    /// Made on the first split progressive decode.
    private var progressiveSplit: ProgressiveJPEGSplit?
    /// Whether the last JPEG decode was split over two threads (for tests).
    package private(set) var lastDecodeWasSplit = false
    /// Whether a split waits for an idle core (``ProgressiveJPEGSplit/hasIdleCores(pending:)``);
    /// tests that run beside others turn it off to split every time.
    package var splitsOnlyWithIdleCores = true
    /// Made on the first decode in rows (``decodeJPEGInRows(_:header:minimumSize:into:stride:rowsPerStep:progress:)``).
    private var jpegRows: JPEGRowDecompressor?
    private var scratch: UnsafeMutableRawPointer?
    private var scratchCapacity = 0

    public init(limits: DecodingLimits = .init()) {
        self.limits = limits
    }

    deinit { free(scratch) }

    /// Bytes currently held by the scratch buffer (for diagnostics and tests).
    public var scratchByteCount: Int { scratchCapacity }

    /// Frees the scratch buffer now.
    public func releaseScratch() {
        free(scratch)
        scratch = nil
        scratchCapacity = 0
    }

    private func scratchBuffer(_ bytes: Int) -> UnsafeMutableRawPointer {
        if let scratch, scratchCapacity >= bytes { return scratch }
        free(scratch)
        var raw: UnsafeMutableRawPointer?
        guard posix_memalign(&raw, PixelLayout.rowAlignment, max(bytes, 1)) == 0, let raw else {
            fatalError("ImageDecoder: cannot allocate \(bytes) scratch bytes")
        }
        scratch = raw
        scratchCapacity = bytes
        return raw
    }

    private func trimScratch() {
        if scratchCapacity > scratchRetentionLimit { releaseScratch() }
    }

    // MARK: Header

    /// Reads the header: format, sizes, orientation, alpha, animation. Never allocates pixel
    /// memory; throws ``ImageDecodingError/Reason/tooLarge(pixels:limit:)`` when the image
    /// exceeds ``limits``, and refuses zero or absurd dimensions.
    public func readHeader(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> ImageHeader {
        guard bytes.count > 0, let format = ImageFormatDetector.detect(bytes) else {
            throw ImageDecodingError(.unrecognizedFormat, format: nil)
        }
        let header: ImageHeader
        switch format {
        case .jpeg:
            let h = try jpeg.readHeader(bytes)
            let markers = Metadata.jpegMarkers(bytes)
            header = ImageHeader(
                format: .jpeg, codedSize: h.size, orientation: markers.orientation,
                isGrayscale: h.colorspace == TJCS_GRAY.rawValue,
                isCMYK: h.colorspace == TJCS_CMYK.rawValue || h.colorspace == TJCS_YCCK.rawValue,
                colour: markers.hasICCProfile ? EmbeddedProfiles.jpeg(bytes) : .none)
        case .webp:
            let f = try WebPCodec.features(bytes)
            header = ImageHeader(
                format: .webp, codedSize: f.size, orientation: Metadata.webpOrientation(bytes),
                hasAlpha: f.hasAlpha, isAnimated: f.isAnimated, colour: EmbeddedProfiles.webp(bytes))
        case .png:
            let f = try PNGCodec.features(bytes)
            header = ImageHeader(
                format: .png, codedSize: f.size, hasAlpha: f.hasAlpha, isGrayscale: f.isGrayscale,
                colour: PNGColourChunks.colour(bytes))
        case .avif:
            let f = try AVIFCodec.features(bytes, maxPixels: limits.maxPixels)
            header = ImageHeader(
                format: .avif, codedSize: f.size, orientation: f.orientation, hasAlpha: f.hasAlpha,
                isGrayscale: f.isGrayscale, isAnimated: f.isAnimated, colour: f.colour)
        case .heic:
            let f = try HEIFCodec.features(bytes, maxPixels: limits.maxPixels)
            header = ImageHeader(
                format: .heic, codedSize: f.size, hasAlpha: f.hasAlpha, colour: f.colour, thumbnails: f.thumbnails)
        case .gif:
            let f = try GIFCodec.features(bytes, maxPixels: limits.maxPixels)
            header = ImageHeader(format: .gif, codedSize: f.size, hasAlpha: f.hasAlpha, isAnimated: f.isAnimated)
        case .tiff:
            let f = try TIFFCodec.features(bytes)
            header = ImageHeader(
                format: .tiff, codedSize: f.size, orientation: f.orientation, hasAlpha: f.hasAlpha, isGrayscale: f.isGrayscale,
                colour: f.colour)
        case .jp2:
            let f = try JP2Codec.features(bytes)
            header = ImageHeader(
                format: .jp2, codedSize: f.size, hasAlpha: f.hasAlpha, isGrayscale: f.isGrayscale, isCMYK: f.isCMYK,
                colour: f.colour, levels: JP2Codec.levels(of: f))
        case .jxl:
            header = try JXLCodec.header(bytes)
        }
        try check(header)
        return header
    }

    private func check(_ header: ImageHeader) throws(ImageDecodingError) {
        let size = header.codedSize
        guard size.width > 0, size.height > 0, size.width <= 1 << 20, size.height <= 1 << 20 else {
            throw ImageDecodingError(.corrupt("invalid dimensions \(size)"), format: header.format)
        }
        if size.pixelCount > limits.maxPixels {
            throw ImageDecodingError(.tooLarge(pixels: size.pixelCount, limit: limits.maxPixels), format: header.format)
        }
    }

    // MARK: Sizes

    /// The JPEG scaling factor a decode with `minimumSize` uses: the smallest allowed factor
    /// whose (oriented) result is at least `minimumSize` on both sides. `nil` for other formats.
    public func jpegScalingFactor(for header: ImageHeader, minimumSize: PixelSize?) -> JPEGScalingFactor? {
        guard header.format == .jpeg else { return nil }
        guard let minimumSize, jpegScaling != .none else { return .one }
        let factors = jpegScaling == .all ? JPEGScalingFactor.reducing : JPEGScalingFactor.powersOfTwo
        // Compare in coded orientation.
        let need = header.swapsSides ? PixelSize(width: minimumSize.height, height: minimumSize.width) : minimumSize
        var best = JPEGScalingFactor.one
        for factor in factors {  // largest first
            let s = factor.scaled(header.codedSize)
            if s.width >= need.width && s.height >= need.height { best = factor } else { break }
        }
        return best
    }

    /// The (oriented) size a decode with `minimumSize` produces. JPEG: the smallest DCT scale
    /// whose result covers `minimumSize` on both sides; WebP: `minimumSize` grown to the
    /// image's aspect (libwebp scales to any size) when that is at most half the full size, else
    /// the full size (a larger scaled decode is slower than the full one); PNG and animated
    /// WebP: the full size. HEIF: the smallest embedded thumbnail (``ImageHeader/thumbnails``)
    /// that covers `minimumSize` on both sides, else the full size; JPEG 2000 likewise from its
    /// resolution levels (``ImageHeader/levels``). AVIF, GIF, TIFF and JPEG XL (libjxl decodes
    /// no smaller size): the full size.
    /// Never larger than the full size; `nil` means the full size.
    public func decodedSize(for header: ImageHeader, minimumSize: PixelSize?) -> PixelSize {
        guard let minimumSize, !minimumSize.isEmpty else { return header.size }
        switch header.format {
        case .jpeg:
            let factor = jpegScalingFactor(for: header, minimumSize: minimumSize) ?? .one
            let coded = factor.scaled(header.codedSize)
            return header.swapsSides ? PixelSize(width: coded.height, height: coded.width) : coded
        case .webp:
            if header.isAnimated { return header.size }
            let full = header.size
            if minimumSize.width >= full.width || minimumSize.height >= full.height { return full }
            let w: Int, h: Int
            if minimumSize.width * full.height >= minimumSize.height * full.width {
                w = minimumSize.width
                h = (full.height * minimumSize.width + full.width - 1) / full.width
            } else {
                h = minimumSize.height
                w = (full.width * minimumSize.height + full.height - 1) / full.height
            }
            // libwebp's rescaler works on every full-size row and more: a scaled decode to more
            // than half the full size measured slower than the full decode (2560×1600 → 2048×1280:
            // 37.9 against 24.0 ms on one photo, 43.0 against 38.5 on another), and the Lanczos
            // reduce of the full decode is no worse. Such a scale decodes in full.
            if 2 * w > full.width || 2 * h > full.height { return full }
            return PixelSize(width: max(1, min(w, full.width)), height: max(1, min(h, full.height)))
        case .heic:
            return header.thumbnails.first { $0.width >= minimumSize.width && $0.height >= minimumSize.height } ?? header.size
        case .jp2:
            return header.levels.first { $0.width >= minimumSize.width && $0.height >= minimumSize.height } ?? header.size
        case .png, .avif, .gif, .tiff, .jxl:
            return header.size
        }
    }

    // MARK: Decoding

    /// Decodes into `destination`, which must be ``/StrataBase/PixelStyle/bgra32Premultiplied`` with
    /// exactly ``decodedSize(for:minimumSize:)`` pixels and any `bytesPerRow ≥ width × 4`
    /// (heap or mapped memory). EXIF orientation is applied.
    ///
    /// Opaque JPEGs with orientation 1 and still WebPs are decoded straight into the
    /// destination; other cases go through the decoder's reused scratch buffer.
    /// When this throws, the destination's bytes are unspecified (possibly partly written)
    /// and must not be used.
    public func decode(
        _ bytes: UnsafeRawBufferPointer, minimumSize: PixelSize?, into destination: inout PixelImage
    ) throws(ImageDecodingError) {
        let header = try readHeader(bytes)
        try decode(bytes, header: header, minimumSize: minimumSize, into: &destination)
    }

    /// Like `decode(_:minimumSize:into:)` with a header already read by `readHeader(_:)`
    /// from the same bytes.
    public func decode(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, minimumSize: PixelSize?,
        into destination: inout PixelImage
    ) throws(ImageDecodingError) {
        let size = decodedSize(for: header, minimumSize: minimumSize)
        precondition(
            destination.style == .bgra32Premultiplied,
            "ImageDecoder.decode: destination must be bgra32Premultiplied, not \(destination.style)")
        precondition(
            destination.size == size,
            "ImageDecoder.decode: destination is \(destination.size), decodedSize is \(size)")
        let stride = destination.bytesPerRow
        ProgressiveJPEGSplit.decodesInFlight.add(1, ordering: .relaxed)
        defer {
            ProgressiveJPEGSplit.decodesInFlight.subtract(1, ordering: .relaxed)
            trimScratch()
        }
        try destination.withUnsafeMutableBytes { (dst: UnsafeMutableRawBufferPointer) throws(ImageDecodingError) in
            let out = dst.baseAddress!
            switch header.format {
            case .jpeg:
                try decodeJPEG(bytes, header: header, minimumSize: minimumSize, into: out, stride: stride)
            case .webp:
                try decodeWebP(bytes, header: header, size: size, into: out, stride: stride)
            case .png:
                try decodePNG(bytes, header: header, into: out, stride: stride)
            case .avif, .jxl:
                try decodeCodedSize(bytes, header: header, into: out, stride: stride)
            case .heic:
                try HEIFCodec.decode(bytes, size: size, maxPixels: limits.maxPixels, into: out, stride: stride)
            case .gif:
                try GIFCodec.decode(bytes, size: header.codedSize, maxPixels: limits.maxPixels, into: out, stride: stride)
            case .tiff:
                try decodeTIFF(bytes, header: header, into: out, stride: stride)
            case .jp2:
                try JP2Codec.decode(bytes, size: size, into: out, stride: stride)
            }
        }
    }

    /// Convenience: decodes into a new heap image of ``decodedSize(for:minimumSize:)``.
    public func decode(_ bytes: UnsafeRawBufferPointer, minimumSize: PixelSize? = nil) throws(ImageDecodingError) -> PixelImage {
        let header = try readHeader(bytes)
        let size = decodedSize(for: header, minimumSize: minimumSize)
        var image = PixelImage(uninitializedWidth: size.width, height: size.height, style: .bgra32Premultiplied)
        try decode(bytes, header: header, minimumSize: minimumSize, into: &image)
        return image
    }

    /// Convenience for byte arrays.
    public func readHeader(_ bytes: [UInt8]) throws(ImageDecodingError) -> ImageHeader {
        try Self.withBytes(bytes) { raw throws(ImageDecodingError) in try readHeader(raw) }
    }

    /// Convenience for byte arrays.
    public func decode(_ bytes: [UInt8], minimumSize: PixelSize? = nil) throws(ImageDecodingError) -> PixelImage {
        try Self.withBytes(bytes) { raw throws(ImageDecodingError) in try decode(raw, minimumSize: minimumSize) }
    }

    /// Convenience for byte arrays.
    public func decode(_ bytes: [UInt8], minimumSize: PixelSize?, into destination: inout PixelImage) throws(ImageDecodingError) {
        try Self.withBytes(bytes) { raw throws(ImageDecodingError) in
            try decode(raw, minimumSize: minimumSize, into: &destination)
        }
    }

    /// `Array.withUnsafeBytes` rethrows untyped errors; this keeps the typed one.
    private static func withBytes<R>(
        _ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) throws(ImageDecodingError) -> R
    ) throws(ImageDecodingError) -> R {
        let result: Result<R, ImageDecodingError> = bytes.withUnsafeBytes { raw in
            do throws(ImageDecodingError) { return .success(try body(raw)) } catch { return .failure(error) }
        }
        return try result.get()
    }

    private func decodeJPEG(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, minimumSize: PixelSize?,
        into out: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        let factor = jpegScalingFactor(for: header, minimumSize: minimumSize) ?? .one
        let coded = factor.scaled(header.codedSize)
        lastDecodeWasSplit = false
        let h = try jpeg.readHeader(bytes)
        guard h.size == header.codedSize else {
            throw ImageDecodingError(.corrupt("the header passed in (\(header.codedSize)) is not these bytes' (\(h.size))"), format: .jpeg)
        }
        let isCMYK = h.colorspace == TJCS_CMYK.rawValue || h.colorspace == TJCS_YCCK.rawValue
        let isGray = h.colorspace == TJCS_GRAY.rawValue
        if !isCMYK && !isGray && header.orientation == 1 {
            if splitsNow(bytes, colorspace: h.colorspace, pending: 0)
                && decodeSplit(bytes, factor: factor, size: coded, into: out, stride: stride)
            {
                lastDecodeWasSplit = true
                return
            }
            try jpeg.decompress(bytes, scaledSize: coded, pixelFormat: TJPF_BGRA, into: out, pitch: stride)
            return
        }
        // Gray: libjpeg-turbo's gray → BGRA conversion is scalar; decoding TJPF_GRAY and
        // expanding here measured faster (see `strata-bench codecs`).
        let scratchStride = isGray ? (coded.width + 63) & ~63 : coded.width * 4
        let buffer = scratchBuffer(scratchStride * coded.height)
        try jpeg.decompress(
            bytes, scaledSize: coded, pixelFormat: isCMYK ? TJPF_CMYK : isGray ? TJPF_GRAY : TJPF_BGRA,
            into: buffer, pitch: scratchStride)
        if isCMYK {
            // Adobe-marked files (APP14) store inverted CMYK, as Photoshop writes them.
            let inverted = Metadata.jpegMarkers(bytes).adobeTransform != nil
            if !ColourConversion.convertCMYK(
                buffer, size: coded, stride: scratchStride, inverted: inverted, colour: header.colour)
            {
                PixelOps.cmykToBGRA(buffer, size: coded, stride: scratchStride, inverted: inverted)
            }
        }
        PixelOps.orient(
            from: buffer, codedSize: coded, sourceStride: scratchStride, gray: isGray,
            to: out, destinationStride: stride, orientation: header.orientation)
    }

    /// Whether a decode of these bytes (TurboJPEG colour space `colorspace`) would be split over
    /// two threads now: ``splitsProgressiveJPEG`` is on, the file is a YCbCr progressive one that
    /// splits, and a core is idle beside the decodes in flight and `pending` more.
    private func splitsNow(_ bytes: UnsafeRawBufferPointer, colorspace: Int32, pending: Int) -> Bool {
        splitsProgressiveJPEG && colorspace == TJCS_YCbCr.rawValue
            && (!splitsOnlyWithIdleCores || ProgressiveJPEGSplit.hasIdleCores(pending: pending))
            && ProgressiveJPEGSplit.splits(bytes)
    }

    /// A progressive file on two threads (``ProgressiveJPEGSplit``), once ``splitsNow`` said
    /// yes; false when a half fails, and the caller decodes it whole.
    private func decodeSplit(
        _ bytes: UnsafeRawBufferPointer, factor: JPEGScalingFactor, size: PixelSize, into out: UnsafeMutableRawPointer,
        stride: Int
    ) -> Bool {
        if progressiveSplit == nil { progressiveSplit = ProgressiveJPEGSplit() }
        progressiveSplit!.forkJoin = forkJoin
        let scratch = scratchBuffer(ProgressiveJPEGSplit.scratchBytes(fileBytes: bytes.count, size: size))
        return progressiveSplit!.decode(bytes, factor: factor, size: size, into: out, stride: stride, scratch: scratch)
    }

    /// Whether ``decodeJPEGInRows(_:header:minimumSize:into:stride:rowsPerStep:progress:)``
    /// decodes these bytes (a JPEG with EXIF orientation 1, not CMYK or YCCK, and not a
    /// progressive file that ``splitsProgressiveJPEG`` would decode on two threads now, whose
    /// entropy decoding is most of its time). Reads the header's markers again (microseconds).
    ///
    /// WebP is not decoded in rows: libwebp's incremental decoder can hand rows over, but on two
    /// cores the overlapped WebP render measured about 10 % slower than the serial one
    /// (2560×1600 → 1024 px: 47.6 and 44.4 ms against 43.1 and 40.5), because libwebp's own
    /// second thread (`use_threads`) already keeps the other core busy.
    package func decodesJPEGInRows(_ bytes: UnsafeRawBufferPointer, header: ImageHeader) -> Bool {
        guard header.format == .jpeg, header.orientation == 1, let h = try? jpeg.readHeader(bytes) else { return false }
        if splitsNow(bytes, colorspace: h.colorspace, pending: 1) { return false }
        return h.colorspace != TJCS_CMYK.rawValue && h.colorspace != TJCS_YCCK.rawValue
    }

    /// Decodes a JPEG as ``decode(_:header:minimumSize:into:)`` does, into `destination` (a
    /// ``PixelStyle/bgra32Premultiplied`` buffer of ``decodedSize(for:minimumSize:)`` pixels,
    /// rows `stride` bytes apart), handing over its rows as they go: after each step of about
    /// `rowsPerStep` rows, `progress(rows)` says how many rows from the top are final. Only for
    /// JPEGs whose pixels go straight to the destination (EXIF orientation 1, not CMYK or YCCK):
    /// returns false, having written nothing, for the others. Same bytes as `decode`.
    package func decodeJPEGInRows(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, minimumSize: PixelSize?,
        into destination: UnsafeMutableRawPointer, stride: Int, rowsPerStep: Int, progress: (Int) -> Void
    ) throws(ImageDecodingError) -> Bool {
        guard header.format == .jpeg, header.orientation == 1 else { return false }
        let factor = jpegScalingFactor(for: header, minimumSize: minimumSize) ?? .one
        precondition(stride >= factor.scaled(header.codedSize).width * 4, "decodeJPEGInRows: stride too small")
        if jpegRows == nil { jpegRows = JPEGRowDecompressor() }
        ProgressiveJPEGSplit.decodesInFlight.add(1, ordering: .relaxed)
        defer { ProgressiveJPEGSplit.decodesInFlight.subtract(1, ordering: .relaxed) }
        return try jpegRows!.decode(
            bytes, factor: factor, expected: factor.scaled(header.codedSize), into: destination, stride: stride,
            rowsPerStep: rowsPerStep, progress: progress)
    }

    /// Runs `decode` (a codec's decode of `coded` pixels, as stored, into a destination and its
    /// stride) straight into `out` when `orientation` is 1, else into the scratch buffer, which
    /// is then turned into `out`.
    private func decodeOriented(
        coded: PixelSize, orientation: Int, into out: UnsafeMutableRawPointer, stride: Int,
        _ decode: (UnsafeMutableRawPointer, Int) throws(ImageDecodingError) -> Void
    ) throws(ImageDecodingError) {
        if orientation == 1 {
            try decode(out, stride)
            return
        }
        let buffer = scratchBuffer(coded.width * 4 * coded.height)
        try decode(buffer, coded.width * 4)
        PixelOps.orient(
            from: buffer, codedSize: coded, sourceStride: coded.width * 4,
            to: out, destinationStride: stride, orientation: orientation)
    }

    private func decodeWebP(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, size: PixelSize,
        into out: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        let coded = header.swapsSides ? PixelSize(width: size.height, height: size.width) : size
        try decodeOriented(coded: coded, orientation: header.orientation, into: out, stride: stride) {
            (destination, pitch) throws(ImageDecodingError) in
            if header.isAnimated {
                try WebPCodec.decodeFirstFrame(bytes, canvas: header.codedSize, into: destination, stride: pitch)
            } else {
                try WebPCodec.decode(bytes, codedSize: header.codedSize, size: coded, into: destination, stride: pitch)
            }
        }
    }

    /// AVIF and JPEG XL: the whole image at its coded size (no shrink-on-load), oriented after.
    private func decodeCodedSize(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, into out: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        let coded = header.codedSize, maxPixels = limits.maxPixels, format = header.format
        try decodeOriented(coded: coded, orientation: header.orientation, into: out, stride: stride) {
            (destination, pitch) throws(ImageDecodingError) in
            if format == .jxl {
                try JXLCodec.decode(bytes, size: coded, maxPixels: maxPixels, into: destination, stride: pitch)
            } else {
                try AVIFCodec.decode(bytes, size: coded, maxPixels: maxPixels, into: destination, stride: pitch)
            }
        }
    }

    private func decodeTIFF(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, into out: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        let coded = header.codedSize
        try decodeOriented(coded: coded, orientation: header.orientation, into: out, stride: stride) {
            (destination, pitch) throws(ImageDecodingError) in
            try TIFFCodec.decode(bytes, size: coded, into: destination, stride: pitch)
        }
    }

    private func decodePNG(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader,
        into out: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        try PNGCodec.decode(bytes, expectedSize: header.codedSize, into: out, stride: stride)
    }
}
