import Foundation
import NIOCore
import NIOHTTP1
import Strata
import StrataService
import StrataConfiguration

extension ServiceFuzzing {
    /// What the `FuzzWarmPath` harness puts a connection's warm path in front of: an engine
    /// whose memory tier holds a variant for each of ``targets`` and ``iiifTargets``, and an
    /// encoded cache holding each `/images` variant as JPEG, WebP and PNG at the default quality
    /// and each IIIF image as it asks, with the ready-made heads the ordinary path would have
    /// made (the IIIF originals' sizes memoized). The encoded bodies are not images but markers naming the
    /// key, the variant's size and the format (``Marker``), so that the harness can tell which
    /// request an answer's bytes were made for. Built once (it blocks while the engine renders
    /// the variants); ``addHandlers(to:between:)`` sets a connection's pipeline up as
    /// ``WarmHTTP1Channel`` does on Hummingbird's.
    public final class WarmPath: Sendable {
        /// Targets whose variants memory holds (and the encoded cache in every format): a
        /// `fit`, a `fill` with a gravity, and a key with a directory and an escaped space.
        public static let targets = [
            "/images/a.jpg?w=32&h=24", "/images/a.jpg?w=16&h=16&mode=fill&gravity=north", "/images/dir/b%20c.png?w=20",
            "/images/secret/c.jpg?w=16",
        ]

        /// IIIF image requests whose encodings are cached: a region (3.0), a whole image with an
        /// escaped key as PNG (2.1), a centred square turned and made gray as WebP.
        public static let iiifTargets = [
            "/iiif/3/a.jpg/0,0,32,24/16,/0/default.jpg", "/iiif/2/dir%2Fb%20c.png/full/20,/0/default.png",
            "/iiif/3/a.jpg/square/24,/90/gray.webp", "/iiif/3/secret%2Fc.jpg/full/16,/0/default.jpg",
        ]

        /// Keys restricted by `iiif.auth.rules` (``restricted``): their encodings are cached (as
        /// an authorized request leaves them), and the warm path must never answer them.
        public static let restricted = "secret/*"

        /// The access gate of both endpoints: ``restricted`` needs a credential.
        public static let access: AccessGate = {
            var settings = IIIFAuthSettings()
            settings.key = "fuzz-key-0123456789abcdef"
            settings.services = ["staff": .init(name: "staff", profile: .active, label: "Staff")]
            settings.rules = [.init(pattern: restricted, service: "staff")]
            return AccessGate(settings)
        }()

        /// What an encoded body of this fixture says it is.
        public struct Marker: Sendable, Equatable {
            public var key: String
            public var format: String
            public var width: Int
            public var height: Int

            /// The marker `body` holds, or `nil` when it is not one.
            public init?(_ body: [UInt8]) {
                let lines = String(decoding: body, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
                guard lines.count == 6, lines[0] == "strata-fuzz", lines[1].hasPrefix("key="), lines[2].hasPrefix("format="),
                    let width = Int(lines[3].dropFirst("width=".count)), let height = Int(lines[4].dropFirst("height=".count))
                else { return nil }
                key = String(lines[1].dropFirst(4))
                format = String(lines[2].dropFirst(7))
                self.width = width
                self.height = height
            }

            package var body: String { "strata-fuzz\nkey=\(key)\nformat=\(format)\nwidth=\(width)\nheight=\(height)\n" }

            package init(key: String, format: String, size: PixelSize) {
                self.key = key
                self.format = format
                width = size.width
                height = size.height
            }
        }

        package let endpoint: ImageEndpoint
        package let iiif: IIIFEndpoint
        package let metrics: ServiceMetrics
        /// Shared by the connections of one event loop, as on a server.
        package let memos = PreparedTargetsByLoop(capacity: 64)

        /// Originals by key: small JPEG and PNG images.
        package struct Originals: ImageSource {
            package let images: [String: [UInt8]]

            package func fetch(key: String) async throws(SourceError) -> SourceData {
                guard let bytes = images[key] else { throw SourceError(key: key, reason: .notFound) }
                return SourceData(bytes: bytes, version: "1")
            }
        }

