import CGIF
import StrataBase

/// Every frame of an animated GIF (``AnimatedImage``): the records read once to count the frames
/// (their image data skipped, not decoded), then again to decode each frame onto the canvas with
/// its graphic control extension — delay, transparent index, disposal (keep, clear its rectangle,
/// restore the canvas as it was before it) — and the loop count of the NETSCAPE2.0 extension.
extension GIFCodec {
    /// Records read at most while counting frames (extensions and frames together).
    static let maxRecordsCounted = 1 << 20

    /// One frame's graphic control extension.
    struct Control {
        var delay = 0
        var disposal = 0
        var transparentIndex: Int?
    }

    /// Reads the next record's extension (the caller has read its type), keeping a graphic control
    /// extension in `control` and a NETSCAPE2.0 loop count in `loopCount`.
    private static func readExtension(_ reader: Reader, control: inout Control, loopCount: inout Int) throws(ImageDecodingError) {
        var code: Int32 = 0
        var block: UnsafeMutablePointer<GifByteType>?
        guard DGifGetExtension(reader.gif, &code, &block) == GIF_OK else { throw reader.failure(while: "reading an extension") }
        var application = false
        if code == GRAPHICS_EXT_FUNC_CODE, let block, block[0] >= 4 {
            control.disposal = Int(block[1] >> 2 & 7)
            control.delay = Int(block[2]) | Int(block[3]) << 8
            control.transparentIndex = block[1] & 1 != 0 ? Int(block[4]) : nil
        } else if code == APPLICATION_EXT_FUNC_CODE, let block, block[0] == 11 {
            application = (1...11).map { block[$0] }.elementsEqual("NETSCAPE2.0".utf8)
        }
        while block != nil {
            guard DGifGetExtensionNext(reader.gif, &block) == GIF_OK else { throw reader.failure(while: "reading an extension") }
            if application, let sub = block, sub[0] >= 3, sub[1] == 1 {
                loopCount = Int(sub[2]) | Int(sub[3]) << 8
                application = false
            }
        }
    }

    /// The animation's facts and the sum of its frames' own areas, without decoding a frame;
    /// the count stops one past `maxFrames` (a file of a million one-pixel frames is not read
    /// to its end to be refused).
    static func animationInfo(
        _ bytes: UnsafeRawBufferPointer, maxFrames: Int = .max
    ) throws(ImageDecodingError) -> (info: AnimationInfo, frameArea: Int) {
        let reader = try Reader(bytes)
        var control = Control(), loop = 1, frames = 0, area = 0
        for _ in 0..<maxRecordsCounted {
            var type = UNDEFINED_RECORD_TYPE
            guard DGifGetRecordType(reader.gif, &type) == GIF_OK else { throw reader.failure(while: "reading a record") }
            switch type {
            case IMAGE_DESC_RECORD_TYPE:
                guard DGifGetImageDesc(reader.gif) == GIF_OK else { throw reader.failure(while: "reading an image descriptor") }
                let d = reader.gif.pointee.Image
                frames += 1
                area = area &+ Int(d.Width) * Int(d.Height)
                if frames > maxFrames {
                    return (AnimationInfo(format: .gif, canvas: reader.screen, frameCount: frames, loopCount: loop), area)
                }
                var codeSize: Int32 = 0
                var block: UnsafeMutablePointer<GifByteType>?
                guard DGifGetCode(reader.gif, &codeSize, &block) == GIF_OK else { throw reader.failure(while: "skipping a frame") }
                while block != nil {
                    guard DGifGetCodeNext(reader.gif, &block) == GIF_OK else { throw reader.failure(while: "skipping a frame") }
                }
            case EXTENSION_RECORD_TYPE:
                try readExtension(reader, control: &control, loopCount: &loop)
            case TERMINATE_RECORD_TYPE:
                guard frames > 0 else { throw ImageDecodingError(.corrupt("the file ends before its first image"), format: .gif) }
                // NETSCAPE2.0 counts repeats after the first play (0: forever); without it, once.
                return (AnimationInfo(format: .gif, canvas: reader.screen, frameCount: frames, loopCount: loop == 0 ? 0 : loop), area)
            default:
                throw ImageDecodingError(.corrupt("unknown record type"), format: .gif)
            }
        }
        throw ImageDecodingError(.corrupt("more than \(maxRecordsCounted) records"), format: .gif)
    }

