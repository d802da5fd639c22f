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
///   R > G > B and a mid luma, weighted above the other two (faces and people).
/// The sum is blurred (two box passes) and the crop, which spans the whole image along one
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

    /// A grid of floats, row-major.
    struct Map {
        var width: Int
        var height: Int
        var values: [Float]

        init(width: Int, height: Int, values: [Float]? = nil) {
            self.width = width
            self.height = height
            self.values = values ?? [Float](repeating: 0, count: width * height)
        }

        subscript(x: Int, y: Int) -> Float {
            get { values[y * width + x] }
            set { values[y * width + x] = newValue }
        }

        /// The sum of each column (`alongColumns`) or of each row.
        func sums(alongColumns: Bool) -> [Float] {
            var out = [Float](repeating: 0, count: alongColumns ? width : height)
            for y in 0..<height {
                for x in 0..<width { out[alongColumns ? x : y] += values[y * width + x] }
            }
            return out
        }
    }

    /// The image reduced to fit ``mapSide``: three planes (B, G, R) of box averages.
    struct Reduced {
        var width: Int
        var height: Int
        var b: [Float], g: [Float], r: [Float]
    }

    static func reduced(_ image: PixelImage) -> Reduced {
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
    static let neutralChroma: Float = 32
    /// How much a skin-tone pixel weighs, against 255 for the strongest edge or colour.
    static let skinWeight: Float = 384

    /// Edges + saturation + skin, blurred.
    static func saliency(of image: Reduced) -> Map {
        let w = image.width, h = image.height
        var luma = [Float](repeating: 0, count: w * h)
        for i in 0..<(w * h) { luma[i] = 0.299 * image.r[i] + 0.587 * image.g[i] + 0.114 * image.b[i] }
        var map = Map(width: w, height: h)
        for y in 0..<h {
            for x in 0..<w {
                let i = y * w + x
                // Sobel, with the border clamped.
                let xm = max(0, x - 1), xp = min(w - 1, x + 1), ym = max(0, y - 1), yp = min(h - 1, y + 1)
                func l(_ x: Int, _ y: Int) -> Float { luma[y * w + x] }
                let gx = (l(xp, ym) + 2 * l(xp, y) + l(xp, yp)) - (l(xm, ym) + 2 * l(xm, y) + l(xm, yp))
                let gy = (l(xm, yp) + 2 * l(x, yp) + l(xp, yp)) - (l(xm, ym) + 2 * l(x, ym) + l(xp, ym))
                let edge = min(255, (abs(gx) + abs(gy)) / 4)
                let r = image.r[i], g = image.g[i], b = image.b[i]
                let chroma = max(r, g, b) - min(r, g, b)
                let saturation = max(0, chroma - neutralChroma) * (255 / (255 - neutralChroma))
                var skin: Float = 0
                let sum = r + g + b
                if sum > 0, r > g, g > b, luma[i] > 60, luma[i] < 240 {
                    let nr = r / sum, ng = g / sum
                    if nr > 0.36 && nr < 0.47 && ng > 0.28 && ng < 0.36 { skin = skinWeight }
                }
                map.values[i] = edge + saturation + skin
            }
        }
        let radius = max(1, max(w, h) / 64)
        for _ in 0..<2 { map = boxBlur(map, radius: radius) }
        return map
    }

    /// A separable box blur of `radius` (the border clamped).
    static func boxBlur(_ map: Map, radius: Int) -> Map {
        var horizontal = Map(width: map.width, height: map.height)
        let span = Float(2 * radius + 1)
        for y in 0..<map.height {
            for x in 0..<map.width {
                var s: Float = 0
                for dx in -radius...radius { s += map[min(map.width - 1, max(0, x + dx)), y] }
                horizontal[x, y] = s / span
            }
        }
        var out = Map(width: map.width, height: map.height)
        for y in 0..<map.height {
            for x in 0..<map.width {
                var s: Float = 0
                for dy in -radius...radius { s += horizontal[x, min(map.height - 1, max(0, y + dy))] }
                out[x, y] = s / span
            }
        }
        return out
    }

    /// The centre (0…1) of the window of `fraction` of `profile`'s length with the largest sum;
    /// the one nearer the middle on a tie.
    static func bestWindowCentre(_ profile: [Float], fraction: Double) -> Double {
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
