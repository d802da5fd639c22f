#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import Strata
import StrataTestSupport

@Suite("MemoryPressure")
struct MemoryPressureTests {
    let policy = MemoryPressurePolicy(
        cgroupHighWatermark: 0.9, cgroupTargetFraction: 0.8,
        someAvg10Threshold: 20, fullAvg10Threshold: 5, psiTrimShare: 0.25)

    @Test("cgroup: below the watermark nothing, above it trim by the excess over the target")
    func cgroupDecision() {
        let limit = 1_000_000
        #expect(policy.trimTarget(for: .init(cgroupCurrent: 899_999, cgroupLimit: limit), cacheCost: 500_000) == nil)
        // 950 000 used, target 800 000: free 150 000 of the cache's 500 000.
        #expect(policy.trimTarget(for: .init(cgroupCurrent: 950_000, cgroupLimit: limit), cacheCost: 500_000) == 350_000)
        // More excess than the cache holds: empty it.
        #expect(policy.trimTarget(for: .init(cgroupCurrent: 990_000, cgroupLimit: limit), cacheCost: 100_000) == 0)
        // No limit ("max") or no reading: off.
        #expect(policy.trimTarget(for: .init(cgroupCurrent: 950_000, cgroupLimit: nil), cacheCost: 500_000) == nil)
        #expect(policy.trimTarget(for: .init(), cacheCost: 500_000) == nil)
        // An empty cache has nothing to trim.
        #expect(policy.trimTarget(for: .init(cgroupCurrent: 950_000, cgroupLimit: limit), cacheCost: 0) == nil)
    }

    @Test("PSI: a stall share at the threshold trims a quarter; the larger trim wins")
    func psiDecision() {
        #expect(policy.trimTarget(for: .init(someAvg10: 19.9, fullAvg10: 4.9), cacheCost: 1_000) == nil)
        #expect(policy.trimTarget(for: .init(someAvg10: 20, fullAvg10: 0), cacheCost: 1_000) == 750)
        #expect(policy.trimTarget(for: .init(someAvg10: 0, fullAvg10: 5), cacheCost: 1_000) == 750)
        let both = MemoryPressureReading(cgroupCurrent: 905, cgroupLimit: 1_000, someAvg10: 50)
        #expect(policy.trimTarget(for: both, cacheCost: 1_000) == 750)  // cgroup alone: 895
        let off = MemoryPressurePolicy(cgroupHighWatermark: nil, someAvg10Threshold: nil, fullAvg10Threshold: nil)
        #expect(off.trimTarget(for: both, cacheCost: 1_000) == nil)
    }

    @Test("poll trims the target to the decided cost")
    func pollTrims() {
        let cache = MemoryCache<Int, Int>(costLimit: 10_000, maxEntryShare: 0.1)
        for k in 0..<100 { cache.insert(k, forKey: k, cost: 100) }
        #expect(!MemoryPressureMonitor.poll(target: cache, policy: policy, reading: .init(someAvg10: 1)))
        #expect(cache.totalCost == 10_000)
        #expect(MemoryPressureMonitor.poll(target: cache, policy: policy, reading: .init(someAvg10: 30)))
        #expect(cache.totalCost <= 7_500)
    }

    func fakeTree() throws -> String {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("strata-psi-\(UUID().uuidString)").path
        let fm = FileManager.default
        try fm.createDirectory(atPath: root + "/cg/a/b", withIntermediateDirectories: true)
        try "12:memory:/legacy\n0::/a/b\n".write(toFile: root + "/self-cgroup", atomically: true, encoding: .utf8)
        try "734003200\n".write(toFile: root + "/cg/a/b/memory.current", atomically: true, encoding: .utf8)
        try "max\n".write(toFile: root + "/cg/a/b/memory.max", atomically: true, encoding: .utf8)
        try "1073741824\n".write(toFile: root + "/cg/a/memory.max", atomically: true, encoding: .utf8)
        try "some avg10=12.50 avg60=3.00 avg300=1.00 total=123\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=9\n"
            .write(toFile: root + "/pressure", atomically: true, encoding: .utf8)
        return root
    }

