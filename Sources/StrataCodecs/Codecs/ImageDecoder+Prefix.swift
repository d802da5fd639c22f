import StrataBase

extension ImageDecoder {
    /// The header of an original read from its first bytes alone, when they are known to hold
    /// all of it; `nil` when the rest of the file could change it (read more of the file, or
    /// all of it, and call ``readHeader(_:)-(UnsafeRawBufferPointer)``). For a service
    /// describing originals it has not decoded (an IIIF `info.json`), from a ranged read of the
    /// start of a large file.
    ///
    /// Known whole in a prefix: a JPEG's header when its first scan starts there (every header
    /// segment comes before it); a PNG's when its first `IDAT` does (so must the colour chunks);
    /// a WebP's without `EXIF` or `ICCP` chunks (which may follow the image data); a JPEG 2000's
    /// and a JPEG XL's when their decoders read it from the prefix (both stop before the first
    /// tile-part or frame: a parse that succeeds there is the whole file's). A TIFF's directory
    /// may lie anywhere; AVIF and HEIC may put their `meta` box after the image data.
    ///
    /// Cost: a marker, chunk or box walk of the prefix and the header parse. Throws what
    /// ``readHeader(_:)-(UnsafeRawBufferPointer)`` throws for a header the prefix holds (too
    /// large: the size is read), and nothing for one it may not hold.
    public func readHeader(prefix bytes: UnsafeRawBufferPointer) throws(ImageDecodingError) -> ImageHeader? {
        guard let format = ImageFormatDetector.detect(bytes) else { return nil }
        switch format {
        case .jpeg:
            guard Metadata.jpegMarkers(bytes).reachesScan else { return nil }
        case .png:
            guard Metadata.pngReachesImageData(bytes) else { return nil }
        case .webp:
            guard Metadata.webpHeaderNeedsNoTrailingChunk(bytes) else { return nil }
        case .jp2, .jxl:
            do {
                return try readHeader(bytes)
            } catch {
                // The size was read: the whole file says the same.
                if case .tooLarge = error.reason { throw error }
                return nil
            }
        case .avif, .heic, .gif, .tiff:
            return nil
        }
        return try readHeader(bytes)
    }
}
