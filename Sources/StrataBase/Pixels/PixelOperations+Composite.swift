/// Compositing an overlay (a watermark) onto an image, in linear light.
extension PixelImage {
    /// `overlay` (premultiplied BGRA, sRGB) laid over this image with its top-left corner at
    /// (`x`, `y`) (parts outside are clipped), its alpha times `opacity` (0…1): Porter–Duff
    /// *over* on linear-light colour, then encoded back to sRGB — an edge of a white logo over
    /// black keeps its weight instead of darkening as an sRGB blend does. Only the overlay's
    /// rectangle is touched. 4-byte styles. Cost: the overlay's pixels, three table lookups
    /// each way per pixel.
    public func composited(_ overlay: PixelImage, x: Int, y: Int, opacity: Double = 1) -> PixelImage {
        var result = self
        result.composite(overlay, x: x, y: y, opacity: opacity)
        return result
    }

    /// ``composited(_:x:y:opacity:)`` in place (a copy first only when the pixels are shared).
    public mutating func composite(_ overlay: PixelImage, x: Int, y: Int, opacity: Double = 1) {
        precondition(style.bytesPerPixel == 4 && overlay.style.bytesPerPixel == 4, "compositing works on 4-byte pixels")
        let x0 = Swift.max(0, x), y0 = Swift.max(0, y)
        let x1 = Swift.min(width, x + overlay.width), y1 = Swift.min(height, y + overlay.height)
        guard x0 < x1, y0 < y1, opacity > 0 else { return }
        let tables = LabTables.shared
        let (stride, overStride) = (bytesPerRow, overlay.bytesPerRow)
        let premultiplied = style == .bgra32Premultiplied
        let strength = Float(Swift.min(1, opacity))
        overlay.withUnsafeBytes { over in
            withUnsafeMutableBytes { raw in
                for row in y0..<y1 {
                    let dst = (raw.baseAddress! + row * stride).assumingMemoryBound(to: SIMD4<UInt8>.self)
                    let src = (over.baseAddress! + (row - y) * overStride).assumingMemoryBound(to: SIMD4<UInt8>.self)
                    for column in x0..<x1 {
                        let o = src[column - x]
                        guard o[3] != 0 else { continue }
                        let d = dst[column]
                        let ao = Float(o[3]) / 255 * strength
                        let ad = premultiplied ? Float(d[3]) / 255 : 1
                        let (or, og, ob) = tables.linear(o, premultiplied: true)
                        let (dr, dg, db) = tables.linear(d, premultiplied: premultiplied)
                        let a = ao + ad * (1 - ao)
                        let k = ad * (1 - ao)
                        func blend(_ co: Float, _ cd: Float) -> Float { (co * ao + cd * k) / a }
                        var out = SIMD4<Float>(
                            LabTables.interpolate(tables.fromLinear, blend(ob, db)),
                            LabTables.interpolate(tables.fromLinear, blend(og, dg)),
                            LabTables.interpolate(tables.fromLinear, blend(or, dr)), 255)
                        if premultiplied { out = out * a }
                        out[3] = premultiplied ? a * 255 : 255
                        dst[column] = SIMD4<UInt8>(
                            out.rounded(.toNearestOrAwayFromZero).clamped(lowerBound: .zero, upperBound: SIMD4(repeating: 255)))
                    }
                }
            }
        }
    }
}
