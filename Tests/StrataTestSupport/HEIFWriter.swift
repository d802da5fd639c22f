import CHeif
import Strata

/// Writes HEIC files with libheif's encoder (x265), for the tests that need what `heif-enc`
/// cannot write: `irot`/`imir` transformations (libheif's `image_orientation`, EXIF-numbered).
package enum HEIFWriter {
    package struct Failure: Error, CustomStringConvertible {
        package var description: String
    }

    /// `image`'s pixels (opaque; the alpha is dropped) stored as they are, with the transformation
    /// that EXIF `orientation` names, at `quality` (`nil`: lossless, 4:4:4).
    package static func encode(_ image: PixelImage, orientation: Int, quality: Int? = 95) throws -> [UInt8] {
        _ = heif_init(nil)
        defer { heif_deinit() }
        guard let context = heif_context_alloc() else { throw Failure(description: "heif_context_alloc") }
        defer { heif_context_free(context) }
        var picture: OpaquePointer?
        try check(heif_image_create(Int32(image.width), Int32(image.height), heif_colorspace_RGB, heif_chroma_interleaved_RGB, &picture))
        guard let picture else { throw Failure(description: "heif_image_create") }
        defer { heif_image_release(picture) }
        try check(heif_image_add_plane(picture, heif_channel_interleaved, Int32(image.width), Int32(image.height), 8))
        var stride: Int32 = 0
        guard let plane = heif_image_get_plane(picture, heif_channel_interleaved, &stride) else {
            throw Failure(description: "heif_image_get_plane")
        }
        image.withUnsafeBytes { raw in
            for y in 0..<image.height {
                for x in 0..<image.width {
                    let s = y * image.bytesPerRow + 4 * x, d = y * Int(stride) + 3 * x
                    plane[d] = raw[s + 2]
                    plane[d + 1] = raw[s + 1]
                    plane[d + 2] = raw[s]
                }
            }
        }
        var encoder: OpaquePointer?
        try check(heif_context_get_encoder_for_format(context, heif_compression_HEVC, &encoder))
        guard let encoder else { throw Failure(description: "no HEVC encoder") }
        defer { heif_encoder_release(encoder) }
        if let quality {
            try check(heif_encoder_set_lossy_quality(encoder, Int32(quality)))
        } else {
            try check(heif_encoder_set_lossless(encoder, 1))
        }
        try check(heif_encoder_set_parameter_string(encoder, "chroma", "444"))
        guard let options = heif_encoding_options_alloc() else { throw Failure(description: "options") }
        defer { heif_encoding_options_free(options) }
        options.pointee.image_orientation = heif_orientation(rawValue: UInt32(orientation))
        try check(heif_context_encode_image(context, picture, encoder, options, nil))
        final class Sink { var bytes: [UInt8] = [] }
        let sink = Sink()
        var writer = heif_writer()
        writer.writer_api_version = 1
        writer.write = { _, data, size, user in
            let sink = Unmanaged<Sink>.fromOpaque(user!).takeUnretainedValue()
            sink.bytes += UnsafeRawBufferPointer(start: data, count: size)
            return heif_error(code: heif_error_Ok, subcode: heif_suberror_Unspecified, message: nil)
        }
        try check(heif_context_write(context, &writer, Unmanaged.passUnretained(sink).toOpaque()))
        return sink.bytes
    }

    private static func check(_ error: heif_error) throws {
        guard error.code == heif_error_Ok else {
            throw Failure(description: error.message.map { String(cString: $0) } ?? "libheif error \(error.code.rawValue)")
        }
    }
}
