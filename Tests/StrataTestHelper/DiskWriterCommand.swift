import ArgumentParser
import Glibc
import Strata
import StrataTestSupport

/// `strata-test-helper disk-writer`: a child process for the disk tier's crash-consistency test,
/// killed with SIGKILL at random moments. Runs until killed (or for `--iterations` steps).
///
/// - `--role writer` stores test-pattern images (``TableTestPattern``: the pixels encode the
///   key number and the source version) of keys `k0…k<keys-1>` at a few sizes, half write-behind
///   and half with `storeSynchronously` on a durable tier; after each synchronous store returns
///   it appends `ack <n> <width> <height> <version>` to `--log`.
/// - `--role deleter` removes keys, stores with a small byte limit (so that its eviction deletes
///   other files) and now and then removes everything; it appends what it is about to delete to
///   `--log` *before* deleting it (`remove <n>`, `evict <file name>`, `all`) or replace (`store <n> <width> <height>`), so that the test
///   can tell an acknowledged store that this process deleted from one that was lost.
///
/// Both append `ready` once the tier is open. Each line is one `write`, so a kill leaves at most
/// one unterminated last line, which readers ignore.
struct DiskWriterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disk-writer",
        abstract: "Test helper: store and delete test-pattern images in a disk-tier directory."
    )

    enum Role: String, ExpressibleByArgument { case writer, deleter }

    @Option var directory: String
    @Option var role: Role = .writer
    @Option var log: String
    @Option var keys = 16
    @Option var seed: UInt64 = 1
    @Option var iterations = 0
    /// The deleter's byte limit (its stores evict down to it).
    @Option var byteLimit = 512 << 10

    /// The sizes every key is stored at; the last is above the tier's default map threshold, so
    /// hits of it are mappings.
    static let sizes = [PixelSize(width: 24, height: 16), PixelSize(width: 40, height: 25), PixelSize(width: 300, height: 240)]

    func run() throws {
        let logFile = Shared(try FileDescriptor(open: log, flags: O_WRONLY | O_CREAT | O_APPEND))
        @Sendable func append(_ line: String) {
            var bytes = Array((line + "\n").utf8)
            bytes.withUnsafeMutableBytes { raw in _ = try? logFile.resource.writeOnce(UnsafeRawBufferPointer(raw)) }
        }
        var configuration = DiskTier.Configuration()
        configuration.durable = true
        let tier = try DiskTier(directory: directory, configuration: configuration)
        if role == .deleter {
            var hooks = DiskTier.TestHooks()
            hooks.evictionBatchChosen = { victims in
                for victim in victims { append("evict \(victim.name.string)") }
            }
            tier.setTestHooks(hooks)
            // The limit once the hook logs evictions: the watcher evicts as soon as the files it
            // indexed (the writer's, earlier cycles') pass it, and a limit set at init could
            // evict before the hook was there, unlogged.
            try tier.setByteLimit(byteLimit)
        }
        append("ready")
        var rng = SplitMix64(seed: seed)
        var step = 0
        while iterations == 0 || step < iterations {
            step += 1
            let n = Int(rng.next() % UInt64(keys))
            let size = Self.sizes[Int(rng.next() % UInt64(Self.sizes.count))]
            // Versions grow with the seed (one per run) and the step: a later store has a
            // larger version.
            let version = seed << 32 | UInt64(step)
            switch role {
            case .writer:
                var image = PixelImage(width: size.width, height: size.height)
                TableTestPattern.draw(&image, n: n, version: version)
                if rng.next() % 2 == 0 {
                    tier.store(image, forKey: "k\(n)", sourceVersion: version)
                } else {
                    try tier.storeSynchronously(image, forKey: "k\(n)", sourceVersion: version)
                    append("ack \(n) \(size.width) \(size.height) \(version)")
                }
            case .deleter:
                switch rng.next() % 64 {
                case 0:
                    append("all")
                    try tier.removeAll()
                case 1..<24:
                    append("remove \(n)")
                    tier.remove(key: "k\(n)")
                default:
                    append("store \(n) \(size.width) \(size.height)")
                    var image = PixelImage(width: size.width, height: size.height)
                    TableTestPattern.draw(&image, n: n, version: version)
                    try tier.storeSynchronously(image, forKey: "k\(n)", sourceVersion: version)
                }
            }
        }
        tier.close()
    }
}
