import Foundation
import Strata

/// One configuration key: its dotted name, documented default, whether it follows a reload,
/// and what it means. ``StrataConfiguration/keys`` lists every key Strata reads; the README's
/// table is made from it (a test compares them), and nothing else is read.
public struct ConfigurationKey: Sendable, Hashable {
    /// Dotted name, as written in a file (`memory.costLimit` is `memory: { costLimit: … }`).
    public let name: String
    /// The value in force when no source gives one, in the same syntax (`nil`: unset).
    public let defaultValue: String?
    /// Whether a change in the configuration file takes effect without a restart.
    public let reloads: Bool
    /// A list (YAML sequence; comma-separated in the environment; repeated or space-separated
    /// on the command line).
    public let isList: Bool
    /// A list of named entries, each `name: value`: a file may also write it as a mapping of
    /// names to values (``ConfigurationFileSnapshot``).
    public let isNamed: Bool
    /// Shown as `<redacted>` by `strata config` and in logs.
    public let isSecret: Bool
    /// One line for the README.
    public let meaning: String

    package init(
        _ name: String, _ defaultValue: String?, reloads: Bool = false, list: Bool = false, named: Bool = false,
        secret: Bool = false, _ meaning: String
    ) {
        self.name = name
        self.defaultValue = defaultValue
        self.reloads = reloads
        self.isList = list || named
        self.isNamed = named
        self.isSecret = secret
        self.meaning = meaning
    }

    /// The key's path components (`["memory", "costLimit"]`).
    public var components: [String] { name.split(separator: ".").map(String.init) }

    /// The environment variable: `STRATA_` and the key in upper case, words split at dots and
    /// camel-case boundaries (`memory.costLimit` → `STRATA_MEMORY_COST_LIMIT`), the mapping of
    /// swift-configuration's `EnvironmentVariablesProvider` behind the `STRATA_` prefix.
    public var environmentVariable: String {
        "STRATA_" + components.map { Self.words(of: $0).map { $0.uppercased() }.joined(separator: "_") }.joined(separator: "_")
    }

    /// The command-line flag: `--memory-cost-limit` (swift-configuration's
    /// `CommandLineArgumentsProvider` mapping).
    public var commandLineFlag: String {
        "--" + components.map { Self.words(of: $0).map { $0.lowercased() }.joined(separator: "-") }.joined(separator: "-")
    }

    /// `costLimit` → `["cost", "Limit"]`, `baseURL` → `["base", "URL"]`.
    package static func words(of component: String) -> [String] {
        var words: [String] = []
        var current = ""
        var previous: Character?
        for character in component {
            if character.isUppercase, let previous, previous.isLowercase || previous.isNumber, !current.isEmpty {
                words.append(current)
                current = ""
            }
            current.append(character)
            previous = character
        }
        if !current.isEmpty { words.append(current) }
        return words
    }
}

