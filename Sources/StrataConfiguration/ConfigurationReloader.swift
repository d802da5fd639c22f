import Logging
import ServiceLifecycle
import Strata

/// Applies configuration-file changes to a running engine, without a restart.
///
/// Run it as a service beside ``ConfigurationLayers/fileProvider`` (the provider polls the file
/// and re-reads it on `SIGHUP`; this one watches the provider's snapshots). On each change the
/// whole configuration is read again from every source and checked:
/// - valid (including `check`, the service's own checks, such as its presets' parameters):
///   the reloadable settings (tolerance, memory limits, disk byte limit, lane widths)
///   are applied with ``ImageCache/reconfigure(_:)``, then `onApply` gets the whole
///   configuration (`strata serve` applies `color.output` there); other keys that changed are logged as
///   needing a restart;
/// - invalid: the error is logged with its key, value and origin, and every value in force
///   stays as it was.
public final class ConfigurationReloader: Service, Sendable {
    package let layers: ConfigurationLayers
    package let engine: ImageCache
    package let logger: Logger
    /// The configuration in force (the last one applied).
    package let applied: Lock<StrataConfiguration>
    package let counts = Lock<(applied: Int, refused: Int)>((0, 0))
    /// Called with each configuration applied, after the engine's settings (the service's own
    /// reloadable settings, such as `color.output`).
    package let onApply: (@Sendable (StrataConfiguration) -> Void)?
    /// Checks a read configuration further before anything is applied (`strata serve`: its
    /// presets, parsed as `/images` parameters); an error refuses the reload.
    package let check: (@Sendable (StrataConfiguration) throws(ConfigurationError) -> Void)?

    public init(
        layers: ConfigurationLayers, engine: ImageCache, initial: StrataConfiguration, logger: Logger = Logger(label: "strata.config"),
        check: (@Sendable (StrataConfiguration) throws(ConfigurationError) -> Void)? = nil,
        onApply: (@Sendable (StrataConfiguration) -> Void)? = nil
    ) {
        self.layers = layers
        self.engine = engine
        self.check = check
        self.onApply = onApply
        self.logger = logger
        self.applied = Lock(initial)
    }

    /// Reloads applied and reloads refused since the start.
    public var reloads: (applied: Int, refused: Int) { counts.withLock { $0 } }

    /// The configuration in force.
    public var current: StrataConfiguration { applied.withLock { $0 } }

    /// Watches the file until the task is cancelled or a graceful shutdown begins; returns at
    /// once when there is no file.
    public func run() async throws {
        guard let provider = layers.fileProvider else { return }
        try await provider.watchSnapshot { updates in
            for await _ in updates.cancelOnGracefulShutdown() {
                reload()
            }
        }
    }

    /// Reads every source again and applies what changed (see the type's discussion). Returns
    /// the error that refused the reload, if any.
    @discardableResult
    public func reload() -> ConfigurationError? {
        let next: StrataConfiguration
        do {
            next = try StrataConfiguration(from: layers)
            try check?(next)
            try engine.reconfigure(next.reloadableSettings)
            PixelMemory.shared.cacheLimit = next.bufferCacheSize
        } catch {
            // Logged first, counted after: whoever sees the count sees the log line too.
            logger.error(
                "configuration reload refused; the values in force stay",
                metadata: [
                    "key": "\(error.key)", "value": "\(error.value ?? "")", "origin": "\(error.origin ?? "")", "reason": "\(error.reason)",
                ])
            counts.withLock { $0.refused += 1 }
            return error
        }
        onApply?(next)
        let previous = applied.withLock { state in
            defer { state = next }
            return state
        }
        let old = Dictionary(previous.resolved.map { ($0.key.name, $0.value) }, uniquingKeysWith: { a, _ in a })
        let restartNeeded = next.resolved.filter { !$0.key.reloads && old[$0.key.name] != $0.value }.map(\.key.name)
        if !restartNeeded.isEmpty {
            logger.warning(
                "configuration keys changed that take effect only after a restart",
                metadata: ["keys": "\(restartNeeded.joined(separator: ", "))"])
        }
        counts.withLock { $0.applied += 1 }
        return nil
    }
}
