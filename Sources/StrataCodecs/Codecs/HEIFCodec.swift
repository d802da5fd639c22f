import CHeif
import CStrataHEIF
import StrataBase

/// libheif calls (libde265 decodes HEVC): the primary image's header and its decode, or the
/// decode of one of its embedded thumbnails, to premultiplied BGRA. Stateless; every libheif
/// object is released before returning.
///
/// - **Threads**: HEVC is decoded by Strata's libheif plugin (`CStrataHEIF`), libde265 with
///   ``defaultHEVCThreads`` worker threads per decode, registered above libheif's own plugin.
///
/// - **Orientation**: libheif applies `irot`, `imir` and `clap` itself when it decodes, so the
///   sizes here are the displayed ones and ``ImageHeader/orientation`` is 1 (an `Exif`
///   orientation in a HEIF is ignored, as the format says).
/// - **Depth**: 10- and 12-bit images are reduced to 8 bits by libheif (`convert_hdr_to_8bit`).
/// - **Alpha**: straight alpha is premultiplied here; an already premultiplied one is kept.
/// - **Colour**: the `colr` ICC profile (`prof`/`rICC`) when there is one, else the `nclx`
///   code points (``CICPColour``). Every image comes out as RGB (a monochrome one too), so
///   the colour step treats it as RGB.
/// - **Thumbnails** (shrink-on-load): ``Features/thumbnails`` lists the embedded thumbnails
///   that may stand in for the primary image — same alpha, same colour, the same aspect to
///   within a pixel — and ``decode(_:size:maxPixels:into:stride:)`` decodes the one of the
///   size asked for. A thumbnail is only as good as its writer made it: phones filter theirs,
///   libheif 1.15's `heif-enc -t` point-samples (its 256 px thumbnail of a 1024 px photo is
///   about 22 dB from a Lanczos reduction of the primary image, in the tests).
/// - **Limits**: the caller checks the primary image's size against ``DecodingLimits`` before
///   any decode. libheif's own limit is per side, checked on each `ispe` when the file is read
///   (set to the pixel limit, at most 2¹⁶) and on a grid's or overlay's canvas when it is
///   decoded (set then to the decoded item's longer side, so a canvas larger than its `ispe` is
///   refused). A canvas as long as the longer side on both sides passes that limit, so the
///   canvases that grids and overlays claim are read from the container first
///   (`HEIFDerivedCanvases`) and held to the pixel limit.
package enum HEIFCodec {
    package struct Features {
        /// The displayed size (libheif applies the transformations).
        package var size: PixelSize
        package var hasAlpha: Bool
        package var colour: EmbeddedColour
        /// Usable thumbnails' (displayed) sizes, smallest first.
        package var thumbnails: [PixelSize]
    }

    private static let initialised: Bool = {
        _ = heif_init(nil)
        _ = strata_heif_register_hevc_decoder(Int32(defaultHEVCThreads))
        return true
    }()

    /// Worker threads per HEVC decode: the cores, at most 4 (libde265 decodes a picture's rows
    /// of coding blocks in parallel when its encoder wrote them as wavefronts, as x265 and
    /// phones do, and filters it in parallel in any case; more threads than that gain little).
    package static let defaultHEVCThreads = min(Processors.online, 4)

    /// Worker threads of the HEVC decodes started from now on (1: on the calling thread; for
    /// measurements). Registers the decoder first.
    package static var hevcThreads: Int {
        get {
            _ = initialised
            return Int(strata_heif_hevc_decoder_threads())
        }
        set {
            _ = initialised
            strata_heif_set_hevc_decoder_threads(Int32(newValue))
        }
    }

    /// A context over `bytes` (not copied: it must not outlive them) and its primary image.
    private final class File {
        let context: OpaquePointer
        let primary: OpaquePointer

        init(_ bytes: UnsafeRawBufferPointer, maxPixels: Int) throws(ImageDecodingError) {
            _ = HEIFCodec.initialised
            guard let context = heif_context_alloc() else {
                throw ImageDecodingError(.corrupt("libheif cannot allocate a context"), format: .heic)
            }
            heif_context_set_maximum_image_size_limit(context, Int32(min(max(maxPixels, 1), 1 << 16)))
            var error = heif_context_read_from_memory_without_copy(context, bytes.baseAddress, bytes.count, nil)
            var primary: OpaquePointer?
            if error.code == heif_error_Ok { error = heif_context_get_primary_image_handle(context, &primary) }
            guard error.code == heif_error_Ok, let primary else {
                // The message lives in the context: read it before freeing that.
                let failure = HEIFCodec.error(error, while: "reading the container")
                heif_context_free(context)
                throw failure
            }
            self.context = context
            self.primary = primary
        }

        deinit {
            heif_image_handle_release(primary)
            heif_context_free(context)
        }

        /// Calls `body` with each thumbnail's item id and handle (released afterwards) until it
        /// returns true.
        func forEachThumbnail(_ body: (heif_item_id, OpaquePointer) -> Bool) {
            let count = Int(heif_image_handle_get_number_of_thumbnails(primary))
            guard count > 0 else { return }
            var ids = [heif_item_id](repeating: 0, count: count)
            let listed = Int(heif_image_handle_get_list_of_thumbnail_IDs(primary, &ids, Int32(count)))
            for id in ids.prefix(listed) {
                var handle: OpaquePointer?
                guard heif_image_handle_get_thumbnail(primary, id, &handle).code == heif_error_Ok, let handle else {
                    continue
                }
                let done = body(id, handle)
                heif_image_handle_release(handle)
                if done { return }
            }
        }
    }

    package static func features(_ bytes: UnsafeRawBufferPointer, maxPixels: Int) throws(ImageDecodingError) -> Features {
        // The header is read with libheif's default-sized cap, so that an image over
        // `maxPixels` is the caller's typed `tooLarge`, not a parse error.
        let file = try File(bytes, maxPixels: 1 << 16)
        let primary = file.primary
        let size = displayedSize(primary)
        let hasAlpha = heif_image_handle_has_alpha_channel(primary) != 0
        let colour = self.colour(primary)
        var thumbnails: [PixelSize] = []
        file.forEachThumbnail { _, handle in
            let t = displayedSize(handle)
            // Smaller, the same aspect (to a pixel), alpha and colour as the primary image.
            let sameAspect =
                abs(t.width * size.height - t.height * size.width) < max(size.width, size.height)
            if t.width > 0, t.height > 0, t.width < size.width, t.height < size.height, sameAspect,
                (heif_image_handle_has_alpha_channel(handle) != 0) == hasAlpha, self.colour(handle) == colour
            {
                thumbnails.append(t)
            }
            return false
        }
        thumbnails.sort { $0.width < $1.width }
        return Features(size: size, hasAlpha: hasAlpha, colour: colour, thumbnails: thumbnails)
    }

    private static func displayedSize(_ handle: OpaquePointer) -> PixelSize {
        PixelSize(width: Int(heif_image_handle_get_width(handle)), height: Int(heif_image_handle_get_height(handle)))
    }

    private static func colour(_ handle: OpaquePointer) -> EmbeddedColour {
        let type = heif_image_handle_get_color_profile_type(handle)
        if type == heif_color_profile_type_prof || type == heif_color_profile_type_rICC {
            let count = heif_image_handle_get_raw_color_profile_size(handle)
            guard count > 0, count <= ColourProfile.maximumByteCount else {
                return .unusable(.tooLarge(bytes: count))
            }
            var bytes = [UInt8](repeating: 0, count: count)
            let read = heif_image_handle_get_raw_color_profile(handle, &bytes)
            guard read.code == heif_error_Ok else { return .unusable(.malformedContainer(message(read))) }
            return EmbeddedProfiles.profile(bytes)
        }
        var nclx: UnsafeMutablePointer<heif_color_profile_nclx>?
        guard heif_image_handle_get_nclx_color_profile(handle, &nclx).code == heif_error_Ok, let nclx else {
            return .none
        }
        defer { heif_nclx_color_profile_free(nclx) }
        return CICPColour.colour(
            primaries: Int(nclx.pointee.color_primaries.rawValue),
            transfer: Int(nclx.pointee.transfer_characteristics.rawValue), gray: false)
    }

    /// Decodes the primary image, or when `size` is smaller than it the thumbnail of that
    /// (displayed) size, as premultiplied BGRA into `destination` (rows `stride` bytes apart).
    package static func decode(
        _ bytes: UnsafeRawBufferPointer, size: PixelSize, maxPixels: Int,
        into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        let file = try File(bytes, maxPixels: maxPixels)
        // A grid's or overlay's canvas counts against the pixel limit like the image's own size.
        let canvases = HEIFDerivedCanvases.canvases(in: bytes)
        if displayedSize(file.primary) == size {
            var primaryID: heif_item_id = 0
            _ = heif_context_get_primary_image_ID(file.context, &primaryID)
            try HEIFDerivedCanvases.check(item: primaryID, of: canvases, maxPixels: maxPixels)
            try decode(file.primary, in: file, size: size, into: destination, stride: stride)
            return
        }
        var outcome: Result<Void, ImageDecodingError>?
        file.forEachThumbnail { id, handle in
            guard displayedSize(handle) == size else { return false }
            do throws(ImageDecodingError) {
                try HEIFDerivedCanvases.check(item: id, of: canvases, maxPixels: maxPixels)
                try decode(handle, in: file, size: size, into: destination, stride: stride)
                outcome = .success(())
            } catch {
                outcome = .failure(error)
            }
            return true
        }
        guard let outcome else {
            throw ImageDecodingError(.corrupt("no image or thumbnail of \(size) in the file"), format: .heic)
        }
        try outcome.get()
    }

    private static func decode(
        _ handle: OpaquePointer, in file: File, size: PixelSize, into destination: UnsafeMutableRawPointer, stride: Int
    ) throws(ImageDecodingError) {
        // A grid's or overlay's canvas comes from its own descriptor, not from the `ispe` the
        // header was checked by, and libheif holds it to its per-side limit only: that limit is
        // the item's own longer side, so a canvas larger than the item says is refused.
        let side = max(heif_image_handle_get_ispe_width(handle), heif_image_handle_get_ispe_height(handle))
        heif_context_set_maximum_image_size_limit(file.context, max(1, min(side, 1 << 16)) + 1)
        let alpha = heif_image_handle_has_alpha_channel(handle) != 0
        let premultiplied = heif_image_handle_is_premultiplied_alpha(handle) != 0
        guard let options = heif_decoding_options_alloc() else {
            throw ImageDecodingError(.corrupt("libheif cannot allocate options"), format: .heic)
        }
        defer { heif_decoding_options_free(options) }
        options.pointee.convert_hdr_to_8bit = 1
        var image: OpaquePointer?
        let decoded = heif_decode_image(
            handle, &image, heif_colorspace_RGB, alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB,
            options)
        guard decoded.code == heif_error_Ok, let image else { throw error(decoded, while: "decoding") }
        defer { heif_image_release(image) }
        let width = Int(heif_image_get_width(image, heif_channel_interleaved))
        let height = Int(heif_image_get_height(image, heif_channel_interleaved))
        guard width == size.width, height == size.height else {
            throw ImageDecodingError(.corrupt("libheif decoded \(width)x\(height), the header says \(size)"), format: .heic)
        }
        guard heif_image_get_bits_per_pixel_range(image, heif_channel_interleaved) == 8 else {
            throw ImageDecodingError(.unsupported("libheif did not reduce the image to 8 bits"), format: .heic)
        }
        var sourceStride: Int32 = 0
        guard let plane = heif_image_get_plane_readonly(image, heif_channel_interleaved, &sourceStride) else {
            throw ImageDecodingError(.corrupt("libheif decoded no pixels"), format: .heic)
        }
        copy(
            from: plane, stride: Int(sourceStride), alpha: alpha, premultiply: alpha && !premultiplied, size: size,
            to: destination, stride: stride)
    }

    /// RGB or RGBA rows to BGRA rows (opaque, or premultiplied when `premultiply`).
    private static func copy(
        from source: UnsafePointer<UInt8>, stride sourceStride: Int, alpha: Bool, premultiply: Bool, size: PixelSize,
        to destination: UnsafeMutableRawPointer, stride: Int
    ) {
        for y in 0..<size.height {
            PixelOps.rgbRowToBGRA(
                source + y * sourceStride, channels: alpha ? 4 : 3, alpha: alpha, premultiply: premultiply,
                (destination + y * stride).assumingMemoryBound(to: UInt8.self), size.width)
        }
    }

    private static func message(_ error: heif_error) -> String {
        error.message.map { String(cString: $0) } ?? "libheif error \(error.code.rawValue)"
    }

    private static func error(_ error: heif_error, while action: String) -> ImageDecodingError {
        let text = "libheif: \(message(error)) while \(action)"
        switch (error.code, error.subcode) {
        case (_, heif_suberror_End_of_data):
            return ImageDecodingError(.truncated, format: .heic)
        case (heif_error_Unsupported_feature, _), (heif_error_Unsupported_filetype, _):
            return ImageDecodingError(.unsupported(text), format: .heic)
        default:
            return ImageDecodingError(.corrupt(text), format: .heic)
        }
    }
}
