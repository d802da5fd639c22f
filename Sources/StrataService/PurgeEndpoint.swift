import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Strata

/// `DELETE /images/{key}` and `DELETE /iiif/{2|3}/{identifier}`: drops every variant of a key
/// from every tier (memory, disk files, image-table entries, the remembered "not found"), in
/// both colour outputs, its tile pyramids' tiles, its encodings from the encoded cache, and its original's size and
/// profile from the IIIF and colour memos. Other processes
/// sharing the disk directory drop their memory copies as the files go (inotify).
///
/// Authorised by `Authorization: Bearer {http.adminToken}`, compared in constant time; without
/// a configured token the routes do not exist (404), so a node never exposes them by accident.
/// Cost: one engine removal (its file work on the engine's threads) and a walk of the encoded
/// cache's keys — an administrative call, not a request path.
package struct PurgeEndpoint: Sendable {
    package let cache: ImageCache
    package let encoded: EncodedCache
    package let originals: IIIFOriginals
    package let profiles: OriginalProfiles
    /// The tile pyramids (`iiif.pyramidPath`), whose tiles of the key go too.
    package let pyramids: TilePyramids?
    /// SHA-256 of `http.adminToken`; `nil` when none is configured.
    private let tokenDigest: [UInt8]?

    package init(
        cache: ImageCache, encoded: EncodedCache, originals: IIIFOriginals, profiles: OriginalProfiles, pyramids: TilePyramids? = nil,
        adminToken: String?
    ) {
        self.pyramids = pyramids
        self.cache = cache
        self.encoded = encoded
        self.originals = originals
        self.profiles = profiles
        self.tokenDigest = adminToken.map { Array(SHA256.hash(data: Data($0.utf8))) }
    }

    /// What a purge removed, as its JSON answer says.
    package struct Purged: Encodable {
        package var key: String
        package var encodings: Int
    }

    package func respond(to request: Request) async -> Response {
        guard let tokenDigest else {
            return ServiceError(.notFound, "not_found", "no such endpoint (purging needs http.adminToken)").response()
        }
        guard Self.authorises(request.headers[.authorization], digest: tokenDigest) else {
            return ServiceError(.unauthorized, "unauthorized", "purging needs `Authorization: Bearer` with http.adminToken")
                .response(headers: [.wwwAuthenticate: "Bearer"])
        }
        let key: String
        do {
            key = try Self.key(of: request.uri.path)
        } catch {
            return error.response()
        }
        // Both colour choices' variants (`color.output` may have changed since they were made),
        // each with every gravity a client can name.
        await cache.remove(keys: CacheKey.allDerived(from: key))
        for colour in ColourOutput.allCases { _ = try? await pyramids?.remove(CacheKey(key, colour: colour)) }
        let encodings = encoded.remove(key: key)
        originals.forget(key)
        profiles.forget(key)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let json = (try? encoder.encode(Purged(key: key, encodings: encodings))) ?? Data("{}".utf8)
        return ServiceResponder.answer("application/json", ByteBuffer(bytes: json))
    }

    /// The key a purge path names: `/images/{key}` (as an image URL spells it, no query) or an
    /// IIIF base URI `/iiif/{2|3}/{identifier}`.
    package static func key(of path: String) throws(ServiceError) -> String {
        if path.hasPrefix(ImageParameters.prefix) {
            return try ImageParameters.key(fromPath: Substring(path).dropFirst(ImageParameters.prefix.count))
        }
        guard case .base(_, let identifier) = try IIIFRoute(path: Substring(path)) else {
            throw ServiceError(
                .notFound, "not_found", "purge an IIIF image by its base URI, DELETE /iiif/{2|3}/{identifier} (no region, no info.json)")
        }
        return identifier.key
    }

    /// Whether `header` is `Bearer {token}` for the token whose SHA-256 is `digest`: digests
    /// compared in constant time, so the comparison's time says nothing of the token.
    package static func authorises(_ header: String?, digest: [UInt8]) -> Bool {
        guard let header, header.hasPrefix("Bearer ") else { return false }
        let given = Array(SHA256.hash(data: Data(header.dropFirst("Bearer ".count).utf8)))
        var difference: UInt8 = 0
        for (a, b) in zip(given, digest) { difference |= a ^ b }
        return difference == 0
    }
}
