import Strata

/// How an IIIF image is made from the engine's decoded variants.
///
/// A request for region R at output size S is answered from a variant of the *whole* image
/// fitted to the original's size × S/R's scale (``engineBox(original:region:output:)``), so
/// every tile of one zoom level asks the engine for the same box and one decoded variant —
/// made with the source's shrink-on-load, never a full-size decode for a low zoom level —
/// serves them all within the engine's tolerance. The region's rectangle is then mapped into
/// the variant's pixels, resampled to S (Lanczos-3), turned, mirrored and made gray as asked
/// (``compose(_:region:original:output:rotation:quality:)``). Pure apart from the resampler's
/// buffers; cost: one resample of the output's size plus one pass per transform.
package enum IIIFRendering {
    /// The box to ask the engine for: the original's size at the request's scale, rounded up
    /// and no larger than the original (a larger scale is reached by resampling the original).
    package static func engineBox(original: PixelSize, region: IIIFRect, output: PixelSize) -> PixelSize {
        let scale = max(Double(output.width) / Double(region.width), Double(output.height) / Double(region.height))
        guard scale < 1 else { return original }
        return PixelSize(
            width: min(original.width, max(1, Int((Double(original.width) * scale).rounded(.up)))),
            height: min(original.height, max(1, Int((Double(original.height) * scale).rounded(.up)))))
    }

    /// `region` (pixels of the original) in the coordinates of a whole-image variant of
    /// `variant` pixels.
    package static func variantRect(region: IIIFRect, original: PixelSize, variant: PixelSize) -> SourceRect {
        let fx = Double(variant.width) / Double(original.width)
        let fy = Double(variant.height) / Double(original.height)
        return SourceRect(
            x: Double(region.x) * fx, y: Double(region.y) * fy, width: Double(region.width) * fx, height: Double(region.height) * fy)
    }

    /// The output image: `region` of the whole-image `variant` resampled to `output`, then
    /// mirrored, turned and converted to the quality. Call on the engine's threads.
    package static func compose(
        _ variant: PixelImage, region: IIIFRect, original: PixelSize, output: PixelSize, rotation: IIIFRotation,
        quality: IIIFQuality
    ) -> PixelImage {
        let rect = variantRect(region: region, original: original, variant: variant.size)
        var image: PixelImage
        if rect == SourceRect(x: 0, y: 0, width: Double(variant.width), height: Double(variant.height)), variant.size == output {
            image = variant
        } else {
            image = Resampler().resample(variant, region: rect, to: output)
        }
        return finish(image, rotation: rotation, quality: quality)
    }

    /// `image` mirrored, turned and converted to `quality`, as the request asks.
    package static func finish(_ image: PixelImage, rotation: IIIFRotation, quality: IIIFQuality) -> PixelImage {
        var image = image
        if rotation.mirrored { image = image.mirrored() }
        image = image.rotated(clockwiseQuarterTurns: rotation.quarterTurns)
        switch quality {
        case .default, .color: break
        case .gray: image = image.grayscale()
        case .bitonal: image = image.grayscale(threshold: 128)
        }
        return image
    }
}
