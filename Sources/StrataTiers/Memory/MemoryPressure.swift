import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One sample of the Linux memory signals the memory tier reacts to. `nil` = not available.
public struct MemoryPressureReading: Sendable, Hashable {
    /// Bytes charged to the process's cgroup that it cannot easily give back: v2 `memory.current`
    /// (v1 `memory.usage_in_bytes`) less the inactive file pages of `memory.stat`, the working set
    /// as Kubernetes counts it (clean page cache the kernel drops first under the limit).
    public var cgroupCurrent: Int?
    /// The tightest `memory.max` of the cgroup and its ancestors; `nil` when unlimited.
    public var cgroupLimit: Int?
    /// `/proc/pressure/memory` "some avg10": % of the last 10 s in which some task stalled on memory.
    public var someAvg10: Double?
    /// `/proc/pressure/memory` "full avg10": % of the last 10 s in which all tasks stalled.
    public var fullAvg10: Double?

    public init(cgroupCurrent: Int? = nil, cgroupLimit: Int? = nil, someAvg10: Double? = nil, fullAvg10: Double? = nil) {
        self.cgroupCurrent = cgroupCurrent
        self.cgroupLimit = cgroupLimit
        self.someAvg10 = someAvg10
        self.fullAvg10 = fullAvg10
    }
}

/// When and how much to trim under memory pressure. Pure decision logic: testable with
/// injected readings.
///
/// - cgroup: when usage reaches `cgroupHighWatermark × limit`, trim the cache by the excess
///   over `cgroupTargetFraction × limit` (never below zero).
/// - PSI: when "some avg10" reaches `someAvg10Threshold` or "full avg10" reaches
///   `fullAvg10Threshold`, trim the cache to `(1 − psiTrimShare)` of its current cost.
/// The larger of the two trims wins. A `nil` threshold turns that signal off.
public struct MemoryPressurePolicy: Sendable, Hashable {
    public var cgroupHighWatermark: Double?
    public var cgroupTargetFraction: Double
    public var someAvg10Threshold: Double?
    public var fullAvg10Threshold: Double?
    public var psiTrimShare: Double
    /// Time between two samples.
    public var interval: Duration

    public init(
        cgroupHighWatermark: Double? = 0.90, cgroupTargetFraction: Double = 0.80,
        someAvg10Threshold: Double? = 20, fullAvg10Threshold: Double? = 5,
        psiTrimShare: Double = 0.25, interval: Duration = .seconds(1)
    ) {
        self.cgroupHighWatermark = cgroupHighWatermark
        self.cgroupTargetFraction = cgroupTargetFraction
        self.someAvg10Threshold = someAvg10Threshold
        self.fullAvg10Threshold = fullAvg10Threshold
        self.psiTrimShare = psiTrimShare
        self.interval = interval
    }

    /// Checks the values; throws a ``/StrataBase/ConfigurationError`` naming the bad one.
    public func validate() throws(ConfigurationError) {
        if let high = cgroupHighWatermark, !(high > 0 && high <= 1) {
            throw .init(key: "cgroupHighWatermark", value: "\(high)", reason: "must be within (0, 1]")
        }
        if !(cgroupTargetFraction >= 0 && cgroupTargetFraction <= (cgroupHighWatermark ?? 1)) {
            throw .init(
                key: "cgroupTargetFraction", value: "\(cgroupTargetFraction)",
                reason: "must be within 0...cgroupHighWatermark (\(cgroupHighWatermark ?? 1))")
        }
        for (key, threshold) in [("someAvg10Threshold", someAvg10Threshold), ("fullAvg10Threshold", fullAvg10Threshold)] {
            if let threshold, !(threshold >= 0 && threshold <= 100) {
                throw .init(key: key, value: "\(threshold)", reason: "must be a percentage within 0...100")
            }
        }
        if !(psiTrimShare >= 0 && psiTrimShare <= 1) {
            throw .init(key: "psiTrimShare", value: "\(psiTrimShare)", reason: "must be within 0...1")
        }
        if interval <= .zero { throw .init(key: "interval", value: "\(interval)", reason: "must be a positive duration") }
    }

    /// The cost the cache should be trimmed to for `reading`, or `nil` to leave it alone.
    public func trimTarget(for reading: MemoryPressureReading, cacheCost: Int) -> Int? {
        var target: Int?
        if let high = cgroupHighWatermark, let current = reading.cgroupCurrent, let limit = reading.cgroupLimit,
            limit > 0, Double(current) >= high * Double(limit)
        {
            let excess = current - cacheShare(of: limit, cgroupTargetFraction)
            target = Swift.max(0, cacheCost - excess)
        }
        let psiHit =
            (someAvg10Threshold.map { t in reading.someAvg10.map { $0 >= t } ?? false } ?? false)
            || (fullAvg10Threshold.map { t in reading.fullAvg10.map { $0 >= t } ?? false } ?? false)
        if psiHit {
            let psiTarget = cacheShare(of: cacheCost, 1 - psiTrimShare)
            target = Swift.min(target ?? psiTarget, psiTarget)
        }
        guard let target, target < cacheCost else { return nil }
        return target
    }
}

/// Reads ``MemoryPressureReading``s from cgroup (v2, or v1's memory controller) and PSI files.
/// Paths are injectable so tests can point it at a fake tree; missing files give `nil` fields
/// (the signal is off).
public struct MemoryPressureSensor: Sendable {
    /// `/proc/self/cgroup` (its `0::<path>` line names the process's v2 cgroup).
    public var procSelfCgroup: String
    /// Where the v2 hierarchy may be mounted, tried in order (`/sys/fs/cgroup`, then the hybrid
    /// layout's `/sys/fs/cgroup/unified`).
    public var cgroupMounts: [String]
    /// Where v1's memory controller may be mounted, tried when there is no v2 memory cgroup.
    public var cgroupV1Mounts: [String]
    /// `/proc/pressure/memory`.
    public var pressureFile: String