    @Test("the sensor reads the process's cgroup, the tightest ancestor limit and PSI")
    func sensorReadsFiles() throws {
        let root = try fakeTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sensor = MemoryPressureSensor(
            procSelfCgroup: root + "/self-cgroup", cgroupMounts: [root + "/nowhere", root + "/cg"],
            pressureFile: root + "/pressure")
        let reading = sensor.read()
        #expect(
            reading
                == MemoryPressureReading(
                    cgroupCurrent: 734_003_200, cgroupLimit: 1_073_741_824,
                    someAvg10: 12.5, fullAvg10: 0.75))
    }

    @Test("absent files turn the signals, and the monitor, off")
    func absentFiles() {
        let sensor = MemoryPressureSensor(
            procSelfCgroup: "/nonexistent/cgroup", cgroupMounts: ["/nonexistent"],
            pressureFile: "/nonexistent/pressure")
        #expect(sensor.read() == MemoryPressureReading())
        let cache = MemoryCache<Int, Int>(costLimit: 100)
        let monitor = MemoryPressureMonitor(target: cache, sensor: sensor)
        #expect(!monitor.isActive)
    }

    @Test("a running monitor trims when its injected files say so, and stops")
    func monitorThread() async throws {
        let root = try fakeTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sensor = MemoryPressureSensor(
            procSelfCgroup: root + "/self-cgroup", cgroupMounts: [root + "/cg"],
            pressureFile: root + "/pressure")
        let cache = MemoryCache<Int, Int>(costLimit: 10_000)
        for k in 0..<100 { cache.insert(k, forKey: k, cost: 100) }
        let monitor = MemoryPressureMonitor(
            target: cache,
            policy: MemoryPressurePolicy(
                cgroupHighWatermark: nil, someAvg10Threshold: 10, psiTrimShare: 0.5,
                interval: .milliseconds(10)),
            sensor: sensor)
        #expect(monitor.isActive)
        #expect(monitor.ownsThread)
        #expect(await eventually { monitor.trimCount > 0 })
        monitor.stop()
        #expect(monitor.trimCount > 0)
        #expect(cache.totalCost <= 5_000)
    }

    /// A cache that notes the name of each thread that trims it.
    final class NamingTarget: MemoryTrimmable {
        let cache = MemoryCache<Int, Int>(costLimit: 10_000)
        let trimmers = Lock<[String]>([])
        var totalCost: Int { cache.totalCost }
        func trim(toCost cost: Int) {
            let name = currentThreadName()
            trimmers.withLock { $0.append(name) }
            cache.trim(toCost: cost)
        }
    }

    @Test("Given a pool, the monitor starts no thread: its samples and trims run as jobs on the pool")
    func monitorOnAPool() async throws {
        let root = try fakeTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sensor = MemoryPressureSensor(
            procSelfCgroup: root + "/self-cgroup", cgroupMounts: [root + "/cg"],
            pressureFile: root + "/pressure")
        let pool = try BlockingPool<Void>(width: 1, name: "test-mp-pool") {}
        defer { pool.shutdown() }
        let jobs = Lock(0)
        pool.observeJobStarts { _, _ in jobs.withLock { $0 += 1 } }
        let target = NamingTarget()
        for k in 0..<100 { target.cache.insert(k, forKey: k, cost: 100) }
        let monitor = MemoryPressureMonitor(
            target: target,
            policy: MemoryPressurePolicy(
                cgroupHighWatermark: nil, someAvg10Threshold: 10, psiTrimShare: 0.5, interval: .milliseconds(10)),
            sensor: sensor, pool: pool)
        #expect(monitor.isActive)
        #expect(!monitor.ownsThread)
        #expect(await eventually { monitor.trimCount > 0 })
        monitor.stop()
        #expect(!monitor.isActive)
        #expect(target.cache.totalCost <= 5_000)
        let trimmers = target.trimmers.withLock { $0 }
        #expect(!trimmers.isEmpty && trimmers.allSatisfy { $0.hasPrefix("test-mp-pool-") }, "\(trimmers)")
        #expect(jobs.withLock { $0 } >= monitor.trimCount)
    }

    @Test("A monitor on a pool stops polling when the pool shuts down")
    func monitorEndsWithItsPool() async throws {
        let root = try fakeTree()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let sensor = MemoryPressureSensor(
            procSelfCgroup: root + "/self-cgroup", cgroupMounts: [root + "/cg"],
            pressureFile: root + "/pressure")
        let pool = try BlockingPool<Void>(width: 1, name: "test-mp-down") {}
        let cache = MemoryCache<Int, Int>(costLimit: 10_000)
        let monitor = MemoryPressureMonitor(
            target: cache, policy: MemoryPressurePolicy(interval: .milliseconds(10)), sensor: sensor, pool: pool)
        #expect(monitor.isActive)
        pool.shutdown()
        #expect(await eventually { !monitor.isActive })
    }
}
