import StrataBase

/// Renders every frame of an animation as ``render(_:request:)`` renders a still: the same
/// geometry operations, sizing and filters, so each frame is what a still of it would be.
extension ImageRenderer {
    /// `animation` rendered for `request`: a trim takes its box from the first frame (one box for
    /// every frame, as the frames must share a canvas), a crop, flip and turn, the resample of each
    /// frame (Lanczos-3 from the full frame: animations are not shrunk on load), then padding,
    /// blur and sharpen; durations and loop count kept. A `smart` gravity is placed at the centre
    /// (no saliency across frames). Cost: one resample and the filters per frame.
    public func render(_ animation: AnimatedImage, request: RenderRequest) throws(ImageDecodingError) -> AnimatedImage {
        guard let first = animation.frames.first?.image else { return animation }
        var sized = request
        sized.style = .bgra32Premultiplied
        if request.operations.pad != nil { sized.mode = .fit }
        let whole = (x: 0, y: 0, width: first.width, height: first.height)
        let trimmed =
            request.operations.trim.map { first.trimBox(threshold: $0, fromBottomRight: request.operations.trimFromBottomRight) } ?? whole
        let plan = try geometryPlan(original: first.size, trimmed: trimmed, request: sized)
        let rect = plan.sourceRect
        let operations = request.operations
        return try animation.map { (frame: PixelImage) throws(ImageDecodingError) -> PixelImage in
            var output = PixelImage(
                uninitializedWidth: plan.sizing.output.width, height: plan.sizing.output.height, style: .bgra32Premultiplied)
            resampler.resample(frame, region: rect, into: &output)
            switch operations.flip {
            case .h: output = output.mirrored()
            case .v: output = output.flippedVertically()
            case nil: break
            }
            output = filtered(output.rotated(clockwiseQuarterTurns: operations.quarterTurns), request: request)
            return request.style == .bgra32Premultiplied ? output : PixelConversion.convert(output, to: request.style)
        }
    }
}
