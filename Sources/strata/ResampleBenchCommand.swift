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
        print("source \(jpeg): \(decoder.size); medians of \(iterations) runs; ratio = (decode + resample) / decode")
        print("thumbnail  DCT  decoded     decode ms  resample ms  ratio  PSNR vs Pillow (dB)")
        let resampler = Resampler()
        for side in [256, 1024] {
            let target = SizingPlan(source: decoder.size, box: PixelSize(width: side, height: side), mode: .fit).output
            // Every DCT scale whose output is at least the thumbnail, smallest first.
            let scales = [8, 4, 2, 1].filter {
                (decoder.size.width + $0 - 1) / $0 >= target.width && (decoder.size.height + $0 - 1) / $0 >= target.height
            }
            for denominator in scales {
                let scaled = PixelSize(width: (decoder.size.width + denominator - 1) / denominator,
                                       height: (decoder.size.height + denominator - 1) / denominator)
                // The anchor decodes into one reused buffer: no allocation or page faults in it.
                var decoded = try decoder.decode(scaledTo: scaled)
                let runs = denominator == 1 ? max(3, iterations / 3) : iterations
                let decodeTime = Self.median(runs) { try! decoder.decode(into: &decoded) }
                let region = SourceRect(x: 0, y: 0, width: Double(scaled.width), height: Double(scaled.height))
                var thumb = PixelImage(uninitializedWidth: target.width, height: target.height)
                let resampleTime = Self.median(runs) { resampler.resample(decoded, region: region, into: &thumb) }
                let psnr = try quality(thumb).map { String(format: "%.2f", $0) } ?? "-"
                print(String(format: "%-9@  1/%d  %-10@ %9.2f  %11.2f  %5.2f  %@", "\(target)", denominator, "\(scaled)",
                             decodeTime, resampleTime, (decodeTime + resampleTime) / decodeTime, psnr))
                if let dump { try Self.write(thumb, to: "\(dump)/strata-dct\(denominator)-\(target).bgra") }
            }
        }
        print("PSNR: whole 256 px thumbnail; for 1024 px the committed centre window (the whole image: --dump, then Scripts/quality/reference.py psnr).")
    }

    /// PSNR against the committed reference: the whole 256 px thumbnail, or the committed
    /// centre window of the 1024 px one.
    private func quality(_ image: PixelImage) throws -> Double? {
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

    func decode(scaledTo target: PixelSize) throws -> PixelImage {
        var image = PixelImage(uninitializedWidth: target.width, height: target.height, style: .bgra32Premultiplied)
        try decode(into: &image)
        return image
    }

    /// Decodes at the DCT scale that gives `image`'s size, into its rows.
    func decode(into image: inout PixelImage) throws {
        let target = image.size
        let pitch = image.bytesPerRow
        let rc = image.withUnsafeMutableBytes { raw in
            bytes.withUnsafeBufferPointer {
                tjDecompress2(handle, $0.baseAddress, UInt(bytes.count),
                              raw.baseAddress!.assumingMemoryBound(to: UInt8.self),
                              Int32(target.width), Int32(pitch), Int32(target.height), Int32(TJPF_BGRA.rawValue), 0)
            }
        }
        guard rc == 0 else { throw Failure(description: "tjDecompress2: " + String(cString: tjGetErrorStr2(handle))) }
    }
}