extension StrataConfiguration {
    /// Every key Strata reads, in README order.
    public static let keys: [ConfigurationKey] = [
        .init(
            "tolerance", "0.2", reloads: true, "Size tolerance of requests that name none (0…1): a variant within it is served as it is."),
        .init("memory.costLimit", "256MiB", reloads: true, "Most bytes the memory tier's images pin."),
        .init("memory.countLimit", "10000", reloads: true, "Most images (variants) the memory tier holds."),
        .init("memory.entryShare", "0.1", reloads: true, "Largest share of `memory.costLimit` one image may cost (0…1)."),
        .init(
            "memory.fileMappingShare", "0", reloads: true,
            "Share of a file-mapped image's bytes charged to the memory tier (0…1; 0 = one page)."),
        .init("memory.pressure.enabled", "true", "Trim the memory tier on cgroup or PSI memory pressure."),
        .init("memory.pressure.cgroupHighWatermark", "0.9", "Trim when cgroup usage reaches this share of its limit (`off` to ignore)."),
        .init("memory.pressure.cgroupTarget", "0.8", "…down to this share of the cgroup limit."),
        .init("memory.pressure.someAvg10", "20", "Trim when PSI `some avg10` reaches this percentage (`off` to ignore)."),
        .init("memory.pressure.fullAvg10", "5", "Trim when PSI `full avg10` reaches this percentage (`off` to ignore)."),
        .init("memory.pressure.trimShare", "0.25", "Share of the memory tier's cost a PSI trim drops (0…1)."),
        .init("memory.pressure.interval", "1s", "Time between two pressure samples."),
        .init("disk.path", nil, "Directory of the disk tier (created if needed); unset: no disk tier."),
        .init("disk.byteLimit", "1GiB", reloads: true, "Most bytes of files in `disk.path` (least recently used are deleted first)."),
        .init("disk.checksum", "firstHit", "Pixel checksum checks on disk hits: `everyHit`, `firstHit` or `never`."),
        .init("disk.durable", "true", "`fsync` each file and the directory when publishing (survives power loss)."),
        .init("tables.path", nil, "Directory of the image tables; unset: no tables."),
        .init(
            "tables.formats", "", list: true,
            "Table formats, each `NAME FAMILY WxH [style=a|x|r|g] [mode=fill|fit] [max=N]` (style a, mode fill, max 1000 by default)."
        ),
        .init("lanes.urgent", "cores", reloads: true, "Urgent jobs (decode, resample, file reads) run at once; `cores` = one per core."),
        .init("lanes.prefetch", "1", reloads: true, "Prefetch jobs run at once (only while no urgent job waits)."),
        .init(
            "source.maxPixels", "100000000",
            "Originals with more pixels are refused from their header (`/images` serves them from their tile pyramid when `iiif.pyramidPath` is set)."
        ),
        .init(
            "source.maxFrames", "500",
            "Animated GIF and WebP originals with more frames are answered as a still (`frames=1`) only; asked animated, they are refused (413) from a scan that decodes no frame."
        ),
        .init(
            "source.maxAnimationPixels", "268435456",
            "Frames × canvas pixels (and a GIF's frame areas) an animated answer may decode at once (the default, 2²⁸, is 1 GiB of frames); past it, 413 as for `source.maxFrames`."
        ),
        .init("source.decodeHeadroom", "2", "How much larger than the target a shrink-on-load decode stays (≥ 1)."),
        .init(
            "source.resampleThreads", "2",
            "Threads one large resample may use (bands of rows, never more than the cores; `cores` = all); above 1 a progressive JPEG also decodes on two threads while a core is idle. 1 keeps each render on one thread."
        ),
        .init(
            "render.memoryLimit", "auto", reloads: true,
            "Most bytes renders and encodes in flight hold together: one that would pass it waits in its lane; one larger than all of it is refused naming the key (503). `auto`: 25 % of the container's memory limit, or of the machine's memory; `off`: no limit."
        ),
        .init(
            "process.allocator", "jemalloc",
            "`strata serve`'s general allocator: `jemalloc` (preloaded from Debian's libjemalloc2, its freed pages back to the kernel within a second) or `system` (glibc's malloc, whose arenas keep them)."
        ),
        .init(
            "render.bufferCacheSize", "64MiB", reloads: true,
            "Bytes of freed pixel buffers kept mapped for the next render (PixelMemory); beyond it, and after 10 s unused, they go back to the kernel."
        ),
        .init(
            "color.output", "srgb", reloads: true,
            "`srgb`: embedded ICC profiles are converted to sRGB (Little CMS); `original`: RGB pixels keep their profile's colours and every answer embeds it (gray and CMYK are still converted)."
        ),
        .init(
            "source.directory", nil,
            "Directory of originals (keys are paths below it); exclusive with `source.http.baseURL` and `source.s3.bucket`."),
        .init(
            "source.maxFileSize", "256MiB",
            "Larger files in `source.directory` are refused when they are read whole (an original is held in memory while it is decoded: 413). A tile pyramid's original is copied to disk and read from there instead, up to `iiif.maxSourceSize`."
        ),
        .init("source.http.baseURL", nil, "HTTP(S) origin of originals: the key's segments are appended, percent-encoded."),
        .init("source.http.connectTimeout", "5s", "Connecting to the origin."),
        .init("source.http.readTimeout", "15s", "Longest wait for the next bytes of a response."),
        .init("source.http.totalTimeout", "60s", "Longest time one original may take, retries included."),
        .init("source.http.maxBodySize", "256MiB", "Larger originals are aborted while streaming."),
        .init("source.http.maxRedirects", "3", "Redirects followed per request."),
        .init("source.http.allowCrossHostRedirects", "false", "Follow redirects to other hosts."),
        .init("source.http.maxConcurrentRequests", "16", "Requests in flight to the origin at once."),
        .init("source.http.retryBackoff", "200ms", "Pause before the first retry; doubled per retry, jittered."),
        .init("source.http.maxRetries", "1", "Retries of a 5xx, a broken connection or a timeout (never of a 4xx)."),
        .init(
            "source.http.rememberedVersions", "100000",
            "Keys whose last `ETag`/`Last-Modified` is kept for conditional revalidation (`If-None-Match`)."),
        .init(
            "source.http.headers", "", named: true, secret: true,
            "Headers sent with every origin request, each `Name: value` (e.g. an authorization token); redacted in output."),
        .init(
            "source.s3.bucket", nil,
            "S3-compatible bucket of originals (`photos`, or `s3://photos/prefix`); exclusive with `source.directory` and `source.http.baseURL`."
        ),
        .init("source.s3.prefix", "", "Folder of the bucket that keys are relative to."),
        .init("source.s3.region", "us-east-1", "The bucket's region (signed into every request)."),
        .init("source.s3.endpoint", nil, "The service's URL for MinIO, Ceph RGW, R2, GCS (`http(s)://host[:port]`); unset: AWS."),
        .init(
            "source.s3.addressing", "auto",
            "`path` (`endpoint/bucket/key`), `virtual` (`bucket.endpoint/key`), or `auto`: virtual on AWS for dot-less buckets, else path."
        ),
        .init("source.s3.accessKeyID", nil, "Access key id (not a secret: shown by `strata config`); unset: `AWS_ACCESS_KEY_ID`."),
        .init("source.s3.secretAccessKey", nil, secret: true, "Secret access key; unset: `AWS_SECRET_ACCESS_KEY`."),
        .init("source.s3.sessionToken", nil, secret: true, "Session token of temporary credentials; unset: `AWS_SESSION_TOKEN`."),
        .init("source.s3.connectTimeout", "5s", "Connecting to the store."),
        .init("source.s3.readTimeout", "15s", "Longest wait for the next bytes of a response."),
        .init("source.s3.totalTimeout", "60s", "Longest time one original may take, retries included."),
        .init("source.s3.maxBodySize", "256MiB", "Larger originals are refused (by `Content-Length`) or aborted while streaming."),
        .init("source.s3.maxConcurrentRequests", "32", "Requests in flight to the store at once."),
        .init("source.s3.maxRetries", "2", "Retries of a 5xx, a broken connection or a timeout (never of a 4xx)."),
        .init("source.s3.retryBackoff", "100ms", "Pause before the first retry; doubled per retry, jittered."),
        .init("source.s3.rememberedVersions", "100000", "Keys whose last `ETag` is kept for conditional revalidation."),
        .init(
            "revalidateAfter", "off",
            "Hits older than this are served and revalidated in the background (disk and table hits always: their age is not kept); `off`: never."
        ),
        .init("negativeTTL", "10s", "How long a key the source does not have is answered `not found` without asking again."),
        .init(
            "negativeCapacity", "16384",
            "The most missing keys remembered at once; past it the oldest is forgotten first (bounded memory under a flood of missing keys)."
        ),
        .init(
            "renderAhead", "off",
            "Zooming viewers: a hit further from its box than this share of the tolerance is served and the box rendered in the background; `off`: never."
        ),
        .init("http.host", "127.0.0.1", "`strata serve`: address to listen on (`0.0.0.0`: every interface)."),
        .init("http.port", "8080", "`strata serve`: TCP port (0: any free port)."),
        .init(
            "http.signingKey", nil, secret: true,
            "HMAC-SHA256 key image URLs must be signed with (`strata sign`); unset: any URL is served (a warning at start)."),
        .init(
            "http.signingKeys", "", named: true, secret: true,
            "More signing keys, each `id:secret`: a URL with `kid=ID` is checked with that key (`strata sign --key-id ID`), so keys rotate; `http.signingKey` checks URLs without `kid`."
        ),
        .init(
            "http.adminToken", nil, secret: true,
            "Bearer token of `DELETE /images/{key}` and `DELETE /iiif/{2|3}/{identifier}` (purge a key from every tier); unset: those routes answer 404."
        ),
        .init(
            "http.presets", "", reloads: true, named: true,
            "Named parameter sets of `/images`, each `name: parameters` (e.g. `thumb: w=256 h=256 mode=fill format=webp`), asked for as `?preset=thumb`; explicit parameters add to a preset (the same one with another value: 400). Checked at load by the query's parser."
        ),
        .init(
            "http.watermarks", "", reloads: true, named: true,
            "Watermark images of `/images?watermark=NAME`, each `name: file:PATH` or `name: KEY` (a key of the source, `source:KEY` too); loaded at start and on each reload (a file that cannot be read or decoded refuses the configuration), kept at most 2048 pixels a side."
        ),
        .init(
            "http.presetsOnly", "false", reloads: true,
            "`true`: `/images` answers `?preset=NAME` only (with `sig`, `kid`, `exp`; any other parameter: 400 listing the presets). IIIF routes are not restricted."
        ),
        .init("http.cacheControl", "public, max-age=86400", "`Cache-Control` of image responses (empty: none)."),
        .init("http.maxDimension", "4096", "Largest `w` or `h` a request may ask for (400 beyond)."),
        .init(
            "http.maxQueue", "64",
            "Most urgent jobs waiting; a request that needs work beyond it gets 503 + `Retry-After` (memory hits are still served)."),
        .init("http.retryAfter", "1s", "`Retry-After` of a shed request."),
        .init("http.encodedCacheSize", "64MiB", "Bytes of encoded JPEG/WebP/PNG/AVIF/JPEG XL kept for warm requests (0: off)."),
        .init("http.quality", "80", "Encoder quality when a request names none (JPEG, lossy WebP; 100: lossless WebP)."),
        .init(
            "http.avifQuality", "60",
            "AVIF encoder quality when a request names none (1…100, libavif's scale; 60: about JPEG 80's SSIM at half its bytes)."),
        .init(
            "http.avifSpeed", "7",
            "AVIF encoder speed, 0 (smallest files, slowest) … 10 (fastest); 7: about 0.2 s for a 1024 px photo on 2 cores; 9: 5× faster for 7 % more bytes."
        ),
        .init(
            "http.formats", "avif, jxl, webp, jpeg, png", list: true,
            "Formats of answers without `format=`, most preferred first: `avif`/`jxl`/`webp` when `Accept` names them, `jpeg` for opaque pixels (or any, without `png`), `png`; jpeg or png must be listed."
        ),
        .init(
            "http.nodeName", nil,
            "This node's name: the `X-Strata-Node` header of every response and the `node` label of `/stats` and `/metrics` (unset: the host name)."
        ),
        .init(
            "http.headerTimeout", "20s",
            "Longest time from a connection's accept, or the first byte of a request after an idle pause, to the end of the request's head (a slowloris is closed)."
        ),
        .init(
            "http.idleTimeout", "75s",
            "A keep-alive connection with no request for this long is closed; so is one whose responses do not drain (a client that never reads) or whose request body stalls."
        ),
        .init(
            "http.maxConnections", "10000",
            "Most connections open at once; one accepted beyond it is closed at once (warm clients already connected keep flowing)."
        ),
        .init("iiif.maxWidth", "4096", "IIIF Image API: widest image a request may produce (`maxWidth` in `info.json`; 400 beyond)."),
        .init("iiif.maxHeight", "4096", "IIIF Image API: tallest image a request may produce (`maxHeight`)."),
        .init("iiif.maxArea", "16777216", "IIIF Image API: most pixels a request may produce (`maxArea`)."),
        .init("iiif.tileSize", "512", "IIIF Image API: side of the square tiles `info.json` advertises."),
        .init(
            "iiif.upscaleTolerance", "0",
            "IIIF Image API: how much smaller than a tile's scale the variant it is cut from may be (0…1); 0: tiles are only reduced, never enlarged."
        ),
        .init(
            "iiif.pyramidPath", nil,
            "IIIF Image API: directory of the tile pyramids of big originals (one image table), which also serve `/images` requests of originals over `source.maxPixels`; unset: `DISK-pyramids` beside `disk.path` when a disk tier is set, else none; `off`: none (every image is cut from whole-image variants, up to `source.maxPixels`)."
        ),
        .init(
            "iiif.tiledAbove", "6000000",
            "IIIF Image API: originals with more pixels are served from a tile pyramid built in one streaming pass (with `iiif.pyramidPath`); smaller ones from whole-image variants, which `/images` shares."
        ),
        .init(
            "iiif.pyramidBytes", "8GiB",
            "IIIF Image API: most bytes of the pyramids' table (its hard limit; the least recently used tiles are reused first)."
        ),
        .init(
            "iiif.maxSourcePixels", "4000000000",
            "IIIF Image API: the largest original a pyramid is built from (its memory does not grow with the image)."
        ),
        .init(
            "iiif.maxSourceSize", "16GiB",
            "IIIF Image API: the largest original file a pyramid is built from (copied beside the pyramids while it builds, never held in memory: `source.maxFileSize` does not apply to it)."
        ),
        .init(
            "iiif.squareGravity", "center",
            "IIIF Image API: where the `square` region sits in a non-square image (`center`, `north`…`southwest`, `fp:X,Y` or `smart`, as `/images`' `gravity=`)."
        ),
        // `iiif.auth.*` (IIIFAuthSettings): IIIF Authorization Flow 2.0 (docs/HTTP.md, "Restricted images").
        .init(
            "iiif.auth.key", nil, secret: true,
            "HMAC-SHA256 key of the access cookies, tokens and login tickets of restricted images (at least 16 bytes; needed with `iiif.auth.rules`)."
        ),
        .init(
            "iiif.auth.services", "", named: true,
            "Access services, each `name: PROFILE [login=URL] [degraded=N] [label=TEXT]`: `active` (a login page at URL, or a click-through without one), `kiosk` or `external`; `degraded`: the long side served without a credential."
        ),
        .init(
            "iiif.auth.rules", "", list: true,
            "Restricted keys, each `PATTERN SERVICE` (an `fnmatch` pattern, `*` crossing `/`), the first match deciding: their images need the service's cookie or token on IIIF, `/images` and thumbor routes."
        ),
        .init("iiif.auth.lifetime", "1h", "How long an access cookie and an access token stay valid."),
        .init(
            "iiif.auth.origins", "", list: true,
            "Viewer origins (`https://viewer.example.org`) the token service gives tokens to; empty: pages of Strata's own host only."),
        .init(
            "iiif.auth.crossSite", "false",
            "`true`: cookies for viewers on another site (`SameSite=None; Secure`: Strata behind HTTPS); `false`: `SameSite=Lax`."),
        // `thumbor.*` (ThumborSettings): thumbor's URLs (docs/Thumbor.md).
        .init(
            "thumbor.enabled", "false", "Answer thumbor's URLs (`/unsafe/…` and `/SIGNATURE/…`, its filters included): see docs/Thumbor.md."
        ),
        .init("thumbor.prefix", "", "Path the thumbor route answers under (`/thumbor`); empty: the root, as thumbor."),
        .init(
            "thumbor.securityKey", nil, secret: true,
            "thumbor's `SECURITY_KEY`: URLs are signed with HMAC-SHA1 of their path (needed unless `thumbor.allowUnsafe`)."),
        .init("thumbor.allowUnsafe", "false", "thumbor's `ALLOW_UNSAFE_URL`: serve `/unsafe/…` URLs (no signature)."),
        .init(
            "thumbor.autoWebp", "false",
            "thumbor's `AUTO_WEBP`: answer WebP where `Accept` takes it and the URL names no format (`Vary: Accept`)."),
        .init("thumbor.quality", "80", "thumbor's `QUALITY`: JPEG and WebP quality when no `quality()` filter names one."),
        .init(
            "thumbor.urlPrefixes", "", list: true,
            "Full image URLs taken in place of keys (thumbor's HTTP loader): a URL starting with one of these (`https://img.example.com/`) is the rest as a key of the source; other URLs are refused."
        ),
        // `shared.*` (SharedTierSettings): the fleet's shared tier.
        .init(
            "shared.s3.bucket", nil,
            "The fleet's shared tier: an S3-compatible bucket (`renders`, or `s3://renders/prefix`) of decoded variants, asked after the local tiers and before a render; unset: none."
        ),
        .init("shared.s3.prefix", nil, "Folder of the bucket the shared tier uses (unset: `strata`)."),
        .init("shared.s3.region", "us-east-1", "The shared bucket's region."),
        .init("shared.s3.endpoint", nil, "The shared store's URL (MinIO, Ceph RGW, R2, GCS); unset: AWS."),
        .init("shared.s3.addressing", "auto", "`path`, `virtual` or `auto`, as `source.s3.addressing`."),
        .init("shared.s3.accessKeyID", nil, "Access key id of the shared bucket; unset: `AWS_ACCESS_KEY_ID`."),
        .init("shared.s3.secretAccessKey", nil, secret: true, "Secret access key; unset: `AWS_SECRET_ACCESS_KEY`."),
        .init("shared.s3.sessionToken", nil, secret: true, "Session token; unset: `AWS_SESSION_TOKEN`."),
        .init("shared.s3.maxConnections", "32", "Connections to the shared store at once."),
        .init(
            "shared.timeout", "500ms",
            "Longest wait for a shared lookup (its listing and its object together); past it the node renders as without the tier."),
        .init("shared.uploadTimeout", "10s", "Longest one upload (or one purge) to the shared store may take."),
        .init("shared.pause", "5s", "After 3 failures in a row the store is not asked for this long (then one request tries it)."),
        .init("shared.maxObjectSize", "64MiB", "Variants larger than this are neither uploaded nor read."),
        .init("shared.uploadQueueSize", "64MiB", "Bytes of rendered variants waiting for upload; more are dropped (counted)."),
        .init("shared.maxConcurrentUploads", "8", "Uploads in flight at once."),
        // `tracing.*` (TracingSettings).
        .init("tracing.enabled", "false", "`true`: spans of requests and of the engine's work, exported over OTLP/HTTP."),
        .init(
            "tracing.endpoint", "http://127.0.0.1:4318/v1/traces",
            "Where spans are sent: an OTLP/HTTP traces endpoint, the whole URL (path included)."),
        .init("tracing.protocol", "http/protobuf", "Body encoding of exported spans: `http/protobuf` or `http/json`."),
        .init(
            "tracing.samplingRatio", "1",
            "Share of traces sampled (0…1, by trace id); a request with a `traceparent` follows its caller's decision."),
        .init("tracing.serviceName", "strata", "`service.name` of the exported spans."),
        .init("tracing.includeKeys", "false", "`true`: spans carry the raw key (`strata.key`) beside its digest (`strata.key.digest`)."),
    ]

    /// The key named `name`, if Strata reads it.
    public static func key(named name: String) -> ConfigurationKey? { keys.first { $0.name == name } }
}

extension StrataConfiguration {
    /// The README's table of keys (`strata config --table` prints it): key, environment
    /// variable, default, whether it reloads, meaning.
    public static var markdownTable: String {
        var lines = [
            "| key | environment | default | reloads | meaning |",
            "|---|---|---|---|---|",
        ]
        for key in keys {
            let shownDefault = key.defaultValue.map { $0.isEmpty ? "(none)" : "`\($0)`" } ?? "(unset)"
            lines.append(
                "| `\(key.name)` | `\(key.environmentVariable)` | \(shownDefault) | \(key.reloads ? "yes" : "no") | "
                    + key.meaning.replacingOccurrences(of: "|", with: "\\|") + " |")
        }
        return lines.joined(separator: "\n")
    }
}
