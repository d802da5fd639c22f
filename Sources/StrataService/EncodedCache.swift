import NIOCore
import Strata

/// The encoded bytes of one variant (or of a IIIF tile cut from it) in one format and
/// quality, ready to write, with what its answers' fields say (``EncodedResponder/fields(etag:size:format:)``).
/// No built fields: the warm path copies it out of the cache for every answer, so it holds as
/// few reference-counted members as it can.
package struct EncodedImage: Sendable {
    package init(body: ByteBuffer, format: ResponseFormat, etag: String, size: PixelSize, head: ByteBuffer? = nil) {
        self.body = body
        self.format = format
        self.etag = etag
        self.size = size
        self.head = head
    }

    package let body: ByteBuffer
    package let format: ResponseFormat
    /// The strong validator, ``EncodedKey/etag``.
    package let etag: String
    /// The encoded image's size (`X-Strata-Width`/`-Height`).
    package let size: PixelSize
    /// For `/images/` answers, the warm path's ready-made response head up to its per-response
    /// fields (``EncodedResponder/warmHead(_:length:)``); `nil` otherwise.
    package var head: ByteBuffer? = nil
}

/// A variant as the encoded cache knows it: the key, the variant (size, mode, style), the
/// source version it was rendered from, and the encoding; for an IIIF image, also what was
/// cut from the variant (`derivation`: the API version and the canonical
/// region/size/rotation/quality.format, `3/0,0,512,512/256,256/0/default.jpg`; empty for a
/// whole variant).
package struct EncodedKey: Hashable, Sendable {
    package let key: String
    package let variant: VariantDescriptor
    package let version: UInt64
    package let format: ResponseFormat
    package let quality: Int
    /// `original` answers embed the original's profile; their validator says so (`-icc`).
    package var colour: ColourOutput = .srgb
    package var derivation: String = ""
    /// The AVIF encoder's speed (`http.avifSpeed`), which changes the bytes; `nil` for the
    /// other formats.
    package var speed: Int? = nil

    /// The strong validator of these bytes, one format for `/images` and IIIF:
    /// `"{source version, hex}-{variant}-{format}[-q{quality}][-s{speed}][-icc][-{derivation}]"`,
    /// the quality only for JPEG, WebP, AVIF and JPEG XL, the speed only for AVIF, `-icc` for
    /// `color.output` `original`, the derivation's commas written `;` (clients and
    /// ``FormatNegotiation`` split `If-None-Match` on commas; canonical forms have no `;`).
    package var etag: String {
        var tag = "\"\(String(version, radix: 16))-\(variant)-\(format.rawValue)"
        if quality > 0 { tag += "-q\(quality)" }
        if let speed { tag += "-s\(speed)" }
        if colour == .original { tag += "-icc" }
        if !derivation.isEmpty { tag += "-" + String(derivation.map { $0 == "," ? ";" : $0 }) }
        return tag + "\""
    }
}

/// The service's second cache level: encoded JPEG/WebP/PNG/AVIF/JPEG XL bytes of variants the engine
/// served, so that a warm request is two hash lookups (the engine's memory tier, then this)
/// and a write, with no encode. Decoded and encoded images are kept apart because one decoded
/// variant serves several encodings, and because a decoded variant is what the tolerance
/// search matches, while encoded bytes are only ever reused for exactly the same variant.
///
/// Each encoding is inserted once, by the one encode that concurrent requests for it share
/// (``EncodedResponder/encodes``). Cost-limited (``MemoryCache``, TinyLFU admission),
/// thread-safe. A `ByteBuffer` body is
/// shared, not copied, by every response that sends it.
package final class EncodedCache: Sendable {
    private let cache: MemoryCache<EncodedKey, EncodedImage>?

    /// `costLimit` 0 turns the cache off.
    package init(costLimit: Int) {
        cache = costLimit > 0 ? MemoryCache(costLimit: costLimit, maxEntryShare: 0.25) : nil
    }

    package func value(for key: EncodedKey) -> EncodedImage? { cache?.value(forKey: key) }

    /// Keeps `image`; its cost is its body, its head and 128 bytes (the validator and the rest).
    package func insert(_ image: EncodedImage, for key: EncodedKey) {
        _ = cache?.insert(image, forKey: key, cost: image.body.readableBytes + (image.head?.readableBytes ?? 0) + 128)
    }

    /// Drops every encoding of `key` (a purge); returns how many.
    @discardableResult
    package func remove(key: String) -> Int { cache?.removeAll { $0.key == key } ?? 0 }

    package var statistics: CacheStatistics? { cache?.statistics }
}
