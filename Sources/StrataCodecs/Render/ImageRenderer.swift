import Tracing
import StrataBase

/// What the source tier is asked to produce: an exact output for a box, a content mode, a
/// pixel style and the colours (``/StrataBase/ColourOutput``).
public struct RenderRequest: Hashable, Sendable {
    public var box: PixelSize
    public var mode: ContentMode
    public var style: PixelStyle
    /// Enlarge a source smaller than the box (off by default: a small source is returned at its
    /// own size for `fit`, or as the largest box-aspect crop for `fill`).
    public var allowUpscale: Bool
    /// sRGB (default: an embedded profile is converted) or the original's colour space.
    public var colour: ColourOutput
    /// Where a `fill` crop sits (``/StrataBase/Gravity/center`` by default).
    public var gravity: Gravity
    /// For ``/StrataBase/Gravity/smart``: the focus already chosen (by the engine, from a small variant the
    /// tiers hold); `nil` lets the renderer choose it from its own shrink-on-load decode.
    public var smartFocus: CropFocus?
    /// Trim, crop, flip, rotation, padding, blur and sharpen (``/StrataBase/ImageOperations``);
    /// none by default.
    public var operations: ImageOperations

    public init(
        box: PixelSize, mode: ContentMode = .fit, style: PixelStyle = .default, allowUpscale: Bool = false,
        colour: ColourOutput = .srgb, gravity: Gravity = .center, smartFocus: CropFocus? = nil,
        operations: ImageOperations = .none
    ) {
        self.operations = operations
        self.box = box
        self.mode = mode
        self.style = style
        self.allowUpscale = allowUpscale
        self.colour = colour
        self.gravity = gravity
        self.smartFocus = smartFocus
    }

    /// The focus a `fill` crop is centred on, `nil` while a smart one is still to be chosen.
    package var focus: CropFocus? { gravity.focus ?? smartFocus }
}

/// Turns encoded bytes into the exact requested image: header check → shrink-on-load decode
/// (JPEG DCT scaling, WebP scaled decode) → Lanczos-3 resample → colour conversion of an
/// embedded profile (``ColourConversion``) → style conversion.
///
/// The colour conversion runs after the resample, on the output's rows, by the thread that
/// wrote them as each band (or, overlapped with a JPEG decode, each chunk) ends: `strata-bench
/// source` measured it there at a fraction of its cost on the decoded (larger) image, and its
/// result is within 40 dB of a conversion of the whole image (tests hold every profile kind to
/// that). CMYK is converted by the decoder, before the resample (the resampler works on BGRA).
///
/// Not thread-safe: one renderer per running job (the engine keeps a free list of them). Its
/// decode buffer comes from ``/StrataBase/PixelMemory`` and goes back there after each render, whose
/// bounded cache keeps it resident for the next (page-faulting a fresh multi-megabyte buffer per
/// image costs more than the resample), without one renderer holding the largest decode it ever
/// made.
public final class ImageRenderer {
    /// How much larger than the output the shrink-on-load decode stays (on the binding side).
    /// 2 leaves a 2× Lanczos reduce, which keeps the result within 44 dB of a full decode; 1
    /// decodes straight to the smallest DCT scale that still covers the output.
    public var decodeHeadroom: Double
    /// Threads one large resample may use (see ``/StrataBase/Resampler/threads``; default as
    /// ``RenderSettings/defaultResampleThreads``). Above 1, a progressive JPEG is also
    /// decoded on two threads (``ImageDecoder/splitsProgressiveJPEG``).
    public var resampleThreads: Int {
        get { resampler.threads }
        set {
            resampler.threads = newValue
            decoder.splitsProgressiveJPEG = resampler.threads > 1
        }
    }
    /// Whether a JPEG decode and its resample run at once when ``resampleThreads`` allows the
    /// resample to split (default true): the resample's helper thread reduces the rows decoded
    /// so far while the decoder goes on, so a large photo's thumbnail takes about its decode's
    /// time. The bytes are the same either way.
    public var overlapsDecode = true
    /// Where a render's parallel parts run — a split resample's bands, a split progressive
    /// decode's second half, the resample beside a decode (``/StrataBase/ForkJoin/dispatch`` by default;
    /// the engine sets its pool, in the lane of the job using the renderer).
    public var forkJoin: ForkJoin {
        get { resampler.forkJoin }
        set {
            resampler.forkJoin = newValue
            decoder.forkJoin = newValue
        }
    }
    /// Whether the last render overlapped its decode and resample (for tests).
    package private(set) var lastRenderOverlapped = false
    /// The focus the last smart render chose (`nil` when it chose none), for the crop benchmark.
    package private(set) var lastSmartFocus: CropFocus?
    /// Converts colour on the decoded image, before the resample, instead of on the output
    /// (off; `strata-bench source` measures both). A JPEG then decodes without the overlap.
    @_spi(Benchmarks) public var convertsColourBeforeResample = false
    public let decoder: ImageDecoder
    package let resampler = Resampler()
    /// The parent of this render's spans (decode, resample, colour), set by the engine for one
    /// render when tracing is on (`EngineTracing`); `nil`: no spans.
    package var traceParent: ServiceContext?

