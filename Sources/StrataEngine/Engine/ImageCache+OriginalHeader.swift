import StrataBase
import StrataCodecs
import StrataTiers
extension ImageCache {
    /// The header of `key`'s original (its size after EXIF orientation, format, alpha) and the
    /// source version it was read from: for services that describe an image before asking for
    /// pixels (an IIIF `info.json` needs the original's width and height).
    ///
    /// Cost: one source fetch (counted as a fetch, not a decode) and a header parse on the
    /// engine's threads; no pixel memory. From a blocking source (a directory) the header is
    /// read from the original's first megabyte (`headerPrefixBytes`) when that holds all of it
    /// (``/StrataCodecs/ImageDecoder/readHeader(prefix:)``: a JPEG whose first scan starts there,
    /// a PNG whose first `IDAT` does, a JPEG 2000 or JPEG XL whose header is there, a WebP
    /// without `EXIF` or `ICCP` chunks): describing a gigapixel original reads a megabyte, not
    /// the file. A TIFF whose first directory follows its pixels also has that directory and
    /// what follows it read as a second part (`tiffHeaderPastPrefix`); anything else (metadata
    /// that may follow the pixels: AVIF, HEIC, a WebP's `EXIF`) is read whole. Not
    /// cached here: callers memoize per key and version. From other sources the first megabyte is
    /// asked for the same way (``/StrataTiers/ImageSource/fetchPrefix(key:maxBytes:)``: a ranged
    /// GET from an HTTP origin or a bucket).
    /// Throws like ``image(for:)``: not found (remembered for the negative TTL), a refused key,
    /// an unrecognised or too large image. `maxPixels` replaces the source's pixel limit for
    /// this read (a tile pyramid's originals may be larger than any whole decode).
    public func originalHeader(
        for key: CacheKey, maxPixels: Int? = nil
    ) async throws(ImageCacheError) -> (header: ImageHeader, version: SourceVersion) {
        if key.string.isEmpty { throw .invalidRequest(key: key.string, reason: "the key is empty") }
        guard source != nil else { throw .noSource(key: key.string) }
        try checkNegative(key)
        let prefix: SourceData
        if let files = blockingSource {
            countFetch()
            prefix = try await onPool(key, lane: FlightLane(.urgent)) { [self] () throws(ImageCacheError) in
                try fetchBlocking(key, from: files, prefix: Self.headerPrefixBytes)
            }
        } else {
            // A ranged read of the first megabyte (an origin that supports it).
            prefix = try await fetchOriginal(key, lane: FlightLane(.urgent), prefix: Self.headerPrefixBytes)
        }
        let data: SourceData
        if prefix.bytes.count < Self.headerPrefixBytes {
            data = prefix  // the whole original
        } else if let found = try await headerInPrefix(key, prefix: prefix, maxPixels: maxPixels) {
            return found
        } else if let found = try await tiffHeaderPastPrefix(key, prefix: prefix, maxPixels: maxPixels) {
            return found
        } else if let files = blockingSource {
            // The whole original: the header may lie beyond the prefix.
            data = try await onPool(key, lane: FlightLane(.urgent)) { [self] () throws(ImageCacheError) in
                try fetchBlocking(key, from: files)
            }
        } else {
            data = try await fetchOriginal(key, lane: FlightLane(.urgent))
        }
        let bytes = data.bytes
        let header = try await onPool(key, lane: FlightLane(.urgent)) { [self] () -> Result<ImageHeader, ImageDecodingError> in
            bytes.withUnsafeBytes { readHeader($0, maxPixels: maxPixels) }
        }
        switch header {
        case .success(let header): return (header, SourceVersion(token: data.version))
        case .failure(let error): throw .decoding(key: key.string, error)
        }
    }

    /// The header from the prefix alone when it is known to hold all of it
    /// (``/StrataCodecs/ImageDecoder/readHeader(prefix:)``), else `nil`.
    private func headerInPrefix(
        _ key: CacheKey, prefix: SourceData, maxPixels: Int?
    ) async throws(ImageCacheError) -> (header: ImageHeader, version: SourceVersion)? {
        let bytes = prefix.bytes
        let header = try await onPool(key, lane: FlightLane(.urgent)) { [self] () -> Result<ImageHeader?, ImageDecodingError> in
            bytes.withUnsafeBytes { raw in
                withDecoder(maxPixels: maxPixels) { decoder in
                    Result { () throws(ImageDecodingError) -> ImageHeader? in try decoder.readHeader(prefix: raw) }
                }
            }
        }
        switch header {
        case .success(let header): return header.map { ($0, SourceVersion(token: prefix.version)) }
        case .failure(let error): throw .decoding(key: key.string, error)
        }
    }

    /// The header of `bytes` under `maxPixels` (a decoder of its own), or under the engine's
    /// limits (a renderer's decoder) when `nil`; on the engine's threads.
    func readHeader(_ bytes: UnsafeRawBufferPointer, maxPixels: Int?) -> Result<ImageHeader, ImageDecodingError> {
        withDecoder(maxPixels: maxPixels) { decoder in
            Result { () throws(ImageDecodingError) -> ImageHeader in try decoder.readHeader(bytes) }
        }
    }

    /// `body` with a decoder of its own under `maxPixels`, or with a renderer's (the engine's
    /// limits) when `nil`.
    private func withDecoder<T>(maxPixels: Int?, _ body: (ImageDecoder) -> T) -> T {
        if let maxPixels { return body(ImageDecoder(limits: DecodingLimits(maxPixels: maxPixels))) }
        return renderers.withRenderer(pool: pool) { body($0.decoder) }
    }

    /// How much of an original ``originalHeader(for:maxPixels:)`` reads first from a blocking
    /// source: room for a JPEG's EXIF, thumbnails and a large ICC profile before its scan.
    package static let headerPrefixBytes = 1 << 20

    /// The version of `key`'s original now, as the source reports it cheaply (a `stat` for a
    /// directory, a conditional `HEAD` for an origin; a fetch where the source has no cheaper
    /// check): for a caller that memoizes something of the original (its size) and revalidates
    /// it as ``Options/revalidateAfter`` says.
    public func originalVersion(for key: CacheKey) async throws(ImageCacheError) -> SourceVersion {
        guard let source else { throw .noSource(key: key.string) }
        return SourceVersion(token: try await currentVersion(of: key, in: source))
    }
}

extension ImageCache {
    /// Whether the source is usable now, for a deep health check: a source that can say so
    /// cheaply (``/StrataTiers/SourceHealthProbe``: a bucket's credentials) is asked; others
    /// are taken as usable. Throws the source's error. ``sourceCanCheckHealth`` says whether the
    /// source is asked.
    public var sourceCanCheckHealth: Bool { source is any SourceHealthProbe }

    public func checkSourceHealth() async throws(SourceError) {
        guard let probe = source as? any SourceHealthProbe else { return }
        try await probe.checkHealth()
    }
}
