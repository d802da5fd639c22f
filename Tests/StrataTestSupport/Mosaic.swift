import Strata

/// Big test originals made from a fixture photo: `size` pixels of it repeated side by side and
/// row after row, so that they compress like a photo (a deep-zoom pyramid's input).
package enum Mosaic {
    /// A baseline JPEG (quality 80) of `size`. Cost: `size` × 4 bytes of memory while it encodes.
    package static func jpeg(_ size: PixelSize) throws -> [UInt8] {
        let photo = try ImageDecoder().decode(Fixtures.bytes("jpeg/path-2560x1600.jpg"))
        var image = PixelImage(uninitializedWidth: size.width, height: size.height)
        let stride = image.bytesPerRow
        photo.withUnsafeBytes { source in
            image.withUnsafeMutableBytes { destination in
                for y in 0..<size.height {
                    let from = source.baseAddress! + (y % photo.height) * photo.bytesPerRow
                    var x = 0
                    while x < size.width {
                        let n = min(photo.width, size.width - x)
                        (destination.baseAddress! + y * stride + x * 4).copyMemory(from: from, byteCount: n * 4)
                        x += n
                    }
                }
            }
        }
        return try ImageEncoder.encode(image, as: .jpeg, quality: 80)
    }
}