    public init(
        limits: DecodingLimits = DecodingLimits(), decodeHeadroom: Double = 2.0,
        resampleThreads: Int = RenderSettings.defaultResampleThreads
    ) {
        self.decoder = ImageDecoder(limits: limits)
        self.decodeHeadroom = decodeHeadroom
        resampler.threads = resampleThreads
        decoder.splitsProgressiveJPEG = resampler.threads > 1
    }

    /// The decode plan for `header` and `request`: the output geometry and the minimum decoded
    /// size that shrink-on-load must keep.
    /// A smart crop whose focus is not chosen yet is planned centred (its size, and so the decode,
    /// do not depend on where it goes).
    public func plan(for header: ImageHeader, request: RenderRequest) -> (sizing: SizingPlan, minimumDecode: PixelSize) {
        let sizing = SizingPlan(
            source: header.size, box: request.box, mode: request.mode, allowUpscale: request.allowUpscale,
            focus: request.focus ?? .center)
        // Output pixels per source pixel along each side of the source region.
        let sx = Double(sizing.output.width) / sizing.sourceRect.width
        let sy = Double(sizing.output.height) / sizing.sourceRect.height
        let scale = min(1, max(sx, sy) * decodeHeadroom)
        let minimum = PixelSize(
            width: SizingPlan.side(Double(header.size.width) * scale, .up, atMost: header.size.width),
            height: SizingPlan.side(Double(header.size.height) * scale, .up, atMost: header.size.height))
        return (sizing, minimum)
    }

    /// Renders `bytes` for `request`. Throws ``ImageDecodingError`` for bad input; nothing is
    /// returned from a partial decode.
    public func render(_ bytes: UnsafeRawBufferPointer, request: RenderRequest) throws(ImageDecodingError) -> PixelImage {
        try renderWithOriginalSize(bytes, request: request).image
    }

    /// `render(_:request:)` that also says the original's size (after EXIF orientation):
    /// the result is the whole original when its size is that and the mode is `fit`.
    public func renderWithOriginalSize(
        _ bytes: UnsafeRawBufferPointer, request: RenderRequest
    ) throws(ImageDecodingError) -> (image: PixelImage, originalSize: PixelSize) {
        try render(bytes, prepared: prepare(bytes, request: request))
    }

