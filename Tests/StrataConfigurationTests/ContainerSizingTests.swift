import Foundation
import Testing
@testable import Strata
@testable import StrataConfiguration

/// Defaults sized from a container's memory limit, and `render.memoryLimit`'s syntax.
@Suite
struct ContainerSizingTests {
    @Test("with a cgroup limit and no key set, the caches and the in-flight budget take their shares")
    func derivedFromTheLimit() async throws {
        let container = ContainerSizing(limit: 256 << 20)
        let configuration = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], container: container))
        #expect(configuration.memory.costLimit == 38 << 20)
        #expect(configuration.renderMemoryLimit == 64 << 20)
        #expect(configuration.http.encodedCacheCostLimit == 12 << 20)
        #expect(configuration.bufferCacheSize == 12 << 20)
        let cost = try #require(configuration.resolved.first { $0.key.name == "memory.costLimit" })
        #expect(cost.value == "38MiB")
        #expect("\(cost.origin)" == "derived: 15 % of the cgroup memory limit (256 MiB)")
        // Half the limit goes to what Strata bounds; the rest is the fixed overhead's.
        let shares = ContainerSizing.shares.map(\.share).reduce(0, +)
        #expect(abs(shares - 0.5) < 1e-9)
    }

    @Test("a key any source sets wins over the derived share")
    func sourcesWin() async throws {
        let container = ContainerSizing(limit: 1 << 30)
        let layers = try await ConfigurationLayers(
            environment: ["STRATA_MEMORY_COST_LIMIT": "300MiB"], container: container)
        let configuration = try StrataConfiguration(from: layers)
        #expect(configuration.memory.costLimit == 300 << 20)
        #expect(configuration.renderMemoryLimit == 256 << 20)
        let cost = try #require(configuration.resolved.first { $0.key.name == "memory.costLimit" })
        #expect("\(cost.origin)" == "environment STRATA_MEMORY_COST_LIMIT")
    }

    @Test("without a limit the documented defaults stay; render.memoryLimit auto is a quarter of the machine")
    func noContainer() async throws {
        let configuration = try StrataConfiguration(from: try await ConfigurationLayers(environment: [:], container: nil))
        #expect(configuration.memory.costLimit == 256 << 20)
        #expect(configuration.renderMemoryLimit == Processors.physicalMemory / 4)
        #expect(configuration.bufferCacheSize == 64 << 20)
        #expect(configuration.reloadableSettings.renderMemoryLimit == Processors.physicalMemory / 4)
    }

    @Test("render.memoryLimit: a size, off, or an error naming the key")
    func memoryLimitSyntax() async throws {
        func read(_ value: String) async throws -> StrataConfiguration {
            try StrataConfiguration(
                from: try await ConfigurationLayers(environment: ["STRATA_RENDER_MEMORY_LIMIT": value], container: nil))
        }
        #expect(try await read("96MiB").renderMemoryLimit == 96 << 20)
        #expect(try await read("off").renderMemoryLimit == nil)
        for bad in ["12KB", "lots", "-1"] {
            do {
                _ = try await read(bad)
                Issue.record("\(bad) was accepted")
            } catch let error as ConfigurationError {
                #expect(error.key == "render.memoryLimit", "\(error)")
                #expect(error.origin == "environment STRATA_RENDER_MEMORY_LIMIT")
            }
        }
    }

    @Test("the sensor reads a v1 memory cgroup: its working set and the tightest hierarchical limit")
    func v1Sensor() throws {
        let fm = FileManager.default
        let root = fm.temporaryDirectory.appendingPathComponent("strata-cg1-\(UUID().uuidString)").path
        defer { try? fm.removeItem(atPath: root) }
        try fm.createDirectory(atPath: root + "/memory/pod/app", withIntermediateDirectories: true)
        try "11:cpu,cpuacct:/pod/app\n6:memory:/pod/app\n1:name=systemd:/\n".write(
            toFile: root + "/self-cgroup", atomically: true, encoding: .utf8)
        try "9223372036854771712\n".write(toFile: root + "/memory/pod/app/memory.limit_in_bytes", atomically: true, encoding: .utf8)
        try "104857600\n".write(toFile: root + "/memory/pod/app/memory.usage_in_bytes", atomically: true, encoding: .utf8)
        try
            "cache 1000\nrss 2000\ntotal_inactive_file 4857600\nhierarchical_memory_limit 268435456\nhierarchical_memsw_limit 9223372036854771712\n"
            .write(
                toFile: root + "/memory/pod/app/memory.stat", atomically: true, encoding: .utf8)
        let sensor = MemoryPressureSensor(
            procSelfCgroup: root + "/self-cgroup", cgroupMounts: [root + "/no-v2"], cgroupV1Mounts: [root + "/memory"],
            pressureFile: root + "/none")
        // The working set: usage less the inactive page cache.
        #expect(sensor.read() == MemoryPressureReading(cgroupCurrent: 100_000_000, cgroupLimit: 268_435_456))
        #expect(ContainerSizing.detect(sensor: sensor) == ContainerSizing(limit: 256 << 20))
        // No limit anywhere: none derived.
        try "cache 1000\nhierarchical_memory_limit 9223372036854771712\n".write(
            toFile: root + "/memory/pod/app/memory.stat", atomically: true, encoding: .utf8)
        #expect(ContainerSizing.detect(sensor: sensor) == nil)
    }

    @Test("v2: the working set is memory.current less the inactive page cache")
    func v2WorkingSet() throws {
        let fm = FileManager.default
        let root = fm.temporaryDirectory.appendingPathComponent("strata-cg2-\(UUID().uuidString)").path
        defer { try? fm.removeItem(atPath: root) }
        try fm.createDirectory(atPath: root + "/cg/pod", withIntermediateDirectories: true)
        try "0::/pod\n".write(toFile: root + "/self-cgroup", atomically: true, encoding: .utf8)
        try "300000000\n".write(toFile: root + "/cg/pod/memory.current", atomically: true, encoding: .utf8)
        try "536870912\n".write(toFile: root + "/cg/pod/memory.max", atomically: true, encoding: .utf8)
        try "anon 100\nfile 250000000\nactive_file 50000000\ninactive_file 200000000\n".write(
            toFile: root + "/cg/pod/memory.stat", atomically: true, encoding: .utf8)
        let sensor = MemoryPressureSensor(
            procSelfCgroup: root + "/self-cgroup", cgroupMounts: [root + "/cg"], cgroupV1Mounts: [], pressureFile: root + "/none")
        #expect(sensor.read() == MemoryPressureReading(cgroupCurrent: 100_000_000, cgroupLimit: 536_870_912))
    }
}
