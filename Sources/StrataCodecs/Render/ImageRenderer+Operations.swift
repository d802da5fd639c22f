import StrataBase

/// Renders with ``/StrataBase/ImageOperations``: the original's geometry first (trim, crop,
/// flip, rotation), then the resize, then the output's filters (padding, blur, sharpen).
///
/// A render without geometry operations is the ordinary one (``renderSized(_:header:request:)``,
/// shrink-on-load and the overlapped decode included), `fit` for `pad`, and the filters run on
/// its output. With them, the crop is planned on the original: shrink-on-load keeps enough
/// pixels for the crop's scale, the resample reads only the crop, and the flip and quarter turn
/// run on the (small) output. A trim needs the whole original at full size (its box is in
/// original pixels, the same for every size), so that decode is made once and resampled from.
extension ImageRenderer {
    /// The render of `request` (with operations): the image and the size of the original after
    /// its geometry operations.
    func renderWithOperations(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, request: RenderRequest
    ) throws(ImageDecodingError) -> (image: PixelImage, originalSize: PixelSize) {
        let operations = request.operations
        var sized = request
        sized.style = .bgra32Premultiplied
        if operations.pad != nil { sized.mode = .fit }
        var output: PixelImage
        var original = header.size
        if operations.changesGeometry {
            (output, original) = try renderGeometry(bytes, header: header, request: sized)
        } else {
            output = try renderSized(bytes, header: header, request: sized)
        }
        output = filtered(output, request: request)
        return (request.style == .bgra32Premultiplied ? output : PixelConversion.convert(output, to: request.style), original)
    }

    /// The padding, the blur and the sharpen of `request`, in that order, on `image`.
    func filtered(_ image: PixelImage, request: RenderRequest) -> PixelImage {
        let operations = request.operations
        var image = image
        if let extend = operations.pad {
            let colour = (operations.background ?? .transparent).premultipliedBGRA
            image = image.padded(to: request.box, focus: request.gravity.focus ?? .center, extend: extend, background: colour)
        }
        if let sigma = operations.blur {
            let span = Spans.start("strata.blur", parent: traceParent)
            image = image.blurred(sigma: sigma, threads: resampleThreads, forkJoin: forkJoin)
            span?.end()
        }
        if let sigma = operations.sharpen {
            let span = Spans.start("strata.sharpen", parent: traceParent)
            image = image.sharpened(sigma: sigma, threads: resampleThreads, forkJoin: forkJoin)
            span?.end()
        }
        return image
    }

    /// Where a request's geometry operations take it: the region of the original kept (trim and
    /// crop, in original pixels) and the sizing of that region into the box (the box turned
    /// back when the rotation is a quarter, the focus mapped back through the flip and turn).
    struct GeometryPlan {
        var region: (x: Int, y: Int, width: Int, height: Int)
        var sizing: SizingPlan
        /// The plan's source rectangle in original pixels.
        var sourceRect: SourceRect {
            SourceRect(
                x: Double(region.x) + sizing.sourceRect.x, y: Double(region.y) + sizing.sourceRect.y,
                width: sizing.sourceRect.width, height: sizing.sourceRect.height)
        }
        /// The original after the geometry operations (turned).
        var transformedSize: PixelSize
    }

    /// The plan of `request` once the trim box (or the whole original) is known.
    func geometryPlan(
        original: PixelSize, trimmed: (x: Int, y: Int, width: Int, height: Int), request: RenderRequest
    ) throws(ImageDecodingError) -> GeometryPlan {
        let operations = request.operations
        var region = trimmed
        if let crop = operations.crop, operations.cropInOriginal {
            // thumbor's order: the crop, in the original's pixels, inside the trimmed box.
            if let inside = crop.rect(in: original) {
                let left = max(inside.x, trimmed.x), top = max(inside.y, trimmed.y)
                let right = min(inside.x + inside.width, trimmed.x + trimmed.width)
                let bottom = min(inside.y + inside.height, trimmed.y + trimmed.height)
                if left < right, top < bottom { region = (left, top, right - left, bottom - top) }
            }
        } else if let crop = operations.crop {
            guard let inside = crop.rect(in: PixelSize(width: trimmed.width, height: trimmed.height)) else {
                throw ImageDecodingError(
                    .operation(
                        "crop=\(crop) lies outside the \(trimmed.width)×\(trimmed.height) original\(operations.trim != nil ? " (trimmed)" : "")"
                    ),
                    format: nil)
            }
            region = (trimmed.x + inside.x, trimmed.y + inside.y, inside.width, inside.height)
        }
        let turned = operations.turnsBox
        let box = turned ? PixelSize(width: request.box.height, height: request.box.width) : request.box
        let focus = Self.unturned(request.focus ?? .center, operations)
        let sizing = SizingPlan(
            source: PixelSize(width: region.width, height: region.height), box: box, mode: request.mode,
            allowUpscale: request.allowUpscale, focus: focus)
        let size = turned ? PixelSize(width: region.height, height: region.width) : PixelSize(width: region.width, height: region.height)
        return GeometryPlan(region: region, sizing: sizing, transformedSize: size)
    }

