import Strata

/// What a parsed thumbor URL asks of the engine and of the encode, decided once the original's
/// size is known, as thumbor's transformer decides it:
///
/// 1. trim, then the manual crop (clamped to the original; an empty one is ignored);
/// 2. the target size: `W`, `H`, `orig`, or one side from the other in proportion; none: the
///    original's (after `no_upscale()` lowered the sides to the original's);
/// 3. `fit-in` fits inside it, never enlarging (unless `upscale()`); `full-fit-in` covers it;
///    `adaptive-` turns the box to the image's orientation; without `fit-in` the image is
///    cropped to the target's aspect (at the alignment, a `focal()` point or Strata's saliency
///    for `smart`) and scaled to it, enlarging if need be; `stretch()` scales without a crop;
/// 4. then, on the resized variant and in URL order, the flips and the filters.
///
/// The engine renders (or finds within tolerance and resamples) exactly the size of step 3, so
/// that variant is shared with every URL that differs only in its filters; the filters of step
/// 4 run at the encode, and the encoded cache keeps their result.
package struct ThumborPlan: Sendable {
    /// The engine's request (exact size).
    package var request: ImageRequest
    /// The size the engine is asked for.
    package var resized: PixelSize
    /// The original after the manual crop (the engine's source of the resize, without a trim).
    package var cropped: PixelSize
    /// What runs on the resized variant before the encode, in order.
    package var steps: [Step] = []
    /// The encode: `nil` format keeps the original's (or negotiates, with `thumbor.autoWebp`).
    package var format: ResponseFormat?
    package var quality: Int?
    package var maxBytes: Int?
    /// The watermark keys the steps need (read through the engine before the encode).
    package var watermarkKeys: [String] = []
    /// The canonical text of the steps and options: the encoded cache's derivation.
    package var derivation: String = ""

    /// A step on the resized variant.
    package enum Step: Sendable, Hashable {
        case flipHorizontally
        case flipVertically
        case stretch(PixelSize)
        case filter(ThumborFilter)
    }

    /// Plans `url` (its `filters` parsed) for `key`, whose original is `original` (oriented).
    package init(
        url: ThumborURL, filters: [ThumborFilter], key: String, original: PixelSize, colour: ColourOutput, maxDimension: Int
    ) throws(ServiceError) {
        var operations = ImageOperations()
        if let trim = url.trim {
            // thumbor reads `trim:N` (no corner) as a corner named "N" and tolerance 0.
            operations.trim = trim.namedCorner ? min(255, trim.tolerance ?? 0) : 0
            // Any corner but top-left is bottom-right to thumbor's trimmer (`trim:10` too).
            operations.trimFromBottomRight = !(trim.namedCorner && trim.corner == .topLeft) && (trim.namedCorner || trim.tolerance != nil)
        }
        var source = original
        var cropOrigin = (x: 0, y: 0)
        if let crop = url.crop {
            let left = min(max(crop.left, 0), original.width), right = min(max(crop.right, 0), original.width)
            let top = min(max(crop.top, 0), original.height), bottom = min(max(crop.bottom, 0), original.height)
            if left < right, top < bottom {
                operations.crop = CropRegion(
                    x: Double(left), y: Double(top), width: Double(right - left), height: Double(bottom - top), isFraction: false)
                operations.cropInOriginal = url.trim != nil
                source = PixelSize(width: right - left, height: bottom - top)
                cropOrigin = (left, top)
            }
        }
        cropped = source
        var width = url.width, height = url.height
        var stretch = false, upscale = false
        var focal: [(x: Double, y: Double, weight: Double)] = []
        for filter in filters {
            switch filter {
            case .noUpscale:
                // thumbor lowers the request's sides to the original's (its after-load phase).
                if case .pixels(let value) = width { width = .pixels(min(value, original.width)) }
                if case .pixels(let value) = height { height = .pixels(min(value, original.height)) }
            case .stretch: stretch = true
            case .upscale: upscale = true
            case .focal(let box):
                let (w, h) = (box.right - box.left, box.bottom - box.top)
                guard w != 0, h != 0 else { continue }
                // thumbor's focal point: the box's centre in whole pixels, weighted by its area.
                let x = Double(box.left + w / 2 - cropOrigin.x)
                let y = Double(box.top + h / 2 - cropOrigin.y)
                guard x >= 0, y >= 0, x <= Double(source.width), y <= Double(source.height) else { continue }
                focal.append((x, y, abs(Double(w) * Double(h))))
            case .format(let format): self.format = format
            case .quality(let quality): self.quality = max(1, min(100, quality))
            case .maxBytes(let bytes): maxBytes = bytes
            case .watermark(let mark): watermarkKeys.append(mark.key)
            default: break
            }
        }
        // Step 2: the target size, as thumbor computes it (proportional sides rounded).
        let (sw, sh) = (Double(source.width), Double(source.height))
        func given(_ side: ThumborURL.Side, _ original: Int) -> Double? {
            switch side {
            case .orig: Double(original)
            case .pixels(0): nil
            case .pixels(let value): Double(value)
            }
        }
        var targetWidth = given(width, source.width)
        var targetHeight = given(height, source.height)
        // Without a side, or with one: the other follows the image as trimmed and cropped, which
        // only the render knows (a trim's box): the engine fits it.
        let proportional = (targetWidth == nil || targetHeight == nil) && !url.fitIn && !stretch
        switch (targetWidth, targetHeight) {
        case (nil, nil): (targetWidth, targetHeight) = (sw, sh)
        case (let w?, nil): targetHeight = (w * sh / sw).rounded(.toNearestOrEven)
        case (nil, let h?): targetWidth = (h * sw / sh).rounded(.toNearestOrEven)
        default: break
        }
        var tw = max(1, targetWidth ?? sw), th = max(1, targetHeight ?? sh)
        func tooLarge(_ width: Double, _ height: Double) -> ServiceError {
            ServiceError.badParameter(
                "the answer would be \(Int(min(width, 1e15)))x\(Int(min(height, 1e15))) pixels: at most \(maxDimension) a side (http.maxDimension)"
            )
        }
        // A fit-in box may be larger than the answer (it never enlarges); every other answer is
        // the target's size.
        if !url.fitIn, tw > Double(maxDimension) || th > Double(maxDimension) { throw tooLarge(tw, th) }
        // Step 3.
        var mode = ContentMode.fill
        var allowUpscale = true
        // Sides as whole pixels, bounded (a URL's side may be any number of digits).
        func whole(_ side: Double) -> Int { side >= 1e15 ? 1_000_000_000_000_000 : Int(side) }
        var box = PixelSize(width: whole(tw), height: whole(th))
        var gravity = Gravity.center
        if url.fitIn {
            mode = .fit
            if url.adaptive, (sw < sh && tw > th) || (sw > sh && tw < th) { swap(&tw, &th) }
            if url.full {
                // Covers the box: the side whose scale is the larger one fits it.
                let (w, h) = sw / tw <= sh / th ? (tw, (sh * tw / sw + 1e-5).rounded()) : ((sw * th / sh + 1e-5).rounded(), th)
                guard w <= Double(maxDimension), h <= Double(maxDimension) else { throw tooLarge(w, h) }
                box = PixelSize(width: max(1, Int(w)), height: max(1, Int(h)))
            } else {
                // Fits inside the box, never enlarged unless upscale(): the engine sizes it from
                // the original as trimmed and cropped.
                allowUpscale = upscale
                let scale = min(allowUpscale ? .infinity : 1, tw / sw, th / sh)
                guard sw * scale <= Double(maxDimension) + 0.5, sh * scale <= Double(maxDimension) + 0.5 else {
                    throw tooLarge(sw * scale, sh * scale)
                }
                // The box within the maximum: where the answer fits it, the same answer.
                box = PixelSize(width: Int(min(tw, Double(maxDimension))), height: Int(min(th, Double(maxDimension))))
            }
            guard box.width <= maxDimension, box.height <= maxDimension else { throw tooLarge(Double(box.width), Double(box.height)) }
        } else if proportional {
            mode = .fit
            switch (given(width, source.width), given(height, source.height)) {
            case (nil, nil):
                box = PixelSize(width: maxDimension, height: maxDimension)
                allowUpscale = false
            case (let w?, _): box = PixelSize(width: Int(w), height: maxDimension)
            case (nil, let h?): box = PixelSize(width: maxDimension, height: Int(h))
            }
        } else if stretch {
            mode = .fit
            box = PixelSize(width: Int(tw), height: Int(th))
        } else {
            if !focal.isEmpty {
                let weight = focal.reduce(0) { $0 + $1.weight }
                let x = (focal.reduce(0) { $0 + $1.x * $1.weight } / weight).rounded(.down)
                let y = (focal.reduce(0) { $0 + $1.y * $1.weight } / weight).rounded(.down)
                gravity = .focalPoint(x: Int((100 * x / sw).rounded()), y: Int((100 * y / sh).rounded()))
            } else if url.smart, operations.isEmpty {
                gravity = .smart
            } else {
                gravity = Self.gravity(url.halign, url.valign)
            }
        }
        // proportion(): the result scaled by the share (whole pixels, truncated), where at least
        // one pixel remains.
        let noSides = given(width, source.width) == nil && given(height, source.height) == nil
        for filter in filters {
            if case .proportion(let share) = filter, share > 0, share <= 1 {
                let base = noSides && mode == .fit ? source : box
                let (w, h) = (Double(base.width) * share, Double(base.height) * share)
                if w >= 1, h >= 1 { box = PixelSize(width: Int(w), height: Int(h)) }
            }
        }
        resized = box
        request = ImageRequest(
            key: CacheKey(key, colour: colour, gravity: gravity, operations: operations), box: box, mode: mode, exactSize: true,
            allowUpscale: allowUpscale)
        if stretch, !url.fitIn { steps.append(.stretch(PixelSize(width: Int(tw), height: Int(th)))) }
        if url.horizontalFlip { steps.append(.flipHorizontally) }
        if url.verticalFlip { steps.append(.flipVertically) }
        for filter in filters {
            switch filter {
            case .brightness, .contrast, .rgb, .saturation, .grayscale, .roundCorner, .backgroundColor, .blur, .sharpen, .rotate,
                .fill, .watermark:
                steps.append(.filter(filter))
            default: break
            }
        }
        // fill()'s box: each side the URL gives (after fit-in, at least the resized image's), or
        // the image's own.
        let (givenWidth, givenHeight) = (given(width, source.width).map(whole) ?? 0, given(height, source.height).map(whole) ?? 0)
        let (fillWidth, fillHeight) =
            url.fitIn && url.adaptive && whole(tw) == givenHeight && whole(th) == givenWidth && tw != th
            ? (givenHeight, givenWidth) : (givenWidth, givenHeight)
        fillBox = (
            fillWidth == 0 ? 0 : url.fitIn ? max(fillWidth, box.width) : fillWidth,
            fillHeight == 0 ? 0 : url.fitIn ? max(fillHeight, box.height) : fillHeight
        )
        // The wavelet sharpen holds four float planes of the image (16 bytes a pixel).
        if steps.contains(where: { if case .filter(.sharpen) = $0 { true } else { false } }), box.pixelCount > Self.sharpenPixels {
            throw ServiceError(
                .badRequest, "bad_filter",
                "filters:sharpen(): Strata sharpens answers of at most \(Self.sharpenPixels) pixels (this one is \(box.width)x\(box.height))"
            )
        }
        // A fill makes the answer the box: it too stays within the maximum.
        if steps.contains(where: { if case .filter(.fill) = $0 { true } else { false } }),
            fillBox.0 > maxDimension || fillBox.1 > maxDimension
        {
            throw tooLarge(Double(fillBox.0), Double(fillBox.1))
        }
        // The variant's own identity (gravity and operations, as `/images` writes them), then
        // what runs at the encode.
        var parts: [String] = []
        if gravity != .center { parts.append("gravity=\(gravity)") }
        if !operations.isEmpty { parts.append("ops=\(operations.canonical)") }
        parts.append("thumbor:" + steps.map { "\($0)" }.joined(separator: "/"))
        if let maxBytes { parts.append("max_bytes=\(maxBytes)") }
        derivation = parts.joined(separator: ";")
    }

    /// The largest answer `sharpen()` runs on (2048 × 2048).
    static let sharpenPixels = 4_194_304

    /// The box `fill()` fills: the request's sides (after `fit-in`, at least the resized image's).
    package var fillBox = (0, 0)

    /// The variant the engine serves for ``request``, known without asking it: the exact size
    /// the sizing of the cropped original gives (`nil` with a trim, whose box only the decode
    /// finds). A held variant resampled may come out a pixel off; its encoding is then found
    /// through the engine.
    package var predictedVariant: VariantDescriptor? {
        guard request.key.operations.trim == nil else { return nil }
        let size =
            request.mode == .fill
            ? request.box : SizingPlan(source: cropped, box: request.box, mode: .fit, allowUpscale: request.allowUpscale).output
        return VariantDescriptor(size: size, mode: request.mode, style: request.style)
    }

    /// thumbor's alignment as a gravity (its focal point at that edge or corner).
    static func gravity(_ h: ThumborURL.HorizontalAlignment, _ v: ThumborURL.VerticalAlignment) -> Gravity {
        switch (h, v) {
        case (.left, .top): .northwest
        case (.center, .top): .north
        case (.right, .top): .northeast
        case (.left, .middle): .west
        case (.center, .middle): .center
        case (.right, .middle): .east
        case (.left, .bottom): .southwest
        case (.center, .bottom): .south
        case (.right, .bottom): .southeast
        }
    }

    /// The answer's size once the steps ran on a variant of `size`.
    package func finalSize(from size: PixelSize) -> PixelSize {
        var size = size
        for step in steps {
            switch step {
            case .stretch(let target): size = target
            case .filter(.rotate(let degrees)) where degrees % 180 != 0: size = PixelSize(width: size.height, height: size.width)
            case .filter(.fill):
                size = PixelSize(width: fillBox.0 == 0 ? size.width : fillBox.0, height: fillBox.1 == 0 ? size.height : fillBox.1)
            default: break
            }
        }
        return size
    }

    /// Runs the steps on `image` (`marks`: the watermark images by key).
    package func apply(to image: PixelImage, marks: [String: PixelImage]) -> PixelImage {
        var image = ThumborPixels.premultiplied(image)
        for step in steps {
            switch step {
            case .flipHorizontally: image = image.mirrored()
            case .flipVertically: image = image.flippedVertically()
            case .stretch(let target):
                guard target != image.size else { continue }
                image = Resampler().resample(
                    image, region: SourceRect(x: 0, y: 0, width: Double(image.width), height: Double(image.height)), to: target)
            case .filter(let filter):
                image = Self.run(filter, on: image, fillBox: fillBox, marks: marks)
            }
        }
        return image
    }

    static func run(_ filter: ThumborFilter, on image: PixelImage, fillBox: (Int, Int), marks: [String: PixelImage]) -> PixelImage {
        switch filter {
        case .brightness(let value): return ThumborPixels.brightness(image, value)
        case .contrast(let value): return ThumborPixels.contrast(image, value)
        case .rgb(let r, let g, let b): return ThumborPixels.rgb(image, r, g, b)
        case .saturation(let change): return ThumborPixels.saturation(image, change)
        case .grayscale: return ThumborPixels.grayscale(image)
        case .roundCorner(let a, let b, let red, let green, let blue, let transparent):
            let colour = BackgroundColour(red: UInt8(min(255, red)), green: UInt8(min(255, green)), blue: UInt8(min(255, blue)))
            return ThumborPixels.roundCorners(image, a: a, b: b, colour: colour, transparent: transparent)
        case .backgroundColor(let colour):
            var opaque = colour
            opaque.alpha = 255
            return image.flattened(over: opaque.premultipliedBGRA)
        case .blur(let radius, let sigma):
            let spread = ThumborPixels.blurSigma(radius: radius, sigma: sigma)
            // At most /images' largest blur: past it the taps cost more than the blur shows.
            return spread > 0.1 ? image.blurred(sigma: min(spread, ImageOperations.blurRange.upperBound)) : image
        case .sharpen(let amount, let radius, let luminanceOnly):
            return ThumborPixels.waveletSharpened(
                image, amount: max(-100, min(amount, 100)), radius: max(-100, min(radius, 100)), luminanceOnly: luminanceOnly)
        case .rotate(let degrees):
            return image.rotated(clockwiseQuarterTurns: (4 - degrees / 90) % 4)
        case .fill(let fill, let transparentToo):
            let size = PixelSize(width: fillBox.0 == 0 ? image.width : fillBox.0, height: fillBox.1 == 0 ? image.height : fillBox.1)
            return ThumborPixels.filled(image, size: size, fill: fill, merge: transparentToo)
        case .watermark(let mark):
            guard let source = marks[mark.key] else { return image }
            return ThumborPixels.watermarked(image, mark: source, mark)
        default:
            return image
        }
    }
}
