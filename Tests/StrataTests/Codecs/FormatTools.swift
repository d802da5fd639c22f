import Foundation
import Testing
@testable import Strata
import StrataTestSupport

/// AVIF, HEIC, GIF and JPEG XL files made at test time by the Debian tools (``ExternalTools``) in a
/// temporary directory, and the tools' own decodes as references (written as PNG, read by
/// Strata's PNG decoder).
final class FormatTools {
    let directory = TempDirectory()
    private var counter = 0

    /// A fresh path in the directory ending in `.suffix`.
    func path(_ suffix: String) -> String {
        counter += 1
        return "\(directory.path)/f\(counter).\(suffix)"
    }

    func write(_ bytes: [UInt8], suffix: String) -> String {
        let file = path(suffix)
        _ = FileManager.default.createFile(atPath: file, contents: Data(bytes))
        return file
    }

    func read(_ file: String) throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: file) else {
            throw ExternalTools.Failure(description: "no file at \(file)")
        }
        return [UInt8](data)
    }

    /// `image` as a PNG file (straight alpha when it has any).
    func png(_ image: PixelImage) throws -> String {
        write(try ImageEncoder.encode(image, as: .png), suffix: "png")
    }

    /// `avifenc arguments input` (speed 8 unless `arguments` say otherwise).
    func avifenc(_ input: String, _ arguments: [String] = []) throws -> [UInt8] {
        let output = path("avif")
        try ExternalTools.run("avifenc", ["-s", "8"] + arguments + [input, output])
        return try read(output)
    }

    /// `avifenc` of several inputs: an image sequence (animated AVIF).
    func avifSequence(_ inputs: [String]) throws -> [UInt8] {
        let output = path("avif")
        try ExternalTools.run("avifenc", ["-s", "8", "--min", "0", "--max", "10"] + inputs + [output])
        return try read(output)
    }

    /// avifdec's 8-bit decode (no orientation, straight alpha) read back premultiplied.
    func avifdec(_ avif: [UInt8]) throws -> PixelImage {
        let output = path("png")
        try ExternalTools.run("avifdec", ["-d", "8", write(avif, suffix: "avif"), output])
        return try ImageDecoder().decode(read(output))
    }

    /// `cjxl input output arguments` (libjxl-tools; effort 3 unless `arguments` say otherwise).
    func cjxl(_ input: String, _ arguments: [String] = []) throws -> [UInt8] {
        let output = path("jxl")
        try ExternalTools.run("cjxl", [input, output, "-e", "3"] + arguments)
        return try read(output)
    }

    /// djxl's 8-bit decode (orientation applied, straight alpha, no colour conversion) read back
    /// premultiplied.
    func djxl(_ jxl: [UInt8]) throws -> PixelImage {
        let output = path("png")
        try ExternalTools.run("djxl", [write(jxl, suffix: "jxl"), output, "--bits_per_sample=8"])
        return try ImageDecoder().decode(read(output))
    }

    /// `heif-enc arguments input` (quality 90 unless `arguments` say otherwise).
    func heifenc(_ input: String, _ arguments: [String] = ["-q", "90"]) throws -> [UInt8] {
        let output = path("heic")
        try ExternalTools.run("heif-enc", arguments + ["-o", output, input])
        return try read(output)
    }

    /// heif-convert's decode of the primary image (transformations applied) read back
    /// premultiplied.
    func heifConvert(_ heic: [UInt8]) throws -> PixelImage {
        let output = path("png")
        try ExternalTools.run("heif-convert", [write(heic, suffix: "heic"), output])
        return try ImageDecoder().decode(read(output))
    }

    /// `gifsicle arguments` over `gif` (standard input to standard output).
    func gifsicle(_ gif: [UInt8], _ arguments: [String]) throws -> [UInt8] {
        try ExternalTools.run("gifsicle", arguments, stdin: gif)
    }

    /// `gifsicle arguments inputs…` (several GIFs: frames of one animation).
    func gifsicle(merging gifs: [[UInt8]], _ arguments: [String] = []) throws -> [UInt8] {
        try ExternalTools.run("gifsicle", arguments + gifs.map { write($0, suffix: "gif") })
    }
}

/// PSNR of the colour channels of two premultiplied images (``ColourFixtures/psnr(_:_:)``).
func psnr(_ a: PixelImage, _ b: PixelImage) -> Double { ColourFixtures.psnr(a, b) }

/// The stored (un-oriented) pixels of a JPEG fixture: libjpeg-turbo's decode without EXIF.
func storedPixels(_ fixture: String) throws -> PixelImage {
    let bytes = Fixtures.bytes(fixture)
    let decoder = ImageDecoder()
    let header = try decoder.readHeader(bytes)
    var image = PixelImage(width: header.codedSize.width, height: header.codedSize.height)
    try bytes.withUnsafeBytes { raw in try decoder.decodeBare(raw, into: &image) }
    return image
}

/// `bytes` with the 8 bytes after the first `ispe` box's version and flags (its width and
/// height, big-endian) set to `width` × `height`: a file whose container claims that size.
func withISPE(_ bytes: [UInt8], width: UInt32, height: UInt32) throws -> [UInt8] {
    let tag = Array("ispe".utf8)
    guard let at = (0..<(bytes.count - 16)).first(where: { Array(bytes[$0..<($0 + 4)]) == tag }) else {
        throw ExternalTools.Failure(description: "no ispe box")
    }
    var out = bytes
    out.replaceSubrange((at + 8)..<(at + 16), with: ColourFixtures.be32(width) + ColourFixtures.be32(height))
    return out
}
