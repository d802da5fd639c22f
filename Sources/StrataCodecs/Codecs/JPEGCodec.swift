import CTurboJPEG
import StrataBase

/// A libjpeg-turbo scaling factor `numerator / denominator` (DCT scaling on decode).
public struct JPEGScalingFactor: Sendable, Hashable, CustomStringConvertible {
    public var numerator: Int
    public var denominator: Int

    public init(_ numerator: Int, _ denominator: Int) {
        precondition(numerator > 0 && denominator > 0)
        self.numerator = numerator
        self.denominator = denominator
    }

    public static let one = JPEGScalingFactor(1, 1)

    /// `ceil(side × numerator / denominator)`, as libjpeg-turbo computes it (TJSCALED).
    @inlinable
    public func scaled(_ side: Int) -> Int { (side * numerator + denominator - 1) / denominator }

    public func scaled(_ size: PixelSize) -> PixelSize {
        PixelSize(width: scaled(size.width), height: scaled(size.height))
    }

    public var value: Double { Double(numerator) / Double(denominator) }
    public var description: String { "\(numerator)/\(denominator)" }

    /// libjpeg-turbo's factors ≤ 1, largest first (1/1, 15/16? … 1/8).
    public static let reducing: [JPEGScalingFactor] = {
        var count: Int32 = 0
        guard let table = tjGetScalingFactors(&count), count > 0 else { return [.one] }
        var factors: [JPEGScalingFactor] = []
        for i in 0..<Int(count) where table[i].num > 0 && table[i].num <= table[i].denom {
            factors.append(JPEGScalingFactor(Int(table[i].num), Int(table[i].denom)))
        }
        return factors.sorted { $0.value > $1.value }
    }()

    /// The power-of-two factors 1, 1/2, 1/4, 1/8 (the ones with SIMD IDCTs in libjpeg-turbo).
    public static let powersOfTwo: [JPEGScalingFactor] = [.init(1, 1), .init(1, 2), .init(1, 4), .init(1, 8)]
}

/// Owns a TurboJPEG decompressor handle (freed in deinit). Not thread-safe: one per decoder.
///
/// After a failed call the handle is replaced: libjpeg-turbo 2.1 leaves a decompressor that
/// aborted inside `jpeg_read_header` in a state where the next good image fails too
/// ("invalid dimensions 0x0"), and one bad input must not break the following ones.
package final class TurboJPEGDecompressor {
    private var handle: tjhandle

    package init() {
        guard let h = tjInitDecompress() else { fatalError("tjInitDecompress failed: out of memory") }
        handle = h
    }

    deinit { tjDestroy(handle) }

    package struct Header {
        package var size: PixelSize
        package var subsampling: Int32
        package var colorspace: Int32
    }

    package func readHeader(_ bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> Header {
        var w: Int32 = 0, h: Int32 = 0, subsamp: Int32 = 0, cs: Int32 = 0
        let rc = tjDecompressHeader3(
            handle, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self),
            UInt(bytes.count), &w, &h, &subsamp, &cs)
        if rc != 0 { throw error() }
        return Header(size: PixelSize(width: Int(w), height: Int(h)), subsampling: subsamp, colorspace: cs)
    }

    /// tjDecompress2 into `destination` (rows `pitch` bytes apart) at `scaledSize`. Warnings
    /// (truncated or corrupt data) are errors.
    package func decompress(
        _ bytes: UnsafeRawBufferPointer, scaledSize: PixelSize, pixelFormat: TJPF,
        into destination: UnsafeMutableRawPointer, pitch: Int
    ) throws(ImageDecodingError) {
        let flags = TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS
        let rc = tjDecompress2(
            handle, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), UInt(bytes.count),
            destination.assumingMemoryBound(to: UInt8.self), Int32(scaledSize.width),
            Int32(pitch), Int32(scaledSize.height), pixelFormat.rawValue, Int32(flags))
        if rc != 0 { throw error() }
    }

    private func error() -> ImageDecodingError {
        let message = tjGetErrorStr2(handle).map { String(cString: $0) } ?? "unknown libjpeg-turbo error"
        if let fresh = tjInitDecompress() {
            tjDestroy(handle)
            handle = fresh
        }
        return Self.error(message: message)
    }

    /// The typed error for a libjpeg-turbo message (TurboJPEG's, or libjpeg's own).
    package static func error(message: String) -> ImageDecodingError {
        let lower = message.lowercased()
        // "missing SOS": the data ended (libjpeg-turbo's source inserts an EOI) before any scan.
        if lower.contains("premature end") || lower.contains("ran out of data") || lower.contains("truncated")
            || lower.contains("missing sos")
        {
            return ImageDecodingError(.truncated, format: .jpeg)
        }
        if lower.contains("unsupported") || lower.contains("not supported") {
            return ImageDecodingError(.unsupported(message), format: .jpeg)
        }
        return ImageDecodingError(.corrupt(message), format: .jpeg)
    }
}

/// Owns a TurboJPEG compressor handle (freed in deinit).
package final class TurboJPEGCompressor {
    private let handle: tjhandle

    package init() {
        guard let h = tjInitCompress() else { fatalError("tjInitCompress failed: out of memory") }
        handle = h
    }

    deinit { tjDestroy(handle) }

    /// `progressive` writes libjpeg's default progressive scan script (tests use it).
    package func compress(
        _ pixels: UnsafeRawPointer, size: PixelSize, pitch: Int, pixelFormat: TJPF, subsampling: TJSAMP, quality: Int,
        progressive: Bool = false
    ) throws(ImageEncodingError) -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        var outSize: UInt = 0
        let rc = tjCompress2(
            handle, pixels.assumingMemoryBound(to: UInt8.self), Int32(size.width), Int32(pitch),
            Int32(size.height), pixelFormat.rawValue, &out, &outSize,
            Int32(subsampling.rawValue), Int32(quality), progressive ? TJFLAG_PROGRESSIVE : 0)
        defer { if let out { tjFree(out) } }
        guard rc == 0, let out else {
            let message = tjGetErrorStr2(handle).map { String(cString: $0) } ?? "unknown libjpeg-turbo error"
            throw ImageEncodingError(.encoderFailed(message), format: .jpeg)
        }
        return Array(UnsafeBufferPointer(start: out, count: Int(outSize)))
    }
}
