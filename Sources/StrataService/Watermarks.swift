import Crypto
import Foundation
import Strata
import StrataConfiguration

/// The named watermark images of `http.watermarks`, for `/images?watermark=NAME`.
///
/// A watermark is `file:PATH` (read and decoded when the configuration is loaded, so a file that
/// cannot be read refuses it) or a key of the source (`source:KEY`, or the key alone), read
/// through the engine on its first use like any original — its tiers keep it. Each is decoded
/// with its ICC profile converted to sRGB and its alpha kept, at most ``maximumSide`` pixels a
/// side. Its *version* (a digest of the file, or the original's source version) is part of
/// every answer's identity, so a changed logo makes new ETags. Reloading the configuration
/// replaces the set. Cost: one lookup under a lock per request that names a watermark.
package final class Watermarks: Sendable {
    /// A watermark ready to composite.
    package struct Loaded: Sendable {
        package var image: PixelImage
        /// What identifies this image among the versions of the watermark (hex).
        package var version: String
    }

    /// Where a watermark comes from.
    package enum Origin: Sendable, Equatable {
        case file(String)
        case source(String)
    }

    private struct Entry: Sendable {
        var origin: Origin
        var loaded: Loaded?
    }

    /// The largest side a watermark is kept at.
    package static let maximumSide = 2048
    /// The configuration key (named in errors).
    package static let key = "http.watermarks"

    private let state: Lock<[String: Entry]>

    /// No watermark (`watermark=` is refused).
    package static var none: Watermarks { Watermarks(entries: [:]) }

    private init(entries: [String: Entry]) { state = Lock(entries) }

    /// The watermarks of `configuration`, the files loaded.
    package init(_ configuration: StrataConfiguration) throws(ConfigurationError) {
        state = Lock(try Self.entries(configuration.http.watermarks))
    }

    /// The entries of `settings`, the files read and decoded.
    private static func entries(_ settings: [String: String]) throws(ConfigurationError) -> [String: Entry] {
        var entries: [String: Entry] = [:]
        for (name, value) in settings {
            if value.hasPrefix("file:") {
                let path = String(value.dropFirst(5))
                entries[name] = Entry(origin: .file(path), loaded: try load(file: path, name: name))
            } else {
                let key = value.hasPrefix("source:") ? String(value.dropFirst(7)) : value
                do {
                    try ImageParameters.checkKey(key)
                } catch {
                    throw ConfigurationError(key: Self.key, value: value, reason: "watermark \(name.debugDescription): \(error.message)")
                }
                entries[name] = Entry(origin: .source(key), loaded: nil)
            }
        }
        return entries
    }

    /// A watermark file read and decoded (sRGB, premultiplied), or an error naming it.
    private static func load(file path: String, name: String) throws(ConfigurationError) -> Loaded {
        func refused(_ why: String) -> ConfigurationError {
            ConfigurationError(key: key, value: "\(name): file:\(path)", reason: "watermark \(name.debugDescription): \(why)")
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw refused("cannot read \(path)") }
        guard data.count <= 32 << 20 else { throw refused("\(path) is over 32 MiB") }
        let bytes = [UInt8](data)
        let version = SHA256.hash(data: data).prefix(8).map { String(format: "%02x", $0) }.joined()
        do {
            return Loaded(image: try decode(bytes), version: version)
        } catch {
            throw refused("\(path) cannot be decoded: \(error)")
        }
    }

    /// `bytes` decoded as a watermark: sRGB, premultiplied, at most ``maximumSide`` a side.
    package static func decode(_ bytes: [UInt8]) throws(ImageDecodingError) -> PixelImage {
        let box = PixelSize(width: maximumSide, height: maximumSide)
        return try ImageRenderer(limits: DecodingLimits(maxPixels: 64 << 20), resampleThreads: 1)
            .render(bytes, request: RenderRequest(box: box, style: .bgra32Premultiplied))
    }

    /// Replaces the set with `configuration`'s (the source watermarks are read again on first
    /// use); `false` when it names the same watermarks the same way and no file changed.
    @discardableResult
    package func set(_ configuration: StrataConfiguration) throws(ConfigurationError) -> Bool {
        let fresh = try Self.entries(configuration.http.watermarks)
        return state.withLock { entries in
            let same =
                fresh.count == entries.count
                && fresh.allSatisfy { name, entry in
                    entries[name]?.origin == entry.origin && entries[name]?.loaded?.version == entry.loaded?.version
                }
            guard !same else { return false }
            entries = fresh
            return true
        }
    }

    /// Whether a watermark is called `name`.
    package func has(_ name: String) -> Bool { state.withLock { $0[name] != nil } }

    /// The names, sorted (listed in refusals).
    package var names: [String] { state.withLock { $0.keys.sorted() } }

    /// `name`'s image when it is loaded (a file always is; a source key after its first use).
    package func loaded(_ name: String) -> Loaded? { state.withLock { $0[name]?.loaded } }

    /// `name`'s image, read through `cache` when it is a source key not read yet.
    package func load(_ name: String, cache: ImageCache) async throws(ServiceError) -> Loaded {
        guard let origin = state.withLock({ $0[name]?.origin }) else {
            throw ServiceError.badParameter("watermark=\(name): no such watermark (http.watermarks has \(names.joined(separator: ", ")))")
        }
        if let loaded = loaded(name) { return loaded }
        guard case .source(let key) = origin else { preconditionFailure("file watermarks are loaded with the configuration") }
        let request = ImageRequest(key: CacheKey(key), box: PixelSize(width: Self.maximumSide, height: Self.maximumSide))
        let served: CachedImage
        do {
            served = try await cache.image(for: request)
        } catch {
            throw ServiceError(
                .badGateway, "watermark_failed",
                "the watermark \(name.debugDescription) (\(key.debugDescription)) cannot be read: \(ServiceError(error).message)")
        }
        var image = served.image
        if image.style != .bgra32Premultiplied { image = PixelConversion.convert(image, to: .bgra32Premultiplied) }
        let loaded = Loaded(image: image, version: String(served.sourceVersion.stamp, radix: 16))
        state.withLock { entries in
            if entries[name]?.origin == origin { entries[name]?.loaded = loaded }
        }
        return loaded
    }
}

