import StrataBase
import StrataTiers
/// The settings an engine changes while it serves (a configuration reload): nothing is
/// restarted, no cached image is lost beyond what a lower limit evicts.
public struct ReloadableSettings: Sendable, Hashable {
    /// ``ImageCache/defaultTolerance``.
    public var tolerance: Double
    /// Urgent and prefetch jobs that run at once (``/StrataBase/BlockingPool/setWidths(urgent:prefetch:)``).
    public var urgentWidth: Int
    public var prefetchWidth: Int
    /// The memory tier's limits (ignored without a memory tier).
    public var memory: ImageMemoryTier.Configuration?
    /// The disk tier's byte limit (ignored without a disk tier).
    public var diskByteLimit: Int?
    /// ``ImageCache/Options/memoryLimit`` (`nil`: no limit).
    public var renderMemoryLimit: Int?

    public init(
        tolerance: Double, urgentWidth: Int, prefetchWidth: Int, memory: ImageMemoryTier.Configuration? = nil,
        diskByteLimit: Int? = nil, renderMemoryLimit: Int? = nil
    ) {
        self.tolerance = tolerance
        self.urgentWidth = urgentWidth
        self.prefetchWidth = prefetchWidth
        self.memory = memory
        self.diskByteLimit = diskByteLimit
        self.renderMemoryLimit = renderMemoryLimit
    }

    /// Checks every value; throws a ``/StrataBase/ConfigurationError`` with the dotted key of the first bad
    /// one (`tolerance`, `lanes.urgent`, `lanes.prefetch`, `memory.…`, `disk.byteLimit`).
    public func validate() throws(ConfigurationError) {
        try SizeQuery.validate(tolerance: tolerance)
        if urgentWidth < 1 { throw .init(key: "lanes.urgent", value: "\(urgentWidth)", reason: "must be ≥ 1 thread") }
        if prefetchWidth < 1 { throw .init(key: "lanes.prefetch", value: "\(prefetchWidth)", reason: "must be ≥ 1 thread") }
        do { try memory?.validate() } catch { throw error.prefixed("memory.") }
        if let diskByteLimit, diskByteLimit <= 0 {
            throw .init(key: "disk.byteLimit", value: "\(diskByteLimit)", reason: "must be > 0 bytes")
        }
        if let renderMemoryLimit, renderMemoryLimit < 1 << 20 {
            throw .init(key: "render.memoryLimit", value: "\(renderMemoryLimit)", reason: "must be ≥ 1 MiB")
        }
    }
}

extension ImageCache {
    /// The reloadable settings in force now.
    public var reloadableSettings: ReloadableSettings {
        let widths = pool.widths
        return ReloadableSettings(
            tolerance: defaultTolerance, urgentWidth: widths.urgent, prefetchWidth: widths.prefetch,
            memory: memory?.configuration, diskByteLimit: disk?.byteLimit,
            renderMemoryLimit: memoryBudget.limit == .max ? nil : memoryBudget.limit)
    }

    /// Applies `settings` while the engine serves: the tolerance of the next request, the
    /// lanes' widths (threads are started as needed; running work is not interrupted), the
    /// memory limits (evicting at once when lower) and the disk byte limit (a lower one deletes
    /// files on the engine's threads, just after this returns). All values are checked first: on an error
    /// nothing changes.
    public func reconfigure(_ settings: ReloadableSettings) throws(ConfigurationError) {
        try settings.validate()
        do {
            try pool.setWidths(urgent: settings.urgentWidth, prefetch: settings.prefetchWidth)
        } catch {
            throw error.prefixed("lanes.")
        }
        if let memory, let limits = settings.memory, limits != memory.configuration {
            do { try memory.reconfigure(limits) } catch { throw error.prefixed("memory.") }
        }
        if let disk, let limit = settings.diskByteLimit, limit != disk.byteLimit {
            // A lower limit deletes files: blocking work, on the engine's threads (the limit
            // itself was checked above, so the job cannot fail).
            do {
                try pool.submit(lane: .urgent) { _ in try? disk.setByteLimit(limit) }
            } catch {
                try? disk.setByteLimit(limit)  // shut down: no threads left to hand it to
            }
        }
        memoryBudget.limit = settings.renderMemoryLimit ?? .max
        // Last: a request that sees the new tolerance finds the new lanes and memory limits in
        // force too (the disk's lower limit is applied by the job just queued).
        toleranceBits.store(settings.tolerance.bitPattern, ordering: .releasing)
        options.logger.info(
            "engine reconfigured",
            metadata: [
                "tolerance": "\(settings.tolerance)", "lanes.urgent": "\(settings.urgentWidth)",
                "lanes.prefetch": "\(settings.prefetchWidth)",
            ])
    }
}