    /// The first half of a render: reads the header and plans the decode, so that the caller
    /// knows the bytes the render will hold (``PreparedRender/peakBytes``) before any pixel is
    /// allocated (the engine's `render.memoryLimit` waits here). Cheap: a header parse.
    public func prepare(_ bytes: UnsafeRawBufferPointer, request: RenderRequest) throws(ImageDecodingError) -> PreparedRender {
        let header = try decoder.readHeader(bytes)
        if !request.operations.isEmpty {
            return PreparedRender(header: header, request: request, peakBytes: try operationsPeak(bytes, header: header, request: request))
        }
        let planned = plan(for: header, request: request)
        let decodedSize = decoder.decodedSize(for: header, minimumSize: planned.minimumDecode)
        func bytesOf(_ size: PixelSize) -> Int {
            PixelLayout.bytesPerRow(width: size.width, style: .bgra32Premultiplied) * size.height
        }
        var peak = bytesOf(planned.sizing.output)
        // A decode that is not the output itself goes through a scratch image of its size.
        if decodedSize != planned.sizing.output || planned.sizing.sourceRect.width != Double(header.size.width)
            || planned.sizing.sourceRect.height != Double(header.size.height)
        {
            peak += bytesOf(decodedSize)
        }
        if request.style != .bgra32Premultiplied { peak += bytesOf(planned.sizing.output) }
        peak += ImageDecoder.workingBytes(for: header, decodedSize: decodedSize, bytes: bytes)
        return PreparedRender(header: header, request: request, peakBytes: peak)
    }

    /// The second half of a render: decodes and resamples what ``prepare(_:request:)`` planned
    /// for these same `bytes`. With operations that change the geometry, `originalSize` is the
    /// size of the original after them (trimmed, cropped, turned): the image is that original
    /// whole when it has that size.
    public func render(
        _ bytes: UnsafeRawBufferPointer, prepared: PreparedRender
    ) throws(ImageDecodingError) -> (image: PixelImage, originalSize: PixelSize) {
        let (header, request) = (prepared.header, prepared.request)
        if !request.operations.isEmpty { return try renderWithOperations(bytes, header: header, request: request) }
        return (try renderSized(bytes, header: header, request: request), header.size)
    }

