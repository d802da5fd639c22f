/// Chooses where a `fill` crop goes by what draws the eye (``Gravity/smart``), in the manner of
/// libvips' `interesting=attention`: a saliency map at a small scale, and the crop window that
/// holds most of it.
///
/// The map is built from three cues, each from the image reduced to at most ``mapSide`` pixels
/// a side (box averages of up to 4×4 samples per map pixel):
/// - **edges**: the Sobel gradient magnitude of the luma (detail, outlines, text);
/// - **saturation**: chroma (max − min of R, G, B) above a neutral threshold (coloured objects
///   on dull backgrounds);
/// - **skin tones**: pixels whose normalised r and g fall in the skin-tone range with
///   R > G > B and a mid luma, weighted above the other two (faces and people) — less as they
///   cover more of the image, and not at all past a quarter of it (then they are a colour:
///   autumn leaves, sand, a warm cast).
/// Each cue counts where it exceeds its own mean over the image (a cue present everywhere
/// decides nothing); their sum is blurred (two box passes) and the crop, which spans the whole image along one
/// axis, slides along the other: the window with the largest sum wins (the one nearer the
/// centre on a tie), and its centre is the focus.
///
/// Cost: one pass over at most 16 samples per map pixel, a few passes over the map (≤ 192×192),
/// and one running sum — well under the decode it follows. Pure; thread-safe.
public enum Saliency {
    /// The longest side of the saliency map.
    public static let mapSide = 192

    /// The focus (0…1 each way) of the most salient crop of `image` whose width and height are
    /// `cropWidth` and `cropHeight` of the image's (each 0…1; one of them is 1 for a `fill`).
    public static func focus(of image: PixelImage, cropWidth: Double, cropHeight: Double) -> CropFocus {
        let source =
            image.style == .bgra32Premultiplied || image.style == .bgrx32 ? image : PixelConversion.convert(image, to: .bgra32Premultiplied)
        let small = reduced(source)
        guard small.width > 2, small.height > 2 else { return .center }
        let map = saliency(of: small)
        if cropWidth < 1 {
            let column = map.sums(alongColumns: true)
            return CropFocus(x: bestWindowCentre(column, fraction: cropWidth), y: 0.5)
        }
        if cropHeight < 1 {
            let row = map.sums(alongColumns: false)
            return CropFocus(x: 0.5, y: bestWindowCentre(row, fraction: cropHeight))
        }
        return .center
    }

    /// The focus of the most salient `fill` crop of `image` for `box` (the crop's share of each
    /// side as a `fill` of `box` plans it): for a small variant standing in for its original,
    /// whose aspect it shares.
    public static func focus(of image: PixelImage, forFillOf box: PixelSize) -> CropFocus {
        let plan = SizingPlan(source: image.size, box: box, mode: .fill, allowUpscale: true)
        return focus(
            of: image, cropWidth: plan.sourceRect.width / Double(image.width),
            cropHeight: plan.sourceRect.height / Double(image.height))
    }

    /// A grid of floats, row-major.
    package struct Map {
        package var width: Int
        package var height: Int
        package var values: [Float]

        package init(width: Int, height: Int, values: [Float]? = nil) {
            self.width = width
            self.height = height
            self.values = values ?? [Float](repeating: 0, count: width * height)
        }

        /// The sum of each column (`alongColumns`) or of each row.
        package func sums(alongColumns: Bool) -> [Float] {
            var out = [Float](repeating: 0, count: alongColumns ? width : height)
            for y in 0..<height {
                for x in 0..<width { out[alongColumns ? x : y] += values[y * width + x] }
            }
            return out
        }
    }

    /// The image reduced to fit ``mapSide``: three planes (B, G, R) of box averages.
    package struct Reduced {
        package var width: Int
        package var height: Int
        package var b: [Float], g: [Float], r: [Float]
    }

    package static func reduced(_ image: PixelImage) -> Reduced {
        let scale = min(1, Double(mapSide) / Double(max(image.width, image.height)))
        let w = max(1, Int((Double(image.width) * scale).rounded()))
        let h = max(1, Int((Double(image.height) * scale).rounded()))
        var out = Reduced(
            width: w, height: h, b: [Float](repeating: 0, count: w * h), g: [Float](repeating: 0, count: w * h),
            r: [Float](repeating: 0, count: w * h))
        image.withUnsafeBytes { raw in
            let base = raw.baseAddress!.assumingMemoryBound(to: UInt8.self)
            let stride = image.bytesPerRow
            for my in 0..<h {
                let y0 = my * image.height / h, y1 = max(y0 + 1, (my + 1) * image.height / h)
                let ystep = max(1, (y1 - y0) / 4)
                for mx in 0..<w {
                    let x0 = mx * image.width / w, x1 = max(x0 + 1, (mx + 1) * image.width / w)
                    let xstep = max(1, (x1 - x0) / 4)
                    var sb = 0, sg = 0, sr = 0, n = 0
                    var y = y0
                    while y < y1 {
                        let row = base + y * stride
                        var x = x0
                        while x < x1 {
                            sb += Int(row[4 * x])
                            sg += Int(row[4 * x + 1])
                            sr += Int(row[4 * x + 2])
                            n += 1
                            x += xstep
                        }
                        y += ystep
                    }
                    let i = my * w + mx, scale = 1 / Float(n)
                    out.b[i] = Float(sb) * scale
                    out.g[i] = Float(sg) * scale
                    out.r[i] = Float(sr) * scale
                }
            }
        }
        return out
    }

    /// Chroma below this (of 255) counts as neutral.
    package static let neutralChroma: Float = 32
    /// How much a skin-tone pixel weighs, against 255 for the strongest edge or colour.
    package static let skinWeight: Float = 384

