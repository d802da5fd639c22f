import Strata

/// Images with a known subject, for the smart crop's tests (the engine's, the service's).
package enum SubjectScenes {
    /// A scene of `size` with a saturated orange disc of `radius` centred at (`cx`, `cy`) on
    /// neutral gray noise in a checker of two contrasts.
    package static func disc(_ size: PixelSize, cx: Int, cy: Int, radius: Int, seed: UInt64 = 7) -> PixelImage {
        var image = PixelImage(width: size.width, height: size.height)
        var state = seed
        func next() -> UInt8 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt8(truncatingIfNeeded: state >> 57) + 80  // 80…207
        }
        let stride = image.bytesPerRow
        image.withUnsafeMutableBytes { raw in
            for y in 0..<size.height {
                for x in 0..<size.width {
                    let p = y * stride + 4 * x
                    let dx = x - cx, dy = y - cy
                    if dx * dx + dy * dy <= radius * radius {
                        raw[p] = 40
                        raw[p + 1] = 140
                        raw[p + 2] = 250  // orange (BGR)
                    } else {
                        let v = (x / 3 + y / 3) % 2 == 0 ? next() : next() / 2 + 60
                        raw[p] = v
                        raw[p + 1] = v
                        raw[p + 2] = v
                    }
                    raw[p + 3] = 255
                }
            }
        }
        return image
    }
}
