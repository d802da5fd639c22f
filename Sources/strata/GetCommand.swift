import ArgumentParser
import Foundation
import Strata
import StrataConfiguration

/// `strata get KEY --size WxH [--mode fit|fill] [--tolerance T] [--source DIR] [--cache DIR] [--out PATH]
/// [--config FILE] [--KEY VALUE …]`
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Serve one request through the engine and print the tier that served it.",
        discussion: """
            The engine has a memory tier (empty: a new process), a disk tier in --cache DIR when \
            given, and a DirectorySource over --source DIR (default: the current directory; KEY is \
            a path relative to it). Prints one line: the serving tier (memory, disk, table or \
            source), the time ImageCache.image(for:) took, and the image size, e.g. \
            `source 23.4 ms 512x320`. A source render is written to the disk tier before the \
            command exits, so a second run with the same --cache prints `disk`. --out encodes the \
            image (.png, .webp, .jpg/.jpeg, .avif, .jxl by extension). On failure prints one line naming the \
            key and the reason and exits with status 1 (the image cannot be decoded) or 2 (not \
            found, cannot read or write a file, or the cache directory is unusable). The engine \
            is built from the configuration (--config FILE, STRATA_… variables, configuration \
            flags; see `strata config`): --source is source.directory, --cache is disk.path.
            """
    )

    @Argument(help: "The image's key: a path relative to --source.")
    var key: String

    @Option(help: "The bounding box, WxH.", transform: { try PixelSize.parseOption($0) })
    var size: PixelSize

    @Option(help: "fit (inside the box, default) or fill (cover the box and crop).")
    var mode: ContentMode = .fit

    @Option(
        help: "Where a fill crop sits: center (default), north…southwest, fp:X,Y (0…1) or smart.",
        transform: { text in
            guard let gravity = Gravity(parsing: text) else {
                throw ValidationError("--gravity: \(text) is not center, north…southwest, fp:X,Y or smart")
            }
            return gravity
        })
    var gravity: Gravity = .center

    @Option(help: "Size tolerance, 0...1 (default 0.2): a cached variant within it is served as it is.")
    var tolerance: Double?

    @Option(help: "Directory of originals (default: the current directory).")
    var source: String?

    @Option(help: "Disk tier directory (created if needed); without it the engine has no disk tier.")
    var cache: String?

    @Option(help: "Output file; its extension picks the format.")
    var out: String?

    @Option(help: "Encoder quality for JPEG and lossy WebP (1–100).")
    var quality: Int = 85

    @OptionGroup var configurationOptions: ConfigurationOptions

    func validate() throws {
        if let tolerance, !(0...1).contains(tolerance) { throw ValidationError("--tolerance must be within 0...1") }
        if gravity != .center && mode != .fill { throw ValidationError("--gravity places a crop: it needs --mode fill") }
        guard (1...100).contains(quality) else { throw ValidationError("--quality must be 1…100") }
        if let out, OutputFormat(path: out) == nil {
            throw ValidationError("--out must end in .png, .webp, .jpg, .jpeg, .avif or .jxl")
        }
    }

    func run() async throws {
        var overrides: [String: ConfigurationRawValue] = [:]
        if let source { overrides["source.directory"] = .scalar(source) }
        if let cache { overrides["disk.path"] = .scalar(cache) }
        var (_, configuration) = await configurationOptions.load(overrides: overrides)
        if configuration.source == .none {
            configuration.source = .directory(FileManager.default.currentDirectoryPath)
        }
        configuration.disk.useInotify = false  // one request: nothing to watch
        let configured: ConfiguredImageCache
        do {
            configured = try ConfiguredImageCache(configuration)
        } catch {
            fail("\(key): \(error)", code: 2)
        }
        let engine = configured.cache
        let request = ImageRequest(
            key: CacheKey(key, colour: configuration.colourOutput, gravity: gravity), box: size, mode: mode, tolerance: tolerance)
        let started = ContinuousClock.now
        let served: CachedImage
        do {
            served = try await engine.image(for: request)
        } catch {
            await configured.shutdown()
            if case .decoding = error { fail(Self.oneLine(error.description), code: 1) }
            fail(Self.oneLine(error.description), code: 2)
        }
        let elapsed = ContinuousClock.now - started
        // The source's answer was queued for the disk tier (write-behind): publish it now, and
        // stop what the engine started (the pressure monitor, an HTTP origin's client).
        await configured.shutdown()
        if let out, let format = OutputFormat(path: out) {
            do {
                let encoded = try ImageEncoder.encode(served.image, as: format.imageFormat, quality: quality)
                try writeAtomically(encoded, to: out)
            } catch let error as SystemCallError {
                fail("\(key): \(out): cannot write: \(error.reason)", code: 2)
            } catch {
                fail("\(key): \(out): \(error)", code: 1)
            }
        }
        let ms = Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) / 1e15
        print("\(served.tier) \(String(format: ms < 10 ? "%.2f" : "%.1f", ms)) ms \(served.image.width)x\(served.image.height)")
    }

    /// `text` on one line (a decoder's message may carry a newline).
    static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}