    /// Edges + saturation + skin, blurred.
    package static func saliency(of image: Reduced) -> Map {
        let w = image.width, h = image.height
        var luma = [Float](repeating: 0, count: w * h)
        for i in 0..<(w * h) { luma[i] = 0.299 * image.r[i] + 0.587 * image.g[i] + 0.114 * image.b[i] }
        let n = w * h
        // Three planes: edges, saturation, skin.
        var cues = [Float](repeating: 0, count: 3 * n)
        luma.withUnsafeBufferPointer { l in
            image.r.withUnsafeBufferPointer { rs in
                image.g.withUnsafeBufferPointer { gs in
                    image.b.withUnsafeBufferPointer { bs in
                        cues.withUnsafeMutableBufferPointer { out in
                            for y in 0..<h {
                                // Rows above and below, the border clamped.
                                let up = max(0, y - 1) * w, row = y * w, down = min(h - 1, y + 1) * w
                                for x in 0..<w {
                                    let xm = max(0, x - 1), xp = min(w - 1, x + 1)
                                    let gx = (l[up + xp] + 2 * l[row + xp] + l[down + xp]) - (l[up + xm] + 2 * l[row + xm] + l[down + xm])
                                    let gy = (l[down + xm] + 2 * l[down + x] + l[down + xp]) - (l[up + xm] + 2 * l[up + x] + l[up + xp])
                                    let edge = min(255, (abs(gx) + abs(gy)) / 4)
                                    let i = row + x
                                    let r = rs[i], g = gs[i], b = bs[i]
                                    let chroma = max(r, g, b) - min(r, g, b)
                                    let saturation = max(0, chroma - neutralChroma) * (255 / (255 - neutralChroma))
                                    var skin: Float = 0
                                    let sum = r + g + b
                                    if sum > 0, r > g, g > b, l[i] > 60, l[i] < 240 {
                                        let nr = r / sum, ng = g / sum
                                        if nr > 0.36 && nr < 0.47 && ng > 0.28 && ng < 0.36 { skin = skinWeight }
                                    }
                                    out[i] = edge
                                    out[n + i] = saturation
                                    out[2 * n + i] = skin
                                }
                            }
                        }
                    }
                }
            }
        }
        // What stands out: each cue above its own mean over the image, so that a cue present
        // everywhere (texture, an all-orange autumn scene, a warm cast that reads as skin)
        // decides nothing and the rarer, stronger parts decide.
        var map = Map(width: w, height: h)
        cues.withUnsafeBufferPointer { c in
            map.values.withUnsafeMutableBufferPointer { out in
                var means: [Float] = [0, 0, 0]
                for cue in 0..<3 {
                    var sum: Float = 0
                    for i in 0..<n { sum += c[cue * n + i] }
                    means[cue] = sum / Float(n)
                }
                // Skin tones over a large share of the image are a colour (autumn leaves, sand,
                // a warm cast), not people: their weight falls to nothing at a quarter.
                let skinShare = means[2] / skinWeight
                let skinScale = max(0, 1 - skinShare / 0.25)
                for i in 0..<n {
                    out[i] = max(0, c[i] - means[0]) + max(0, c[n + i] - means[1]) + c[2 * n + i] * skinScale
                }
            }
        }
        let radius = max(1, max(w, h) / 64)
        for _ in 0..<2 { boxBlur(&map, radius: radius) }
        return map
    }

    /// A separable box blur of `radius` in place (the border clamped): a running sum along each
    /// row, then along each column.
    package static func boxBlur(_ map: inout Map, radius: Int) {
        let w = map.width, h = map.height
        let scale = 1 / Float(2 * radius + 1)
        var line = [Float](repeating: 0, count: max(w, h))
        map.values.withUnsafeMutableBufferPointer { v in
            line.withUnsafeMutableBufferPointer { line in
                // Rows: the sum of the `2r + 1` values around x, indices clamped.
                for y in 0..<h {
                    let row = y * w
                    for x in 0..<w { line[x] = v[row + x] }
                    var sum: Float = 0
                    for dx in -radius...radius { sum += line[min(w - 1, max(0, dx))] }
                    for x in 0..<w {
                        v[row + x] = sum * scale
                        sum += line[min(w - 1, x + radius + 1)] - line[max(0, x - radius)]
                    }
                }
                for x in 0..<w {
                    for y in 0..<h { line[y] = v[y * w + x] }
                    var sum: Float = 0
                    for dy in -radius...radius { sum += line[min(h - 1, max(0, dy))] }
                    for y in 0..<h {
                        v[y * w + x] = sum * scale
                        sum += line[min(h - 1, y + radius + 1)] - line[max(0, y - radius)]
                    }
                }
            }
        }
    }

    /// The centre (0…1) of the window of `fraction` of `profile`'s length with the largest sum;
    /// the one nearer the middle on a tie.
    package static func bestWindowCentre(_ profile: [Float], fraction: Double) -> Double {
        let n = profile.count
        let window = min(n, max(1, Int((Double(n) * fraction).rounded())))
        guard window < n else { return 0.5 }
        var sum: Float = profile[0..<window].reduce(0, +)
        var best = sum, bestStart = 0
        let middle = Double(n - window) / 2
        for start in 1...(n - window) {
            sum += profile[start + window - 1] - profile[start - 1]
            // Ties within float noise go to the window nearer the middle.
            let tolerance = max(abs(best), 1) * 1e-5
            if sum > best + tolerance || (abs(sum - best) <= tolerance && abs(Double(start) - middle) < abs(Double(bestStart) - middle)) {
                best = sum
                bestStart = start
            }
        }
        return (Double(bestStart) + Double(window) / 2) / Double(n)
    }
}