/// Where and how a watermark is laid on an answer (`watermark=`, `wmpos=`, `wmopacity=`,
/// `wmscale=`, `wmmargin=`).
public struct WatermarkPlacement: Hashable, Sendable {
    /// The name in `http.watermarks`.
    public var name: String
    /// A compass gravity (the watermark's side or corner of the answer) or `nil` for `tile`.
    public var gravity: Gravity?
    /// 0…1 (hundredths): the watermark's alpha is multiplied by it.
    public var opacity: Double
    /// The watermark's width as a share of the answer's (0…1, hundredths); `nil`: its own size.
    public var scale: Double?
    /// Pixels between the watermark and the answer's edges (and between tiles).
    public var margin: Int

    public init(name: String, gravity: Gravity? = .southeast, opacity: Double = 1, scale: Double? = nil, margin: Int = 0) {
        self.name = name
        self.gravity = gravity
        self.opacity = opacity
        self.scale = scale
        self.margin = margin
    }

    /// `name:pos,opacity,scale,margin`, for the answer's identity (the version is added by the caller).
    package var canonical: String {
        "\(name):\(gravity.map { "\($0)" } ?? "tile"),\(ImageOperations.decimal(opacity)),\(scale.map(ImageOperations.decimal) ?? "-"),\(margin)"
    }

    /// `image` with `watermark` laid on it as placed: scaled to `scale` of the answer's width (or
    /// its own size), shrunk to fit inside the margins, then at the gravity's side or corner, or
    /// repeated across the answer (`tile`, `margin` apart).
    package func apply(_ watermark: PixelImage, to image: PixelImage) -> PixelImage {
        let room = PixelSize(width: max(1, image.width - 2 * margin), height: max(1, image.height - 2 * margin))
        var target = watermark.size
        if let scale {
            let width = max(1, Int((Double(image.width) * scale).rounded()))
            target = PixelSize(
                width: width, height: max(1, Int((Double(watermark.height) * Double(width) / Double(watermark.width)).rounded())))
        }
        if target.width > room.width || target.height > room.height {
            target = SizingPlan(source: target, box: room, mode: .fit).output
        }
        let mark =
            target == watermark.size
            ? watermark
            : Resampler().resample(
                watermark, region: SourceRect(x: 0, y: 0, width: Double(watermark.width), height: Double(watermark.height)), to: target)
        guard let gravity, let focus = gravity.focus else {
            var result = image
            let stepX = mark.width + max(margin, 1), stepY = mark.height + max(margin, 1)
            for y in Swift.stride(from: margin, to: image.height, by: stepY) {
                for x in Swift.stride(from: margin, to: image.width, by: stepX) {
                    result.composite(mark, x: x, y: y, opacity: opacity)
                }
            }
            return result
        }
        let x = margin + Int((Double(room.width - mark.width) * focus.x).rounded(.down))
        let y = margin + Int((Double(room.height - mark.height) * focus.y).rounded(.down))
        return image.composited(mark, x: x, y: y, opacity: opacity)
    }
}
