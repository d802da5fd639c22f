import Strata

/// Parts of an original (ranged GETs), for a pass that copies a large original to a file
/// rather than holding it in memory.
extension HTTPSource {
    /// A ranged GET of `url` for `key`: up to `maxBytes` bytes from `offset`, with the
    /// original's version and length from the 206's validator and `Content-Range`. `nil` when
    /// the first part (`offset` 0) shows that parts cannot be read: a 200 with more than the
    /// window (the origin ignores `Range`), or no validator. A 200 that fits the window is the
    /// whole original. A part is bounded by `maxBytes`; ``Configuration/maxBodyBytes``, the bound
    /// of a whole fetch held in memory, does not bound the original's length here: the caller
    /// bounds that by ``SourceRange/totalBytes`` (a pyramid build copies it to a file, up to
    /// `iiif.maxSourceSize`).
    package func fetchRange(key: String, url: OriginURL, offset: Int, maxBytes: Int) async throws(SourceError) -> SourceRange? {
        let window = ByteWindow(offset: offset, count: max(1, maxBytes))
        let response = try await perform(key: key, url: url, method: .GET, conditional: nil, window: window)
        func invalid(_ why: String) -> SourceError {
            SourceError(
                key: key, reason: .origin(HTTPOriginError(kind: .invalidResponse(why), url: "\(url)", settings: settingsPrefix)))
        }
        guard case .body(let bytes) = response.outcome else { throw invalid("a GET was answered without a body") }
        guard let version = response.validator?.version else {
            if offset == 0 { return nil }
            throw invalid("a part of the original came without an ETag or Last-Modified")
        }
        let total: Int
        if response.status == 206 {
            guard let range = Self.contentRange(response.contentRange), range.first == offset, range.count == bytes.count,
                range.count <= window.count
            else {
                throw invalid(
                    "a 206 to Range bytes=\(offset)-\(offset + window.count - 1) carried \(bytes.count) bytes and "
                        + "Content-Range \((response.contentRange ?? "none").debugDescription)")
            }
            total = range.total
        } else {
            guard offset == 0 else { throw invalid("a ranged GET after the first was answered \(response.status), not 206") }
            // The whole file in one answer: the window held all of it, or the origin ignores Range.
            guard bytes.count < window.count else { return nil }
            total = bytes.count
        }
        return SourceRange(bytes: bytes, version: version, totalBytes: total)
    }

    /// `Content-Range: bytes first-last/total` as the first byte, the count and the total;
    /// `nil` for anything else (an unknown total `*` included).
    package static func contentRange(_ value: String?) -> (first: Int, count: Int, total: Int)? {
        guard let value else { return nil }
        let trimmed = value.trimmingPrefix("bytes ")
        guard trimmed.count < value.count else { return nil }
        let halves = trimmed.split(separator: "/", maxSplits: 1)
        guard halves.count == 2, let total = Int(halves[1]) else { return nil }
        let ends = halves[0].split(separator: "-", maxSplits: 1)
        guard ends.count == 2, let first = Int(ends[0]), let last = Int(ends[1]), first >= 0, last >= first, last < total
        else { return nil }
        return (first, last - first + 1, total)
    }
}
