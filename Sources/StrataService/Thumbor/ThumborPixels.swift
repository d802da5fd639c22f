import Foundation
import Strata

/// thumbor's pixel filters, with its arithmetic (its C extensions work on 8-bit sRGB values with
/// straight alpha, truncating as C does), on Strata's premultiplied BGRA: each pixel is
/// un-premultiplied, changed, and premultiplied again. Cost: one pass over the pixels each.
package enum ThumborPixels {
    /// `image` as premultiplied BGRA (the style every filter here works on).
    static func premultiplied(_ image: PixelImage) -> PixelImage {
        image.style == .bgra32Premultiplied ? image : PixelConversion.convert(image, to: .bgra32Premultiplied)
    }

    /// Runs `body` on each pixel that is not wholly transparent (its four bytes, BGRA
    /// premultiplied), row by row.
    static func eachVisiblePixel(_ image: inout PixelImage, _ body: (UnsafeMutablePointer<UInt8>) -> Void) {
        let (w, h, stride) = (image.width, image.height, image.bytesPerRow)
        image.withUnsafeMutableBytes { raw in
            for y in 0..<h {
                let row = (raw.baseAddress! + y * stride).assumingMemoryBound(to: UInt8.self)
                for x in 0..<w where row[4 * x + 3] > 0 { body(row + 4 * x) }
            }
        }
    }

    /// Runs `change` on each pixel's straight (un-premultiplied) red, green and blue.
    static func mapColours(_ image: PixelImage, _ change: (inout Int, inout Int, inout Int) -> Void) -> PixelImage {
        var result = premultiplied(image)
        eachVisiblePixel(&result) { p in
            let alpha = Int(p[3])
            func straight(_ c: UInt8) -> Int { alpha == 255 ? Int(c) : min(255, (Int(c) * 255 + alpha / 2) / alpha) }
            var (r, g, b) = (straight(p[2]), straight(p[1]), straight(p[0]))
            change(&r, &g, &b)
            func stored(_ c: Int) -> UInt8 {
                let clamped = max(0, min(255, c))
                return alpha == 255 ? UInt8(clamped) : UInt8((clamped * alpha + 127) / 255)
            }
            (p[2], p[1], p[0]) = (stored(r), stored(g), stored(b))
        }
        return result
    }

    /// `brightness(N)`: adds 255·N/100 to each channel.
    static func brightness(_ image: PixelImage, _ value: Int) -> PixelImage {
        let delta = (255 * value.clampedPercent) / 100
        return mapColours(image) { r, g, b in
            r += delta
            g += delta
            b += delta
        }
    }

    /// `contrast(N)`: scales each channel's distance from 128 by ((N + 100)² / 100) / 100.
    static func contrast(_ image: PixelImage, _ value: Int) -> PixelImage {
        var factor = value.clampedPercent + 100
        factor = factor * factor / 100
        return mapColours(image) { r, g, b in
            r = factor * (r - 128) / 100 + 128
            g = factor * (g - 128) / 100 + 128
            b = factor * (b - 128) / 100 + 128
        }
    }

    /// `rgb(R, G, B)`: adds 255·R/100, 255·G/100 and 255·B/100.
    static func rgb(_ image: PixelImage, _ red: Int, _ green: Int, _ blue: Int) -> PixelImage {
        let (dr, dg, db) = ((255 * red.clampedPercent) / 100, (255 * green.clampedPercent) / 100, (255 * blue.clampedPercent) / 100)
        return mapColours(image) { r, g, b in
            r += dr
            g += dg
            b += db
        }
    }

    /// `saturation(C)`: each channel moved from the pixel's perceived brightness
    /// (√(.299 r² + .587 g² + .114 b²)) by the factor C.
    static func saturation(_ image: PixelImage, _ change: Double) -> PixelImage {
        let factor = Float(max(-1000, min(1000, change)))
        return mapColours(image) { r, g, b in
            let p = (Float(r * r) * 0.299 + Float(g * g) * 0.587 + Float(b * b) * 0.114).squareRoot()
            func moved(_ c: Int) -> Int { Int(max(-1, min(256, p + (Float(c) - p) * factor))) }
            (r, g, b) = (moved(r), moved(g), moved(b))
        }
    }

    /// `grayscale()`: Pillow's `convert("L")` luma, (19595 r + 38470 g + 7471 b + 2¹⁵) >> 16.
    static func grayscale(_ image: PixelImage) -> PixelImage {
        mapColours(image) { r, g, b in
            let luma = (r * 19595 + g * 38470 + b * 7471 + 0x8000) >> 16
            (r, g, b) = (luma, luma, luma)
        }
    }

    /// The mean colour of the image's straight pixels (thumbor's `fill(auto)`).
    static func meanColour(_ image: PixelImage) -> BackgroundColour {
        var sums = (0, 0, 0)
        _ = mapColours(image) { r, g, b in
            sums.0 += r
            sums.1 += g
            sums.2 += b
        }
        let count = max(1, image.width * image.height)
        return BackgroundColour(red: UInt8(sums.0 / count), green: UInt8(sums.1 / count), blue: UInt8(sums.2 / count))
    }

    /// `round_corner(A|B, R, G, B[, TRANSPARENT])`: each corner outside the ellipse of radii A
    /// and B painted with the colour (transparent: cleared), row by row as thumbor's loop does.
    static func roundCorners(_ image: PixelImage, a: Int, b: Int, colour: BackgroundColour, transparent: Bool) -> PixelImage {
        var result = premultiplied(image)
        let (width, height, stride) = (result.width, result.height, result.bytesPerRow)
        let aRadius = min(a, width / 2), bRadius = min(b, height / 2)
        guard aRadius > 0, bRadius > 0 else { return result }
        let (aRad, bRad) = (Float(aRadius), Float(bRadius))
        result.withUnsafeMutableBytes { raw in
            func paint(_ x: Int, _ y: Int) {
                guard (0..<width).contains(x), (0..<height).contains(y) else { return }
                let p = (raw.baseAddress! + y * stride + 4 * x).assumingMemoryBound(to: UInt8.self)
                if transparent {
                    (p[0], p[1], p[2], p[3]) = (0, 0, 0, 0)
                } else {
                    let alpha = Int(p[3])
                    func times(_ c: UInt8) -> UInt8 { UInt8((Int(c) * alpha + 127) / 255) }
                    (p[0], p[1], p[2]) = (times(colour.blue), times(colour.green), times(colour.red))
                }
            }
            var y = 0
            while Float(y) <= bRad {
                let x = -(aRad * (bRad * bRad - Float(y * y)).squareRoot()) / bRad
                let yTop = bRadius - y, yBottom = (height - bRadius) + y - 1
                let endX = Int(x + aRad)
                for column in 0..<max(0, endX) {
                    paint(column, yTop)
                    paint(column, yBottom)
                    if column > 0 {
                        paint(width - column, yTop)
                        paint(width - column, yBottom)
                    }
                }
                y += 1
            }
        }
        return result
    }

    /// The standard deviation of thumbor's blur kernel: a Gaussian of `sigma` cut at `radius`
    /// (at most 150) has this spread, which Strata's Gaussian then matches.
    static func blurSigma(radius: Int, sigma: Double) -> Double {
        let sigma = sigma == 0 ? Double(radius) : abs(sigma)
        let radius = min(radius, 150)
        guard sigma > 0 else { return 0 }
        var (weights, moments) = (0.0, 0.0)
        for x in -radius...radius {
            let weight = exp(-Double(x * x) / (2 * sigma * sigma))
            weights += weight
            moments += Double(x * x) * weight
        }
        return (moments / weights).squareRoot()
    }

    /// `image` centred on a canvas of `size` filled with `fill` (composited over it where the
    /// filter asks for it, else pasted with its own alpha, as thumbor's `paste(merge:)`).
    static func filled(_ image: PixelImage, size: PixelSize, fill: ThumborFilter.Fill, merge: Bool) -> PixelImage {
        let source = premultiplied(image)
        var canvas: PixelImage
        switch fill {
        case .transparent:
            canvas = PixelImage(width: size.width, height: size.height, style: .bgra32Premultiplied)
        case .colour(let colour):
            canvas = solid(size, colour)
        case .auto:
            canvas = solid(size, meanColour(source))
        case .blur:
            let stretched = Resampler().resample(
                source, region: SourceRect(x: 0, y: 0, width: Double(source.width), height: Double(source.height)), to: size)
            canvas = stretched.blurred(sigma: min(blurSigma(radius: 50, sigma: 0), Double(max(size.width, size.height))))
        }
        let x = (size.width - source.width) / 2, y = (size.height - source.height) / 2
        place(source, on: &canvas, x: x, y: y, over: merge)
        return canvas
    }

    /// A canvas of one colour.
    static func solid(_ size: PixelSize, _ colour: BackgroundColour) -> PixelImage {
        var canvas = PixelImage(uninitializedWidth: size.width, height: size.height, style: .bgra32Premultiplied)
        let pixel = colour.premultipliedBGRA
        let (w, h, stride) = (size.width, size.height, canvas.bytesPerRow)
        canvas.withUnsafeMutableBytes { raw in
            for y in 0..<h {
                let row = (raw.baseAddress! + y * stride).assumingMemoryBound(to: SIMD4<UInt8>.self)
                for x in 0..<w { row[x] = pixel }
            }
        }
        return canvas
    }

    /// Lays `source` on `canvas` at (x, y), clipped: `over` in sRGB values as thumbor's
    /// `_composite` does (premultiplied: d = s + d·(1 − αs)), else its pixels copied, alpha
    /// included (thumbor's `paste` without `merge`).
    static func place(_ source: PixelImage, on canvas: inout PixelImage, x: Int, y: Int, over: Bool) {
        let (cw, ch, cStride) = (canvas.width, canvas.height, canvas.bytesPerRow)
        source.withUnsafeBytes { from in
            canvas.withUnsafeMutableBytes { to in
                for row in 0..<source.height where (0..<ch).contains(y + row) {
                    let left = max(0, -x), right = min(source.width, cw - x)
                    guard left < right else { continue }
                    let src = (from.baseAddress! + row * source.bytesPerRow).assumingMemoryBound(to: SIMD4<UInt8>.self)
                    let dst = (to.baseAddress! + (y + row) * cStride).assumingMemoryBound(to: SIMD4<UInt8>.self)
                    guard over else {
                        (dst + x + left).update(from: src + left, count: right - left)
                        continue
                    }
                    for column in left..<right {
                        let s = SIMD4<UInt32>(truncatingIfNeeded: src[column])
                        guard s[3] > 0 else { continue }
                        if s[3] == 255 {
                            dst[x + column] = src[column]
                            continue
                        }
                        let d = SIMD4<UInt32>(truncatingIfNeeded: dst[x + column])
                        dst[x + column] = SIMD4<UInt8>(truncatingIfNeeded: s &+ (d &* (255 - s[3]) &+ 127) / 255)
                    }
                }
            }
        }
    }

    /// `watermark()`'s mark: its alpha lowered by 255·ALPHA/100, scaled to the ratios.
    static func watermarkMark(_ mark: PixelImage, on size: PixelSize, _ filter: ThumborFilter.Watermark) -> PixelImage {
        var image = premultiplied(mark)
        if filter.alpha > 0 {
            let delta = 255 * min(100, filter.alpha) / 100
            eachVisiblePixel(&image) { p in
                let alpha = Int(p[3])
                let lowered = max(0, alpha - delta)
                for c in 0..<3 { p[c] = UInt8((Int(p[c]) * lowered + alpha / 2) / alpha) }
                p[3] = UInt8(lowered)
            }
        }
        guard filter.widthRatio != nil || filter.heightRatio != nil else { return image }
        let (mw, mh) = (Double(image.width), Double(image.height))
        var maxWidth = filter.widthRatio.map { Double(size.width) * Double($0) / 100 }
        var maxHeight = filter.heightRatio.map { Double(size.height) * Double($0) / 100 }
        if maxWidth == nil, let maxHeight { maxWidth = mw * maxHeight / mh }
        if maxHeight == nil, let maxWidth { maxHeight = mh * maxWidth / mw }
        guard let maxWidth, let maxHeight, maxWidth > 0, maxHeight > 0 else { return image }
        let target: PixelSize
        if mw / maxWidth >= mh / maxHeight {
            target = PixelSize(width: max(1, Int(maxWidth.rounded())), height: max(1, Int((mh * maxWidth / mw).rounded())))
        } else {
            target = PixelSize(width: max(1, Int((mw * maxHeight / mh).rounded())), height: max(1, Int(maxHeight.rounded())))
        }
        guard target.width <= 8192, target.height <= 8192 else { return image }
        return Resampler().resample(image, region: SourceRect(x: 0, y: 0, width: mw, height: mh), to: target)
    }

    /// `image` with `mark` laid on it at thumbor's positions (pixels from the start or, negative,
    /// from the end; percentages of the side; centred; or repeated across the side).
    static func watermarked(_ image: PixelImage, mark source: PixelImage, _ filter: ThumborFilter.Watermark) -> PixelImage {
        let image = premultiplied(image)
        let mark = watermarkMark(source, on: image.size, filter)
        func origins(_ position: ThumborFilter.WatermarkPosition, side: Int, mark: Int) -> [Int] {
            switch position {
            case .center: return [(side - mark) / 2]
            // A position far outside the image lays nothing: bounded first, it cannot overflow.
            case .pixels(let value):
                let bounded = max(-100_000, min(100_000, value))
                return [bounded < 0 ? side - mark + bounded : bounded]
            case .percent(let value, let fromEnd):
                let offset = Int((Double(side) * Double(min(value, 10_000)) / 100 + 1e-5).rounded())
                return [fromEnd ? side - mark - offset : offset]
            case .repeated:
                var (count, space) = side.quotientAndRemainder(dividingBy: max(1, mark))
                if Double(side) / Double(max(1, mark)) < 2 {
                    count = Int((Double(side) / Double(max(1, mark))).rounded(.up))
                    space = 10
                }
                count = min(count, 100)
                let gap = space / (max(count, 2) - 1)
                return (0..<count).map { $0 * (gap + mark) }
            }
        }
        var xs = origins(filter.x, side: image.width, mark: mark.width)
        var ys = origins(filter.y, side: image.height, mark: mark.height)
        if case .repeated = filter.x, case .repeated = filter.y, xs.count * ys.count > 100 {
            // thumbor repeats at most 6 × 6 marks, spread over the image.
            let (cx, cy) = (min(6, xs.count), min(6, ys.count))
            let gapX = (image.width - cx * mark.width) / (max(cx, 2) - 1)
            let gapY = (image.height - cy * mark.height) / (max(cy, 2) - 1)
            xs = (0..<cx).map { $0 * (gapX + mark.width) }
            ys = (0..<cy).map { $0 * (gapY + mark.height) }
        }
        var result = image
        for y in ys {
            for x in xs { place(mark, on: &result, x: x, y: y, over: true) }
        }
        return result
    }
}

extension Int {
    /// thumbor's percentages, bounded so that its arithmetic cannot overflow (its own range is
    /// −100…100; larger values only saturate the channels).
    fileprivate var clampedPercent: Int { Swift.max(-10_000, Swift.min(10_000, self)) }
}
