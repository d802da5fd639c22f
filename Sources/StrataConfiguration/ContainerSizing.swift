import Configuration
import Strata

/// Defaults sized from the container's memory limit: when the process's cgroup has one (v2
/// `memory.max` or v1 `memory.limit_in_bytes`, the tightest of its ancestors) and no source sets
/// these keys, each takes its share of the limit instead of its fixed default. `strata config`
/// names the limit and the share as the value's origin.
///
/// The shares (``shares``) give half the limit to what Strata's settings bound — the work in
/// flight a quarter (in a 256 MiB container, 64 MiB: a 100-megapixel pyramid pass or a 2048 px
/// render of a 24-megapixel baseline JPEG), the memory tier 15 %, the encoded answers and the
/// pixel-buffer cache 5 % each — and leave the other half for what they do not: the fixed
/// overhead (the runtime, threads, connections, the codecs' own buffers) and the page cache that
/// backs disk and table hits, which the kernel charges to the cgroup and reclaims under its limit.
public struct ContainerSizing: Sendable, Hashable {
    /// The cgroup's memory limit in bytes.
    public var limit: Int

    /// Each derived key and its share of the limit.
    public static let shares: [(key: String, share: Double)] = [
        ("memory.costLimit", 0.15), ("render.memoryLimit", 0.25), ("http.encodedCacheSize", 0.05),
        ("render.bufferCacheSize", 0.05),
    ]

    public init(limit: Int) { self.limit = limit }

    /// The limit of the cgroup this process runs in, `nil` when it has none.
    public static func detect(sensor: MemoryPressureSensor = .init()) -> ContainerSizing? {
        sensor.read().cgroupLimit.map(ContainerSizing.init(limit:))
    }

    /// The derived value of `key` (whole MiB), `nil` for a key not sized from the limit.
    public func value(of key: String) -> Int? {
        guard let share = Self.shares.first(where: { $0.key == key })?.share else { return nil }
        return (Int(Double(limit) * share) >> 20) << 20
    }

    /// The derived values as a configuration layer's values.
    package var values: [AbsoluteConfigKey: ConfigValue] {
        var values: [AbsoluteConfigKey: ConfigValue] = [:]
        for (name, _) in Self.shares {
            guard let key = StrataConfiguration.key(named: name), let bytes = value(of: name) else { continue }
            values[AbsoluteConfigKey(key.components)] = ConfigValue(.string("\(bytes >> 20)MiB"), isSecret: false)
        }
        return values
    }

    /// The origin `strata config` shows for `key`.
    package func origin(of key: ConfigurationKey) -> ConfigurationOrigin {
        let share = Self.shares.first { $0.key == key.name }?.share ?? 0
        return .container(limit: limit, share: share)
    }
}
