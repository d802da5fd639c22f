import CGIF
import StrataBase

/// GIF out, through giflib: each frame quantised to 255 colours by giflib's median cut
/// (`GifQuantizeBuffer`, no dithering; each colour then the mean of its pixels at 8 bits) with
/// index 255 for transparency (alpha below half), one
/// local colour table a frame, each frame the whole canvas drawn on a cleared one (disposal 2),
/// its delay in hundredths of a second, and a NETSCAPE2.0 loop count.
extension GIFCodec {
    /// Where `EGifOpen` writes.
    private final class Output {
        var bytes: [UInt8] = []
    }

    /// giflib's output function: appends to the ``Output`` in `UserData`.
    private static let write: OutputFunc = { gif, buffer, length in
        guard let gif, let buffer, length > 0, let user = gif.pointee.UserData else { return 0 }
        let output = Unmanaged<Output>.fromOpaque(user).takeUnretainedValue()
        output.bytes.append(contentsOf: UnsafeBufferPointer(start: buffer, count: Int(length)))
        return length
    }

    /// `animation` as an animated GIF (a single frame makes a still one).
    static func encode(_ animation: AnimatedImage) throws(ImageEncodingError) -> [UInt8] {
        let canvas = animation.canvas
        guard canvas.width <= 65535, canvas.height <= 65535 else {
            throw ImageEncodingError(.tooLarge(canvas, maximumSide: 65535), format: .gif)
        }
        func failed(_ code: Int32, _ action: String) -> ImageEncodingError {
            let text = GifErrorString(code).map { String(cString: $0) } ?? "giflib error \(code)"
            return ImageEncodingError(.encoderFailed("giflib: \(text) while \(action)"), format: .gif)
        }
        let output = Output()
        var code: Int32 = 0
        guard let gif = EGifOpen(Unmanaged.passUnretained(output).toOpaque(), write, &code) else { throw failed(code, "opening") }
        var closed = false
        defer { if !closed { EGifCloseFile(gif, nil) } }
        EGifSetGifVersion(gif, true)
        guard EGifPutScreenDesc(gif, Int32(canvas.width), Int32(canvas.height), 8, 0, nil) == GIF_OK else {
            throw failed(gif.pointee.Error, "writing the screen")
        }
        if animation.frames.count > 1 {
            var loop = [UInt8(1), UInt8(truncatingIfNeeded: animation.loopCount), UInt8(truncatingIfNeeded: animation.loopCount >> 8)]
            var name = Array("NETSCAPE2.0".utf8)
            let ok =
                EGifPutExtensionLeader(gif, APPLICATION_EXT_FUNC_CODE) == GIF_OK
                && EGifPutExtensionBlock(gif, 11, &name) == GIF_OK && EGifPutExtensionBlock(gif, 3, &loop) == GIF_OK
                && EGifPutExtensionTrailer(gif) == GIF_OK
            guard ok else { throw failed(gif.pointee.Error, "writing the loop count") }
        }
        let count = canvas.width * canvas.height
        var red = [UInt8](repeating: 0, count: count), green = red, blue = red, indices = red
        var opaque = [Bool](repeating: true, count: count)
        for (number, frame) in animation.frames.enumerated() {
            guard frame.image.size == canvas else {
                throw ImageEncodingError(
                    .encoderFailed("frame \(number + 1) is \(frame.image.size), not the canvas' \(canvas)"), format: .gif)
            }
            // Straight colour planes; alpha below half is transparent.
            var transparent = false
            let (pixels, _) = PixelOps.straightBGRA(frame.image)
            for i in 0..<count {
                blue[i] = pixels[4 * i]
                green[i] = pixels[4 * i + 1]
                red[i] = pixels[4 * i + 2]
                opaque[i] = pixels[4 * i + 3] >= 128
                if !opaque[i] { transparent = true }
            }
            var colours = [GifColorType](repeating: GifColorType(), count: 256)
            var size: Int32 = 255
            guard GifQuantizeBuffer(UInt32(canvas.width), UInt32(canvas.height), &size, &red, &green, &blue, &indices, &colours) == GIF_OK
            else {
                throw ImageEncodingError(.encoderFailed("giflib could not quantise frame \(number + 1)"), format: .gif)
            }
            // giflib's boxes are cut at 5 bits a channel, and so are its colours: each entry
            // becomes the exact mean of the 8-bit pixels given its index (a flat colour stays
            // exact, a gradient loses no more than its box).
            var sums = [SIMD4<Int>](repeating: .zero, count: 256)
            for i in 0..<count where opaque[i] {
                sums[Int(indices[i])] &+= SIMD4(Int(red[i]), Int(green[i]), Int(blue[i]), 1)
            }
            for index in 0..<256 where sums[index][3] > 0 {
                let n = sums[index][3]
                colours[index] = GifColorType(
                    Red: UInt8((sums[index][0] + n / 2) / n), Green: UInt8((sums[index][1] + n / 2) / n),
                    Blue: UInt8((sums[index][2] + n / 2) / n))
            }
            if transparent { for i in 0..<count where !opaque[i] { indices[i] = 255 } }
            let delay = max(0, min(65535, (frame.duration + 5) / 10))
            var control: [UInt8] = [
                UInt8(2 << 2) | (transparent ? 1 : 0), UInt8(delay & 0xFF), UInt8(delay >> 8), transparent ? 255 : 0,
            ]
            guard let map = GifMakeMapObject(256, &colours) else {
                throw ImageEncodingError(.encoderFailed("giflib could not make a colour table"), format: .gif)
            }
            defer { GifFreeMapObject(map) }
            guard EGifPutExtension(gif, GRAPHICS_EXT_FUNC_CODE, 4, &control) == GIF_OK,
                EGifPutImageDesc(gif, 0, 0, Int32(canvas.width), Int32(canvas.height), false, map) == GIF_OK
            else { throw failed(gif.pointee.Error, "writing frame \(number + 1)") }
            let written = indices.withUnsafeMutableBufferPointer { p -> Bool in
                for y in 0..<canvas.height where EGifPutLine(gif, p.baseAddress! + y * canvas.width, Int32(canvas.width)) != GIF_OK {
                    return false
                }
                return true
            }
            guard written else { throw failed(gif.pointee.Error, "writing frame \(number + 1)'s pixels") }
        }
        closed = true
        guard EGifCloseFile(gif, &code) == GIF_OK else { throw failed(code, "closing") }
        return output.bytes
    }
}

extension AnimatedImage {
    /// The animation as an animated GIF: 255 colours a frame (giflib's median cut), alpha below
    /// half transparent, delays rounded to hundredths of a second, the loop count kept.
    public func encodedAsGIF() throws(ImageEncodingError) -> [UInt8] { try GIFCodec.encode(self) }
}
