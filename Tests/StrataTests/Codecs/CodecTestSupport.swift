import Testing
@testable import Strata
import StrataTestSupport

/// Pixel comparisons for codec tests.
enum PixelDiff {
    /// Mean and maximum absolute difference over the B, G, R (and A) bytes of two BGRA images
    /// of the same size.
    static func compare(_ a: PixelImage, _ b: PixelImage, includeAlpha: Bool = true) -> (mean: Double, max: Int) {
        precondition(a.size == b.size && a.style == .bgra32Premultiplied && b.style == .bgra32Premultiplied)
        var total = 0, maximum = 0, count = 0
        let channels = includeAlpha ? 4 : 3
        a.withUnsafeBytes { pa in
            b.withUnsafeBytes { pb in
                for y in 0..<a.height {
                    for x in 0..<a.width {
                        for c in 0..<channels {
                            let d = abs(Int(pa[y * a.bytesPerRow + 4 * x + c]) - Int(pb[y * b.bytesPerRow + 4 * x + c]))
                            total += d
                            maximum = max(maximum, d)
                            count += 1
                        }
                    }
                }
            }
        }
        return (Double(total) / Double(max(count, 1)), maximum)
    }

    static func meanDifference(_ a: PixelImage, _ b: PixelImage) -> Double { compare(a, b).mean }

    /// Pixels of a premultiplied BGRA image with a colour byte above their alpha (0 when the
    /// image is premultiplied as it must be).
    static func channelsAboveAlpha(_ image: PixelImage) -> Int {
        var count = 0
        image.withUnsafeBytes { raw in
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let o = y * image.bytesPerRow + 4 * x
                    if raw[o] > raw[o + 3] || raw[o + 1] > raw[o + 3] || raw[o + 2] > raw[o + 3] { count += 1 }
                }
            }
        }
        return count
    }
}

/// Decodes a fixture with a fresh decoder (test convenience).
func decodeFixture(_ path: String, minimumSize: PixelSize? = nil, limits: DecodingLimits = .init()) throws -> PixelImage {
    try ImageDecoder(limits: limits).decode(Fixtures.bytes(path), minimumSize: minimumSize)
}

func headerOfFixture(_ path: String, limits: DecodingLimits = .init()) throws -> ImageHeader {
    try ImageDecoder(limits: limits).readHeader(Fixtures.bytes(path))
}

/// The error a throwing decode produced, or `nil` when it succeeded.
func decodingError(_ body: () throws -> Void) -> ImageDecodingError? {
    do {
        try body()
        return nil
    } catch let error as ImageDecodingError {
        return error
    } catch {
        Issue.record("unexpected error type: \(error)")
        return nil
    }
}
