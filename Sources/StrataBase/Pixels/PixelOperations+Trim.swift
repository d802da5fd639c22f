/// Finding the box inside a uniform border (`trim=`), as libvips' `find_trim` finds it.
extension PixelImage {
    /// The smallest box holding every pixel that differs from the top-left pixel (the
    /// bottom-right one with `fromBottomRight`) by more than
    /// `threshold` (8-bit levels) in some channel (alpha included), after a 3×3 median of each
    /// channel (edges repeated), which keeps noise and JPEG ringing in the border from stopping
    /// the trim. The whole image when every pixel is border. 4-byte styles.
    ///
    /// The median is never computed: a channel's median is above `bg + t` exactly when at least
    /// five of its nine neighbours are, so each pixel is reduced to eight bits ("above", "below"
    /// per channel), spread into eight 4-bit counters, and the counters of the 3×3 neighbourhood
    /// summed with two adds a row; a counter of 5 or more is content. Cost: one pass, a few
    /// integer operations a pixel, three rows of scratch.
    public func trimBox(threshold: Int, fromBottomRight: Bool = false) -> (x: Int, y: Int, width: Int, height: Int) {
        precondition(style.bytesPerPixel == 4, "trimming works on 4-byte pixels")
        let (w, h, stride) = (width, height, bytesPerRow)
        // Each bit of a byte becomes a nibble: counts of up to 9 add without carrying.
        let spread: [UInt32] = (0..<256).map { m in
            var v: UInt32 = 0
            for bit in 0..<8 where m & (1 << bit) != 0 { v |= 1 << (4 * bit) }
            return v
        }
        var top = h, bottom = -1, left = w, right = -1
        withUnsafeBytes { raw in
            let base = raw.baseAddress!
            let corner = base.loadUnaligned(fromByteOffset: fromBottomRight ? (h - 1) * stride + 4 * (w - 1) : 0, as: SIMD4<UInt8>.self)
            let t = Int32(Swift.max(0, Swift.min(255, threshold)))
            let bg = SIMD4<Int32>(truncatingIfNeeded: corner)
            let upper = bg &+ t, lower = bg &- t
            // Spread masks of three rows (y − 1, y, y + 1, edges repeated), then their column sums.
            var rows = [[UInt32]](repeating: [UInt32](repeating: 0, count: w), count: 3)
            var columnSums = [UInt32](repeating: 0, count: w)
            func maskRow(_ y: Int, into out: inout [UInt32]) {
                let row = (base + y * stride).assumingMemoryBound(to: SIMD4<UInt8>.self)
                for x in 0..<w {
                    let p = SIMD4<Int32>(truncatingIfNeeded: row[x])
                    let above = p .> upper, below = p .< lower
                    var m = 0
                    for c in 0..<4 {
                        if above[c] { m |= 1 << c }
                        if below[c] { m |= 1 << (c + 4) }
                    }
                    out[x] = spread[m]
                }
            }
            maskRow(0, into: &rows[0])
            maskRow(0, into: &rows[1])
            maskRow(Swift.min(1, h - 1), into: &rows[2])
            for y in 0..<h {
                if y > 0 {
                    rows.swapAt(0, 1)
                    rows.swapAt(1, 2)
                    maskRow(Swift.min(y + 1, h - 1), into: &rows[2])
                }
                for x in 0..<w { columnSums[x] = rows[0][x] &+ rows[1][x] &+ rows[2][x] }
                var first = -1, last = -1
                for x in 0..<w {
                    let sum = columnSums[Swift.max(0, x - 1)] &+ columnSums[x] &+ columnSums[Swift.min(w - 1, x + 1)]
                    // A nibble of 5…9 plus 3 reaches 8…12: its top bit.
                    if (sum &+ 0x3333_3333) & 0x8888_8888 != 0 {
                        if first < 0 { first = x }
                        last = x
                    }
                }
                if first >= 0 {
                    top = Swift.min(top, y)
                    bottom = y
                    left = Swift.min(left, first)
                    right = Swift.max(right, last)
                }
            }
        }
        guard bottom >= 0 else { return (0, 0, w, h) }
        return (left, top, right - left + 1, bottom - top + 1)
    }
}