    public init(
        procSelfCgroup: String = "/proc/self/cgroup",
        cgroupMounts: [String] = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"],
        cgroupV1Mounts: [String] = ["/sys/fs/cgroup/memory"],
        pressureFile: String = "/proc/pressure/memory"
    ) {
        self.procSelfCgroup = procSelfCgroup
        self.cgroupMounts = cgroupMounts
        self.cgroupV1Mounts = cgroupV1Mounts
        self.pressureFile = pressureFile
    }

    /// v1 reports "no limit" as a huge number (the largest page-aligned `Int64`): anything from
    /// 2^60 bytes on is no limit.
    private static let v1Unlimited = 1 << 60

    /// Takes one sample (a few small file reads).
    public func read() -> MemoryPressureReading {
        var reading = MemoryPressureReading()
        if let (dir, mount) = cgroupDirectory() {
            reading.cgroupCurrent = Self.readText(dir + "/memory.current").flatMap { Int($0.trimmed) }
                .map { $0 - Self.statValue("inactive_file", in: Self.readText(dir + "/memory.stat")) }
            // The effective limit is the tightest of this cgroup and its ancestors.
            var path = dir
            while path.count >= mount.count {
                if let text = Self.readText(path + "/memory.max")?.trimmed, let value = Int(text) {
                    reading.cgroupLimit = Swift.min(reading.cgroupLimit ?? .max, value)
                }
                guard path != mount, let slash = path.lastIndex(of: "/") else { break }
                path = String(path[..<slash])
            }
        } else if let dir = cgroupV1Directory() {
            let stat = Self.readText(dir + "/memory.stat")
            reading.cgroupCurrent = Self.readText(dir + "/memory.usage_in_bytes").flatMap { Int($0.trimmed) }
                .map { $0 - Self.statValue("total_inactive_file", in: stat) }
            // `hierarchical_memory_limit` is already the tightest of the group and its ancestors.
            let hierarchical = stat.flatMap { Self.statField("hierarchical_memory_limit", in: $0) }
            let own = Self.readText(dir + "/memory.limit_in_bytes").flatMap { Int($0.trimmed) }
            if let limit = [hierarchical, own].compactMap({ $0 }).min(), limit < Self.v1Unlimited {
                reading.cgroupLimit = limit
            }
        }
        if let text = Self.readText(pressureFile) {
            let psi = Self.parsePressure(text)
            reading.someAvg10 = psi.some
            reading.fullAvg10 = psi.full
        }
        return reading
    }

    /// The directory of this process's v2 cgroup and the mount it is under, if `memory.current`
    /// exists there.
    package func cgroupDirectory() -> (String, String)? {
        guard let text = Self.readText(procSelfCgroup) else { return nil }
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("0::") }) else { return nil }
        var relative = String(line.dropFirst(3))
        if relative == "/" { relative = "" }
        for mount in cgroupMounts {
            let dir = mount + relative
            if access(dir + "/memory.current", R_OK) == 0 { return (dir, mount) }
        }
        return nil
    }

    /// The directory of this process's v1 memory cgroup (its `N:memory:<path>` line under a
    /// mount of the controller; the mount itself when the path is not visible there, as in a
    /// container without a cgroup namespace), if `memory.limit_in_bytes` exists there.
    package func cgroupV1Directory() -> String? {
        guard let text = Self.readText(procSelfCgroup) else { return nil }
        let line = text.split(separator: "\n").first { line in
            let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
            return fields.count == 3 && fields[1].split(separator: ",").contains("memory")
        }
        guard let line else { return nil }
        var relative = String(line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)[2])
        if relative == "/" { relative = "" }
        for mount in cgroupV1Mounts {
            for dir in [mount + relative, mount] where access(dir + "/memory.limit_in_bytes", R_OK) == 0 {
                return dir
            }
        }
        return nil
    }

    /// The value of a `name value` line of a `memory.stat` text, `nil` when absent.
    package static func statField(_ name: String, in text: String) -> Int? {
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            if fields.count == 2, fields[0] == name { return Int(fields[1]) }
        }
        return nil
    }

    /// ``statField(_:in:)`` of a text that may be missing, 0 when absent.
    private static func statValue(_ name: String, in text: String?) -> Int {
        text.flatMap { statField(name, in: $0) } ?? 0
    }

    /// Parses the "some avg10=…" and "full avg10=…" lines of a PSI file.
    public static func parsePressure(_ text: String) -> (some: Double?, full: Double?) {
        var some: Double?, full: Double?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let kind = fields.first,
                let avg = fields.first(where: { $0.hasPrefix("avg10=") }),
                let value = Double(avg.dropFirst(6))
            else { continue }
            if kind == "some" { some = value } else if kind == "full" { full = value }
        }
        return (some, full)
    }

    /// Reads a small text file whole, or `nil` if it cannot be read.
    package static func readText(_ path: String) -> String? {
        guard let fd = try? FileDescriptor(open: path, flags: O_RDONLY),
            let bytes = try? fd.readAll()
        else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension String {
    fileprivate var trimmed: String {
        var s = Substring(self)
        while let c = s.last, c.isWhitespace { s = s.dropLast() }
        while let c = s.first, c.isWhitespace { s = s.dropFirst() }
        return String(s)
    }
}
