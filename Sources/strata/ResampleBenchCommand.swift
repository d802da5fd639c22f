import ArgumentParser
import CTurboJPEG
import Foundation
import Strata

/// `strata bench resample`: the resampler's speed against the bare libjpeg-turbo decode it
/// follows in the source tier, and its quality against Pillow's Lanczos references.
struct ResampleBenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resample",
        abstract: "Resampler speed (vs. the bare DCT-scaled JPEG decode) and quality (PSNR vs. Pillow).",
        discussion: """
        Decodes the JPEG with libjpeg-turbo (tjDecompress2, BGRA) at full size and at the DCT \
        scale the source tier would pick (the smallest ≥ 2× the thumbnail), then times Lanczos-3 \
        resampling to the thumbnail sizes. Reports medians and the ratio (decode + resample) / \
        decode. With Fixtures/reference present, also reports PSNR against Pillow's Lanczos of \
        the full decode (Scripts/quality/reference.py).
        """)

    @Option(help: "The JPEG to decode (a 2048+ px photo).")
    var jpeg = "Fixtures/jpeg/path-2560x1600.jpg"

    @Option(help: "Directory of the Pillow references (Scripts/quality/reference.py write).")
    var references = "Fixtures/reference"

    @Option(help: "Timed repetitions per case (the median is reported).")
    var iterations = 30

    @Option(help: "Write the thumbnails as raw BGRA (tightly packed) into this directory, for `reference.py psnr`.")
    var dump: String?

    func run() throws {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: jpeg)))
        let decoder = try BareDecoder(bytes)
        let full = try decoder.decode(scaledTo: decoder.size)
        print("source \(jpeg): \(decoder.size), \(iterations) iterations, medians")
        let resampler = Resampler()
        let fullRegion = SourceRect(x: 0, y: 0, width: Double(full.width), height: Double(full.height))

        for side in [256, 1024] {
            let plan = SizingPlan(source: decoder.size, box: PixelSize(width: side, height: side), mode: .fit)
            let target = plan.output
            let scaled = decoder.scaledSize(atLeast: PixelSize(width: target.width * 2, height: target.height * 2))
            var small = try decoder.decode(scaledTo: scaled)
            let decodeTime = Self.median(iterations) { small = try! decoder.decode(scaledTo: scaled) }
            let smallRegion = SourceRect(x: 0, y: 0, width: Double(small.width), height: Double(small.height))
            var thumb = PixelImage(uninitializedWidth: target.width, height: target.height)
            let resampleTime = Self.median(iterations) { resampler.resample(small, region: smallRegion, into: &thumb) }
            var direct = PixelImage(uninitializedWidth: target.width, height: target.height)
            let directTime = Self.median(max(3, iterations / 5)) { resampler.resample(full, region: fullRegion, into: &direct) }
            print(String(format: "%4d px: decode 1/%d → %@ %7.2f ms; resample → %@ %6.2f ms; ratio %.3f",
                         side, decoder.size.width / scaled.width, "\(scaled)", decodeTime, "\(target)",
                         resampleTime, (decodeTime + resampleTime) / decodeTime))
            print(String(format: "         full %@ → %@ resample %7.2f ms", "\(decoder.size)", "\(target)", directTime))
            if let psnr = try quality(thumb, side: side) {
                let full = try quality(direct, side: side) ?? .nan
                print(String(format: "         PSNR vs Pillow: DCT-scaled pipeline %.2f dB, full decode → Lanczos %.2f dB", psnr, full))
            }
            if let dump {
                try Self.write(thumb, to: "\(dump)/strata-dct-\(target).bgra")
                try Self.write(direct, to: "\(dump)/strata-full-\(target).bgra")
            }
        }
    }

    /// PSNR against the committed reference: the whole 256 px thumbnail, or the committed
    /// centre window of the 1024 px one.
    private func quality(_ image: PixelImage, side: Int) throws -> Double? {
        let fm = FileManager.default
        guard let names = try? fm.contentsOfDirectory(atPath: references) else { return nil }
        let prefix = "path-lanczos-\(image.width)x\(image.height)"
        guard jpeg.hasSuffix("path-2560x1600.jpg"), let name = names.sorted().first(where: { $0.hasPrefix(prefix) }) else { return nil }
        let rgb = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(references)/\(name)")))
        // "…-crop-X-Y-WxH.rgb" names a window; otherwise the whole image.
        var x0 = 0, y0 = 0, w = image.width, h = image.height
        if let range = name.range(of: "-crop-") {
            let parts = name[range.upperBound...].dropLast(4).split(separator: "-")
            guard parts.count == 3, let x = Int(parts[0]), let y = Int(parts[1]),
                  let size = PixelSize(parsing: parts[2]) else { return nil }
            (x0, y0, w, h) = (x, y, size.width, size.height)
        }
        guard rgb.count == w * h * 3 else { return nil }
        var reference = PixelImage(width: w, height: h, style: .bgrx32)
        var window = PixelImage(width: w, height: h, style: .bgrx32)
        let refStride = reference.bytesPerRow
        reference.withUnsafeMutableBytes { raw in
            for y in 0..<h {
                for x in 0..<w {
                    let s = (y * w + x) * 3, d = y * refStride + x * 4
                    raw[d] = rgb[s + 2]; raw[d + 1] = rgb[s + 1]; raw[d + 2] = rgb[s]; raw[d + 3] = 255
                }
            }
        }
        let winStride = window.bytesPerRow
        image.withUnsafeBytes { src in
            window.withUnsafeMutableBytes { dst in
                for y in 0..<h {
                    for i in 0..<(w * 4) { dst[y * winStride + i] = src[(y + y0) * image.bytesPerRow + x0 * 4 + i] }
                }
            }
        }
        return window.peakSignalToNoiseRatio(against: reference)
    }

    private static func write(_ image: PixelImage, to path: String) throws {
        var packed = [UInt8]()
        packed.reserveCapacity(image.width * image.height * 4)
        image.withUnsafeBytes { raw in
            for y in 0..<image.height { packed += raw[(y * image.bytesPerRow)..<(y * image.bytesPerRow + image.width * 4)] }
        }
        try Data(packed).write(to: URL(fileURLWithPath: path))
    }

    /// Median wall time of `count` runs of `body`, in milliseconds (one untimed warm-up run).
    private static func median(_ count: Int, _ body: () -> Void) -> Double {
        body()
        var times = [Double]()
        let clock = ContinuousClock()
        for _ in 0..<max(1, count) {
            let d = clock.measure(body)
            times.append(Double(d.components.seconds) * 1e3 + Double(d.components.attoseconds) * 1e-15)
        }
        times.sort()
        return times[times.count / 2]
    }
}

