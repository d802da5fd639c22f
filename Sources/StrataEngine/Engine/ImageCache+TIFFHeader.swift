import StrataBase
import StrataCodecs
import StrataTiers

extension ImageCache {
    /// The most bytes read from a TIFF's first directory on, for its header.
    package static let tiffTailBytes = 8 << 20

    /// The header of a TIFF whose first directory lies past `prefix` (libtiff and vips write
    /// it after the pixels), read without the whole file: the directory and what follows it
    /// (up to ``tiffTailBytes``: its tags' values, the strips' offsets) as a second part, put at
    /// its offset in a sparse mapping of the file's length beside the prefix, so that libtiff
    /// finds both where the file has them. Cost: one more read, and the pages libtiff touches.
    /// `nil` (the caller reads the whole file, which reports any failure) when `prefix` is not
    /// such a TIFF, the source cannot read that part, the parts are of two versions, or the
    /// header needs more than they hold; a header over `maxPixels` throws as a whole read's
    /// would.
    func tiffHeaderPastPrefix(
        _ key: CacheKey, prefix: SourceData, maxPixels: Int?
    ) async throws(ImageCacheError) -> (header: ImageHeader, version: SourceVersion)? {
        guard let offset = prefix.bytes.withUnsafeBytes({ TIFFCodec.firstDirectoryOffset($0) }), offset >= prefix.bytes.count
        else { return nil }
        // A part that cannot be read (an origin that ignores `Range` past the start) leaves the
        // whole read to say what is wrong, as it did before this part was asked for.
        let tail: SourceRange?
        if let directory = blockingSource as? DirectorySource {
            tail = try await onPool(key, lane: FlightLane(.urgent)) { () -> SourceRange? in
                try? directory.fetchRangeBlocking(key: key.sourceKey, offset: offset, maxBytes: Self.tiffTailBytes)
            }
        } else if let source {
            tail = try? await source.fetchRange(key: key.sourceKey, offset: offset, maxBytes: Self.tiffTailBytes)
        } else {
            return nil
        }
        // The prefix lies below `offset` (checked above), the tail within the file's length.
        guard let tail, tail.version == prefix.version, !tail.bytes.isEmpty, offset + tail.bytes.count <= tail.totalBytes else {
            return nil
        }
        let parsed = try await onPool(key, lane: FlightLane(.urgent)) { [self] () -> Result<ImageHeader, ImageDecodingError>? in
            guard let view = try? ScratchMapping(count: tail.totalBytes) else { return nil }
            prefix.bytes.withUnsafeBytes { view.base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            tail.bytes.withUnsafeBytes { (view.base + offset).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            return readHeader(UnsafeRawBufferPointer(start: view.base, count: view.count), maxPixels: maxPixels)
        }
        switch parsed {
        case .success(let header): return (header, SourceVersion(token: prefix.version))
        case .failure(let error):
            // Over the pixel limit: as a whole read would say; anything else may need the rest.
            if case .tooLarge = error.reason { throw .decoding(key: key.string, error) }
            return nil
        case nil: return nil
        }
    }
}