    /// The render without operations: shrink-on-load, the resample (beside the decode when it
    /// can), the colour conversion and the style.
    func renderSized(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, request: RenderRequest
    ) throws(ImageDecodingError) -> PixelImage {
        let planned = plan(for: header, request: request)
        var sizing = planned.sizing
        let minimum = planned.minimumDecode
        let decodedSize = decoder.decodedSize(for: header, minimumSize: minimum)
        lastRenderOverlapped = false
        lastSmartFocus = nil
        let whole = SourceRect(x: 0, y: 0, width: Double(header.size.width), height: Double(header.size.height))
        // A smart crop still to place: chosen from this render's own decode (the whole image at
        // the shrink-on-load size), so that decode does not overlap the resample. Measured
        // (`strata-bench gravity`), this costs less than overlapping a resample of the whole
        // image to the crop's scale and copying the crop out of it, which was tried.
        let choosesFocus = request.mode == .fill && request.focus == nil && sizing.sourceRect != whole

        // Shrink-on-load already produced the exact output (a small source, or a scale that
        // lands on it): decode straight into the output, no scratch and no resample.
        if decodedSize == sizing.output && sizing.sourceRect == whole {
            var output = PixelImage(uninitializedWidth: decodedSize.width, height: decodedSize.height, style: .bgra32Premultiplied)
            try traced(startDecodeSpan(bytes: bytes.count, header: header, decodedSize: decodedSize)) {
                () throws(ImageDecodingError) in try decoder.decode(bytes, header: header, minimumSize: minimum, into: &output)
            }
            let colourSpan = Spans.start("strata.colour", parent: traceParent)
            colourSpan?.attributes["strata.colour.output"] = "\(request.colour)"
            convertColour(&output, header: header, request: request)
            colourSpan?.end()
            return request.style == .bgra32Premultiplied ? output : PixelConversion.convert(output, to: request.style)
        }

        // The plan's source rectangle, in decoded pixels.
        let fx = Double(decodedSize.width) / Double(header.size.width)
        let fy = Double(decodedSize.height) / Double(header.size.height)
        func region(of sizing: SizingPlan) -> SourceRect {
            SourceRect(
                x: sizing.sourceRect.x * fx, y: sizing.sourceRect.y * fy,
                width: sizing.sourceRect.width * fx, height: sizing.sourceRect.height * fy)
        }
        var output = PixelImage(uninitializedWidth: sizing.output.width, height: sizing.output.height, style: .bgra32Premultiplied)

        // The decode's scratch (its sole owner, so the decoder writes in place), back to
        // PixelMemory when the render ends.
        var decoded = scratchImage(decodedSize)
        // The colour conversion runs on each band or chunk of output rows as the resampler
        // writes them (hidden in the overlapped decode's slack), unless measured before it.
        let converter = convertsColourBeforeResample ? nil : rowConverter(header: header, request: request)
        let finish = converter?.rowsFinish
        if overlapsDecode && !convertsColourBeforeResample && !choosesFocus
            && resampler.overlapsFill(
                sourceSize: decodedSize, region: region(of: sizing), destinationSize: sizing.output, style: .bgra32Premultiplied)
            && decoder.decodesJPEGInRows(bytes, header: header)
        {
            lastRenderOverlapped = true
            // One span: the resample (and the colour conversion of its rows) runs beside the decode.
            let span = startDecodeSpan(bytes: bytes.count, header: header, decodedSize: decodedSize)
            span?.attributes["strata.resample.overlapped"] = true
            span?.attributes["strata.size.output"] = "\(sizing.output)"
            span?.attributes["strata.colour.converted"] = converter != nil
            try traced(span) { () throws(ImageDecodingError) in
                try decodeAndResample(
                    bytes, header: header, minimum: minimum, region: region(of: sizing), decoded: &decoded, into: &output,
                    finish: finish)
            }
        } else {
            try traced(startDecodeSpan(bytes: bytes.count, header: header, decodedSize: decodedSize)) {
                () throws(ImageDecodingError) in try decoder.decode(bytes, header: header, minimumSize: minimum, into: &decoded)
            }
            if convertsColourBeforeResample {
                let colourSpan = Spans.start("strata.colour", parent: traceParent)
                colourSpan?.attributes["strata.colour.output"] = "\(request.colour)"
                convertColour(&decoded, header: header, request: request)
                colourSpan?.end()
            }
            if choosesFocus {
                let focus = Saliency.focus(
                    of: decoded, cropWidth: sizing.sourceRect.width / whole.width,
                    cropHeight: sizing.sourceRect.height / whole.height)
                lastSmartFocus = focus
                sizing = SizingPlan(
                    source: header.size, box: request.box, mode: request.mode, allowUpscale: request.allowUpscale, focus: focus)
            }
            let resampleSpan = Spans.start("strata.resample", parent: traceParent)
            resampleSpan?.attributes["strata.size.from"] = "\(decodedSize)"
            resampleSpan?.attributes["strata.size.to"] = "\(sizing.output)"
            // The colour conversion runs on the output's rows as the resample writes them.
            resampleSpan?.attributes["strata.colour.converted"] = converter != nil
            resampler.resample(decoded, region: region(of: sizing), into: &output, finish: finish)
            resampleSpan?.end()
        }
        return request.style == .bgra32Premultiplied ? output : PixelConversion.convert(output, to: request.style)
    }

    /// The decode's span (`nil` when tracing is off): format, bytes, the original's and the
    /// decoded size.
    /// Runs `body` under `span` (when tracing made one): its error is recorded, and the span
    /// ends either way.
    func traced(_ span: (any Span)?, _ body: () throws(ImageDecodingError) -> Void) throws(ImageDecodingError) {
        defer { span?.end() }
        do {
            try body()
        } catch {
            span?.recordError(error)
            throw error
        }
    }

    func startDecodeSpan(bytes: Int, header: ImageHeader, decodedSize: PixelSize) -> (any Span)? {
        guard let span = Spans.start("strata.decode", parent: traceParent) else { return nil }
        span.attributes["strata.format"] = "\(header.format)"
        span.attributes["strata.bytes"] = bytes
        span.attributes["strata.size.original"] = "\(header.size)"
        span.attributes["strata.size.decoded"] = "\(decodedSize)"
        return span
    }

