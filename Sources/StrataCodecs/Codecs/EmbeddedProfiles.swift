import CStrataJPEG
import CWebP
import StrataBase

/// Reads the ICC profile embedded in a JPEG (APP2 `ICC_PROFILE` chunks, with libjpeg-turbo's
/// `jpeg_read_icc_profile`) or a WebP (the `ICCP` chunk, with libwebp's demux), and embeds one
/// in an encoded JPEG (APP2 chunks after the SOI and JFIF segments, in the layout
/// `jpeg_write_icc_profile` writes) or WebP (libwebp's mux). PNG's chunks are in
/// ``PNGColourChunks``. Malformed chunks are ``EmbeddedColour/unusable(_:)``, never an error.
package enum EmbeddedProfiles {
    /// `ICC_PROFILE\0`, the APP2 chunk's identifier.
    package static let jpegChunkName: [UInt8] = Array("ICC_PROFILE".utf8) + [0]
    /// Profile bytes an APP2 chunk holds at most (65 535 − 2 length − 14 header bytes).
    package static let jpegChunkCapacity = 65_519

    // MARK: JPEG

    /// The profile of a JPEG whose markers (``Metadata/jpegMarkers(_:)``) said it has one.
    package static func jpeg(_ bytes: UnsafeRawBufferPointer) -> EmbeddedColour {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .none }
        var icc: UnsafeMutablePointer<UInt8>?
        var count: UInt32 = 0
        var message = [CChar](repeating: 0, count: 256)
        let found = strata_jpeg_read_icc(base.assumingMemoryBound(to: UInt8.self), bytes.count, &icc, &count, &message)
        defer { strata_jpeg_free(icc) }
        switch found {
        case 1:
            guard let icc else { return .unusable(.malformedContainer("libjpeg-turbo returned no bytes")) }
            return profile(Array(UnsafeBufferPointer(start: icc, count: Int(count))))
        case 0:
            return .unusable(.malformedContainer("the ICC_PROFILE chunks are incomplete or misnumbered"))
        default:
            return .unusable(
                .malformedContainer(
                    "the header cannot be read: \(String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))"
                ))
        }
    }

    /// `jpeg` with `profile`'s APP2 chunks inserted after its SOI and any APP0 (JFIF) segment.
    package static func embed(_ profile: ColourProfile, inJPEG jpeg: [UInt8]) -> [UInt8] {
        guard jpeg.count >= 4, jpeg[0] == 0xFF, jpeg[1] == 0xD8 else { return jpeg }
        var at = 2
        if jpeg.count >= 6, jpeg[2] == 0xFF, jpeg[3] == 0xE0 {
            at = min(jpeg.count, 4 + (Int(jpeg[4]) << 8 | Int(jpeg[5])))
        }
        var out: [UInt8] = []
        out.reserveCapacity(jpeg.count + profile.bytes.count + 18 * (profile.bytes.count / jpegChunkCapacity + 1))
        out.append(contentsOf: jpeg[0..<at])
        let chunks = (profile.bytes.count + jpegChunkCapacity - 1) / jpegChunkCapacity
        for index in 0..<chunks {
            let start = index * jpegChunkCapacity
            let slice = profile.bytes[start..<min(profile.bytes.count, start + jpegChunkCapacity)]
            let length = slice.count + 16
            out += [0xFF, 0xE2, UInt8(length >> 8), UInt8(length & 0xFF)]
            out += jpegChunkName
            out += [UInt8(index + 1), UInt8(chunks)]
            out += slice
        }
        out.append(contentsOf: jpeg[at...])
        return out
    }

    // MARK: WebP

    /// The profile in a WebP's `ICCP` chunk (only extended files, whose VP8X flags say so).
    package static func webp(_ bytes: UnsafeRawBufferPointer) -> EmbeddedColour {
        // RIFF, size, WEBP, VP8X, size, then the flags byte: bit 5 is "has an ICC profile".
        guard bytes.count >= 21, bytes[12] == 0x56, bytes[13] == 0x50, bytes[14] == 0x38, bytes[15] == 0x58,
            bytes[20] & 0x20 != 0
        else { return .none }
        var data = WebPData(bytes: bytes.baseAddress!.assumingMemoryBound(to: UInt8.self), size: bytes.count)
        guard let demux = WebPDemux(&data) else {
            return .unusable(.malformedContainer("libwebp's demux cannot read the container"))
        }
        defer { WebPDemuxDelete(demux) }
        var iterator = WebPChunkIterator()
        guard WebPDemuxGetChunk(demux, "ICCP", 1, &iterator) != 0 else {
            return .unusable(.malformedContainer("the header announces an ICCP chunk that is not there"))
        }
        defer { WebPDemuxReleaseChunkIterator(&iterator) }
        guard let start = iterator.chunk.bytes else { return .unusable(.truncated(bytes: 0, declared: nil)) }
        return profile(Array(UnsafeBufferPointer(start: start, count: iterator.chunk.size)))
    }

    /// `webp` with `profile` as its `ICCP` chunk (libwebp's mux rewrites the container as an
    /// extended one); `nil` when libwebp refuses.
    package static func embed(_ profile: ColourProfile, inWebP webp: [UInt8]) -> [UInt8]? {
        webp.withUnsafeBufferPointer { input -> [UInt8]? in
            var image = WebPData(bytes: input.baseAddress, size: input.count)
            guard let mux = WebPMuxCreate(&image, 0) else { return nil }
            defer { WebPMuxDelete(mux) }
            let set = profile.bytes.withUnsafeBufferPointer { icc -> WebPMuxError in
                var chunk = WebPData(bytes: icc.baseAddress, size: icc.count)
                return WebPMuxSetChunk(mux, "ICCP", &chunk, 1)
            }
            guard set == WEBP_MUX_OK else { return nil }
            var output = WebPData()
            guard WebPMuxAssemble(mux, &output) == WEBP_MUX_OK, let bytes = output.bytes else { return nil }
            defer { WebPDataClear(&output) }
            return Array(UnsafeBufferPointer(start: bytes, count: output.size))
        }
    }

    /// A profile of `bytes`, or why it cannot be one.
    package static func profile(_ bytes: [UInt8]) -> EmbeddedColour {
        do throws(ColourProfileProblem) {
            return .profile(try ColourProfile(bytes: bytes))
        } catch {
            return .unusable(error)
        }
    }
}
