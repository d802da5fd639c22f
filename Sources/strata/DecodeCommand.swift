import ArgumentParser
import Foundation
import Strata

/// `strata decode INPUT --size WxH [--mode fit|fill] [--style …] [--out PATH]`
struct DecodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode an image through the source tier and write PNG, WebP or JPEG.",
        discussion: """
            The output format follows the --out extension (.png, .webp, .jpg/.jpeg, .avif, .jxl). Prints the \
            output size. On bad input prints one line naming the file and the reason, exits with \
            status 1 (bad image) or 2 (cannot read or write a file), and writes no output file.
            """
    )

    @Argument(help: "The encoded image (JPEG, WebP, PNG, AVIF, HEIC, GIF, TIFF, JPEG 2000 or JPEG XL; detected from its bytes).")
    var input: String

    @Option(help: "The bounding box, WxH.", transform: { try PixelSize.parseOption($0) })
    var size: PixelSize

    @Option(help: "fit (inside the box, default) or fill (cover the box and centre-crop).")
    var mode: ContentMode = .fit

    @Option(help: "Pixel style of the rendered image: a (BGRA premultiplied), x (BGRx), r (RGB565), g (gray).")
    var style: PixelStyle = .default

    @Flag(help: "Enlarge images smaller than the box.")
    var upscale = false

    @Option(help: "Output file; its extension picks the format.")
    var out: String?

    @Option(help: "Encoder quality for JPEG and lossy WebP (1–100).")
    var quality: Int = 85

    @Option(help: "Refuse images with more pixels than this (width × height).")
    var maxPixels: Int = DecodingLimits().maxPixels

    func validate() throws {
        guard (1...100).contains(quality) else { throw ValidationError("--quality must be 1…100") }
        guard maxPixels > 0 else { throw ValidationError("--max-pixels must be positive") }
        if let out, OutputFormat(path: out) == nil {
            throw ValidationError("--out must end in .png, .webp, .jpg, .jpeg, .avif or .jxl")
        }
    }

    func run() throws {
        let bytes: [UInt8]
        do {
            bytes = try FileDescriptor(open: input, flags: O_RDONLY).readAll()
        } catch {
            fail("\(input): cannot read: \(error.reason)", code: 2)
        }
        let renderer = ImageRenderer(limits: DecodingLimits(maxPixels: maxPixels))
        let image: PixelImage
        do {
            image = try renderer.render(bytes, request: RenderRequest(box: size, mode: mode, style: style, allowUpscale: upscale))
        } catch {
            fail("\(input): \(error)", code: 1)
        }
        if let out, let format = OutputFormat(path: out) {
            do {
                let encoded = try ImageEncoder.encode(image, as: format.imageFormat, quality: quality)
                try writeAtomically(encoded, to: out)
            } catch let error as SystemCallError {
                fail("\(out): cannot write: \(error.reason)", code: 2)
            } catch {
                fail("\(out): \(error)", code: 1)
            }
        }
        print("\(image.width)x\(image.height)")
    }
}

/// Output formats the CLI writes, chosen by file extension.
enum OutputFormat {
    case png, webp, jpeg, avif, jxl

    init?(path: String) {
        switch (path as NSString).pathExtension.lowercased() {
        case "png": self = .png
        case "webp": self = .webp
        case "jpg", "jpeg": self = .jpeg
        case "avif": self = .avif
        case "jxl": self = .jxl
        default: return nil
        }
    }

    var imageFormat: ImageFormat {
        switch self {
        case .png: return .png
        case .webp: return .webp
        case .jpeg: return .jpeg
        case .avif: return .avif
        case .jxl: return .jxl
        }
    }
}

extension ContentMode: ExpressibleByArgument {
    public init?(argument: String) {
        switch argument.lowercased() {
        case "fit": self = .fit
        case "fill": self = .fill
        default: return nil
        }
    }
}

extension PixelStyle: ExpressibleByArgument {
    public init?(argument: String) {
        if argument.count == 1, let style = PixelStyle(code: argument.first!) {
            self = style
        } else if let style = PixelStyle.allCases.first(where: { $0.description == argument }) {
            self = style
        } else {
            return nil
        }
    }
}