    /// What converts the output's rows for `request.colour`, `nil` when nothing is to be done
    /// (CMYK was the decoder's).
    private func rowConverter(header: ImageHeader, request: RenderRequest) -> ColourConversion.RowConverter? {
        guard !header.isCMYK else { return nil }
        return ColourConversion.converter(
            from: header.colour, gray: header.isGrayscale, output: request.colour, opaque: !header.hasAlpha)
    }

    /// The embedded profile applied to the whole of `image` for `request.colour` (CMYK was the
    /// decoder's).
    func convertColour(_ image: inout PixelImage, header: ImageHeader, request: RenderRequest) {
        guard !header.isCMYK else { return }
        ColourConversion.convert(
            &image, from: header.colour, gray: header.isGrayscale, output: request.colour, opaque: !header.hasAlpha,
            threads: resampleThreads, forkJoin: forkJoin)
    }

    /// The JPEG decode and the resample at once: the resampler's helper reduces the rows the
    /// decoder has finished while it decodes the next ones (see
    /// ``Resampler/resample(filling:sourceSize:sourceStride:style:region:into:fill:)``).
    private func decodeAndResample(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, minimum: PixelSize, region: SourceRect,
        decoded: inout PixelImage, into output: inout PixelImage, finish: Resampler.RowsFinish?
    ) throws(ImageDecodingError) {
        let size = decoded.size, stride = decoded.bytesPerRow
        // Steps of about 1/64 of the image: the helper trails the decoder by little, and a step
        // costs one atomic store and one semaphore signal.
        let rowsPerStep = max(16, size.height / 64)
        try decoded.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) throws(ImageDecodingError) in
            let base = raw.baseAddress!
            try resampler.resample(
                filling: UnsafePointer(base.assumingMemoryBound(to: UInt8.self)), sourceSize: size, sourceStride: stride,
                style: .bgra32Premultiplied, region: region, into: &output, finish: finish
            ) { (publish: (Int) -> Void) throws(ImageDecodingError) in
                let decodedInRows = try decoder.decodeJPEGInRows(
                    bytes, header: header, minimumSize: minimum, into: base, stride: stride, rowsPerStep: rowsPerStep,
                    progress: publish)
                // decodesJPEGInRows said yes to these very bytes: a refusal here means they differ.
                guard decodedInRows else {
                    throw ImageDecodingError(.corrupt("the JPEG's colour space changed between two reads"), format: .jpeg)
                }
            }
        }
    }

    /// Convenience for arrays.
    public func render(_ bytes: [UInt8], request: RenderRequest) throws(ImageDecodingError) -> PixelImage {
        try rethrowingTyped(ImageDecodingError.self) { try bytes.withUnsafeBytes { try render($0, request: request) } }
    }

    /// Sizes an already decoded `image` into `box` with this thread's resampler (see
    /// ``/StrataBase/Resampler/resize(_:box:mode:allowUpscale:)``); for resampling a cached larger variant.
    public func resize(_ image: PixelImage, box: PixelSize, mode: ContentMode) -> PixelImage {
        resampler.resize(image, box: box, mode: mode)
    }

    /// A scratch image of `size` (uninitialised).
    func scratchImage(_ size: PixelSize) -> PixelImage {
        PixelImage(uninitializedWidth: size.width, height: size.height, style: .bgra32Premultiplied)
    }
}

/// A render whose header is read and whose decode is planned (``ImageRenderer/prepare(_:request:)``),
/// with the most bytes it will hold while it runs.
public struct PreparedRender: Sendable {
    /// The original's header.
    public let header: ImageHeader
    /// What is rendered.
    public let request: RenderRequest
    /// An estimate of the most bytes the render holds at once: its output, the decode's scratch,
    /// a converted copy of the output, and the codec's own buffers
    /// (``ImageDecoder/workingBytes(for:decodedSize:bytes:)``).
    public let peakBytes: Int
}

extension ImageRenderer {
    /// For the decode fuzzer: overlap every JPEG decode its geometry allows with the resample,
    /// however small, so that arbitrary bytes reach the overlapped path.
    package func overlapEveryDecode() {
        resampler.overlapWork = 0
        resampler.parallelWork = 0
        resampleThreads = max(2, resampleThreads)
    }
}