    /// The point of the unturned, unflipped image that `focus` of the answer is on: the answer is
    /// the region flipped, then turned clockwise.
    static func unturned(_ focus: CropFocus, _ operations: ImageOperations) -> CropFocus {
        let (u, v) = (focus.x, focus.y)
        var (x, y): (Double, Double)
        switch operations.quarterTurns {
        case 1: (x, y) = (v, 1 - u)
        case 2: (x, y) = (1 - u, 1 - v)
        case 3: (x, y) = (1 - v, u)
        default: (x, y) = (u, v)
        }
        switch operations.flip {
        case .h: x = 1 - x
        case .v: y = 1 - y
        case nil: break
        }
        return CropFocus(x: x, y: y)
    }

    /// The smallest decode that keeps `plan`'s scale within ``decodeHeadroom`` (shrink-on-load).
    func minimumDecode(for plan: GeometryPlan, original: PixelSize) -> PixelSize {
        let rect = plan.sizing.sourceRect
        let sx = Double(plan.sizing.output.width) / rect.width
        let sy = Double(plan.sizing.output.height) / rect.height
        let scale = min(1, max(sx, sy) * decodeHeadroom)
        return PixelSize(
            width: SizingPlan.side(Double(original.width) * scale, .up, atMost: original.width),
            height: SizingPlan.side(Double(original.height) * scale, .up, atMost: original.height))
    }

    /// The geometry operations and the resize: premultiplied BGRA at the output size (before
    /// padding), and the size of the original after the operations.
    private func renderGeometry(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, request: RenderRequest
    ) throws(ImageDecodingError) -> (PixelImage, PixelSize) {
        let operations = request.operations
        let original = header.size
        let whole = (x: 0, y: 0, width: original.width, height: original.height)
        var decoded: PixelImage
        let plan: GeometryPlan
        if let threshold = operations.trim {
            decoded = scratchImage(original)
            try traced(startDecodeSpan(bytes: bytes.count, header: header, decodedSize: original)) {
                () throws(ImageDecodingError) in try decoder.decode(bytes, header: header, minimumSize: original, into: &decoded)
            }
            let span = Spans.start("strata.trim", parent: traceParent)
            let box = decoded.trimBox(threshold: threshold, fromBottomRight: operations.trimFromBottomRight)
            span?.end()
            plan = try geometryPlan(original: original, trimmed: box, request: request)
        } else {
            plan = try geometryPlan(original: original, trimmed: whole, request: request)
            let minimum = minimumDecode(for: plan, original: original)
            decoded = scratchImage(decoder.decodedSize(for: header, minimumSize: minimum))
            try traced(startDecodeSpan(bytes: bytes.count, header: header, decodedSize: decoded.size)) {
                () throws(ImageDecodingError) in try decoder.decode(bytes, header: header, minimumSize: minimum, into: &decoded)
            }
        }
        let fx = Double(decoded.width) / Double(original.width)
        let fy = Double(decoded.height) / Double(original.height)
        let rect = plan.sourceRect
        var output = PixelImage(
            uninitializedWidth: plan.sizing.output.width, height: plan.sizing.output.height, style: .bgra32Premultiplied)
        let span = Spans.start("strata.resample", parent: traceParent)
        resampler.resample(
            decoded, region: SourceRect(x: rect.x * fx, y: rect.y * fy, width: rect.width * fx, height: rect.height * fy), into: &output)
        span?.end()
        convertColour(&output, header: header, request: request)
        switch operations.flip {
        case .h: output = output.mirrored()
        case .v: output = output.flippedVertically()
        case nil: break
        }
        output = output.rotated(clockwiseQuarterTurns: operations.quarterTurns)
        return (output, plan.transformedSize)
    }

    /// The most bytes a render with operations holds at once: the decode (the whole original for
    /// a trim; for a crop the decode its scale needs), the output three times over (resample,
    /// turn, filter), the padded canvas, the sharpen's float planes, and the codec's own buffers.
    func operationsPeak(
        _ bytes: UnsafeRawBufferPointer, header: ImageHeader, request: RenderRequest
    ) throws(ImageDecodingError) -> Int {
        func bytesOf(_ size: PixelSize) -> Int { PixelLayout.bytesPerRow(width: size.width, style: .bgra32Premultiplied) * size.height }
        let original = header.size
        var sized = request
        if request.operations.pad != nil { sized.mode = .fit }
        let decodedSize: PixelSize
        let output: PixelSize
        if request.operations.trim != nil {
            // The output is at most the original's size, turned either way.
            let side = max(original.width, original.height)
            decodedSize = original
            output = PixelSize(width: min(request.box.width, side), height: min(request.box.height, side))
        } else {
            let plan = try geometryPlan(original: original, trimmed: (0, 0, original.width, original.height), request: sized)
            decodedSize = decoder.decodedSize(for: header, minimumSize: minimumDecode(for: plan, original: original))
            output = plan.sizing.output
        }
        let canvas =
            request.operations.pad != nil
            ? PixelSize(width: max(output.width, request.box.width), height: max(output.height, request.box.height)) : output
        var peak = bytesOf(decodedSize) + 3 * bytesOf(canvas)
        if request.operations.sharpen != nil { peak += 3 * 4 * canvas.width * canvas.height }
        peak += ImageDecoder.workingBytes(for: header, decodedSize: decodedSize, bytes: bytes)
        return peak
    }
}