        /// Renders the variants of ``targets`` and fills the encoded cache (blocks the calling
        /// thread, which must not be one of Swift's cooperative pool).
        public init() {
            func original(_ width: Int, _ height: Int, _ format: ImageFormat) -> [UInt8] {
                var image = PixelImage(width: width, height: height)
                image.withUnsafeMutableBytes { raw in
                    for i in raw.indices { raw[i] = i % 4 == 3 ? 255 : UInt8(truncatingIfNeeded: i &* 29) }
                }
                return try! ImageEncoder.encode(image, as: format, quality: 90)
            }
            let source = Originals(images: [
                "a.jpg": original(64, 48, .jpeg), "dir/b c.png": original(40, 30, .png), "secret/c.jpg": original(48, 32, .jpeg),
            ])
            var options = ImageCache.Options()
            options.width = 1
            let cache = try! ImageCache(memory: ImageMemoryTier(), source: source, options: options)
            let settings = HTTPServiceSettings()
            let encoded = EncodedCache(costLimit: 1 << 20)
            let metrics = ServiceMetrics(node: "fuzz")
            self.metrics = metrics
            let responder = EncodedResponder(
                cache: cache, encoded: encoded, settings: settings, metrics: metrics, probes: ServiceProbes())
            var images = ImageEndpoint(cache: cache, encoded: encoded, settings: settings, signer: nil, responder: responder)
            images.access = Self.access
            endpoint = images
            var iiifSettings = IIIFSettings()
            iiifSettings.auth = Self.access.settings
            iiif = IIIFEndpoint(
                cache: cache, settings: iiifSettings, http: settings, originals: IIIFOriginals(), responder: responder, pyramids: nil)
            let endpoint = self.endpoint, iiif = self.iiif
            let done = DispatchSemaphore(value: 0)
            Task {
                for target in Self.targets {
                    let prepared = try! endpoint.prepare(target: Substring(target))
                    let served = try! await cache.image(for: prepared.request)
                    for format in [ResponseFormat.jpeg, .webp, .png] {
                        let key = endpoint.encodedKey(prepared.parameters, .srgb, served, format)
                        let body = ByteBuffer(
                            string: Marker(key: prepared.parameters.key, format: format.rawValue, size: served.image.size).body)
                        let fields = responder.fields(etag: key.etag, size: served.image.size, format: format)
                        encoded.insert(
                            EncodedImage(
                                body: body, format: format, etag: key.etag, size: served.image.size,
                                head: responder.warmHead(fields, length: body.readableBytes)),
                            for: key)
                    }
                }
                for target in Self.iiifTargets {
                    // The ordinary path's steps up to its encoded lookup, then its insertion.
                    guard case .image(let request) = try! IIIFRoute(path: Substring(target)) else { fatalError(target) }
                    let key = request.identifier.key
                    let original = try! await iiif.originals.original(for: key, cache: cache)
                    let region = try! request.region.resolve(in: original.size)
                    let output = try! request.size.resolve(region: region.size, limits: iiifSettings, version: request.version)
                    let served = try! await cache.image(
                        for: ImageRequest(
                            key: CacheKey(key), box: IIIFRendering.engineBox(original: original.size, region: region, output: output),
                            mode: .fit, upscaleTolerance: iiifSettings.upscaleTolerance))
                    let (encodedKey, _) = iiif.encoding(
                        request, variant: served.variant.descriptor, version: served.sourceVersion,
                        base: "http://fuzz\(request.version.prefix)\(request.identifier.raw)", region: region, original: original.size,
                        output: output, colour: .srgb, derivationPrefix: "")
                    let size = request.rotation.swapsSides ? PixelSize(width: output.height, height: output.width) : output
                    let format = request.format.responseFormat
                    let body = ByteBuffer(string: Marker(key: key, format: format.rawValue, size: size).body)
                    let fields = responder.fields(etag: encodedKey.etag, size: size, format: format)
                    encoded.insert(
                        EncodedImage(
                            body: body, format: format, etag: encodedKey.etag, size: size,
                            head: responder.warmHead(fields, length: body.readableBytes)),
                        for: encodedKey)
                }
                done.signal()
            }
            done.wait()
        }

        /// Sets `channel`'s pipeline up as a server connection's: NIO's HTTP/1 encoder and an
        /// unpaired request decoder as `strata serve` adds them
        /// (``WarmHTTP1Channel/addCodec(to:limits:)``, ``WarmPathOutput`` in front of the
        /// encoder), then `inbound` (the harness's recorder of what the decoder produced) and
        /// ``WarmPathHandler``. The caller adds what stands for Hummingbird behind it.
        public func addHandlers(to channel: any Channel, between inbound: any ChannelHandler) throws {
            let pipeline = channel.pipeline.syncOperations
            let output = try WarmHTTP1Channel.addCodec(to: pipeline, limits: .init())
            let warm = WarmPathHandler(
                endpoint: endpoint, iiif: iiif, metrics: metrics, targets: memos.memo(for: channel.eventLoop), handOff: PreparedHandOff())
            try pipeline.addHandler(inbound)
            try pipeline.addHandler(warm)
            warm.output = try pipeline.context(handler: output)
        }
    }
}