    /// Every frame of the GIF whose facts are `info` (checked against the limits by the caller).
    static func decodeAnimation(_ bytes: UnsafeRawBufferPointer, info: AnimationInfo) throws(ImageDecodingError) -> AnimatedImage {
        let reader = try Reader(bytes)
        let canvasSize = info.canvas
        guard !canvasSize.isEmpty else { throw ImageDecodingError(.corrupt("the logical screen is empty"), format: .gif) }
        var canvas = PixelImage(width: canvasSize.width, height: canvasSize.height, style: .bgra32Premultiplied)
        var frames: [AnimatedImage.Frame] = []
        frames.reserveCapacity(info.frameCount)
        var control = Control(), loop = 1
        while frames.count < info.frameCount {
            var type = UNDEFINED_RECORD_TYPE
            guard DGifGetRecordType(reader.gif, &type) == GIF_OK else { throw reader.failure(while: "reading a record") }
            switch type {
            case IMAGE_DESC_RECORD_TYPE:
                guard DGifGetImageDesc(reader.gif) == GIF_OK else { throw reader.failure(while: "reading an image descriptor") }
                let d = reader.gif.pointee.Image
                let frame = Frame(
                    left: Int(d.Left), top: Int(d.Top), width: Int(d.Width), height: Int(d.Height), interlaced: d.Interlace,
                    transparentIndex: control.transparentIndex, colours: d.ColorMap ?? reader.gif.pointee.SColorMap)
                let before = control.disposal == 3 ? canvas : nil
                try draw(frame, from: reader, onto: &canvas)
                frames.append(AnimatedImage.Frame(image: canvas, duration: control.delay * 10))
                switch control.disposal {
                case 2: clear(frame, in: &canvas)
                case 3: if let before { canvas = before }
                default: break
                }
                control = Control()
            case EXTENSION_RECORD_TYPE:
                try readExtension(reader, control: &control, loopCount: &loop)
            default:
                throw ImageDecodingError(.corrupt("the file ends after \(frames.count) of its \(info.frameCount) frames"), format: .gif)
            }
        }
        return AnimatedImage(canvas: canvasSize, frames: frames, loopCount: info.loopCount)
    }

    /// Decodes `frame`'s rows and draws its opaque pixels onto `canvas` (clipped to it).
    private static func draw(_ frame: Frame, from reader: Reader, onto canvas: inout PixelImage) throws(ImageDecodingError) {
        guard frame.width > 0, frame.height > 0 else { return }
        guard let colours = frame.colours else {
            throw ImageDecodingError(.corrupt("a frame has no colour table"), format: .gif)
        }
        let palette = self.palette(colours.pointee, transparent: frame.transparentIndex)
        let (size, stride) = (canvas.size, canvas.bytesPerRow)
        var line = [GifPixelType](repeating: 0, count: frame.width)
        let visible = max(0, min(frame.width, size.width - frame.left))
        let skipped = max(0, -frame.left)
        try canvas.withUnsafeMutableBytes { (raw: UnsafeMutableRawBufferPointer) throws(ImageDecodingError) in
            for row in 0..<frame.height {
                let y = frame.interlaced ? interlacedRow(row, height: frame.height) : row
                let read = line.withUnsafeMutableBufferPointer { DGifGetLine(reader.gif, $0.baseAddress, Int32(frame.width)) }
                guard read == GIF_OK else { throw reader.failure(while: "decoding a frame") }
                let screenY = frame.top + y
                guard screenY >= 0, screenY < size.height, skipped < visible else { continue }
                let out = (raw.baseAddress! + screenY * stride).assumingMemoryBound(to: UInt32.self) + frame.left
                for x in skipped..<visible {
                    let index = Int(line[x])
                    if index != frame.transparentIndex { out[x] = palette[index] }
                }
            }
        }
    }

    /// Clears `frame`'s rectangle of `canvas` to transparent (disposal 2, as browsers do).
    private static func clear(_ frame: Frame, in canvas: inout PixelImage) {
        let (size, stride) = (canvas.size, canvas.bytesPerRow)
        let x0 = max(0, frame.left), x1 = min(size.width, frame.left + frame.width)
        let y0 = max(0, frame.top), y1 = min(size.height, frame.top + frame.height)
        guard x0 < x1, y0 < y1 else { return }
        canvas.withUnsafeMutableBytes { raw in
            for y in y0..<y1 {
                (raw.baseAddress! + y * stride + 4 * x0).initializeMemory(as: UInt8.self, repeating: 0, count: 4 * (x1 - x0))
            }
        }
    }
}