/// libjpeg-turbo with nothing around it: the anchor the resampler's cost is compared with.
private final class BareDecoder {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let handle: tjhandle
    private let bytes: [UInt8]
    let size: PixelSize

    init(_ bytes: [UInt8]) throws {
        guard let handle = tjInitDecompress() else { throw Failure(description: "tjInitDecompress failed") }
        self.handle = handle
        self.bytes = bytes
        var w: Int32 = 0, h: Int32 = 0, subsampling: Int32 = 0, colorspace: Int32 = 0
        let rc = bytes.withUnsafeBufferPointer {
            tjDecompressHeader3(handle, $0.baseAddress, UInt(bytes.count), &w, &h, &subsampling, &colorspace)
        }
        guard rc == 0 else {
            tjDestroy(handle)
            throw Failure(description: "not a JPEG libjpeg-turbo can read: " + String(cString: tjGetErrorStr2(nil)))
        }
        size = PixelSize(width: Int(w), height: Int(h))
    }

    deinit { tjDestroy(handle) }

    /// The smallest DCT-scaled size (1/8 … 1) at least `minimum` on both sides.
    func scaledSize(atLeast minimum: PixelSize) -> PixelSize {
        for denominator in [8, 4, 2] {
            let w = (size.width + denominator - 1) / denominator, h = (size.height + denominator - 1) / denominator
            if w >= minimum.width && h >= minimum.height { return PixelSize(width: w, height: h) }
        }
        return size
    }

    func decode(scaledTo target: PixelSize) throws -> PixelImage {
        var image = PixelImage(uninitializedWidth: target.width, height: target.height, style: .bgra32Premultiplied)
        let pitch = image.bytesPerRow
        let rc = image.withUnsafeMutableBytes { raw in
            bytes.withUnsafeBufferPointer {
                tjDecompress2(handle, $0.baseAddress, UInt(bytes.count),
                              raw.baseAddress!.assumingMemoryBound(to: UInt8.self),
                              Int32(target.width), Int32(pitch), Int32(target.height), Int32(TJPF_BGRA.rawValue), 0)
            }
        }
        guard rc == 0 else { throw Failure(description: "tjDecompress2: " + String(cString: tjGetErrorStr2(handle))) }
        return image
    }
}
