import StrataBase
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
import Synchronization

/// Trims a ``MemoryTrimmable`` (the memory tier) when the Linux memory signals say so.
///
/// Every `policy.interval` it reads a ``MemoryPressureSensor`` (a few small procfs and cgroup
/// files) and applies ``MemoryPressurePolicy/trimTarget(for:cacheCost:)``. Where it runs:
/// - given a ``/StrataBase/BlockingPool`` (``init(target:policy:sensor:pool:)``, as `strata serve` does):
///   no thread of its own. A task sleeps between samples, and each sample and trim is one
///   urgent job on the pool (the reads block, the trim frees memory: neither belongs on Swift's
///   cooperative pool or an event loop);
/// - without one (``init(target:policy:sensor:)``): on its own thread, `strata-mempress`.
///
/// It is off (``isActive`` false, nothing started) when the sensor finds none of the files.
/// Stops on ``stop()``, when released, when its target goes away, or when its pool shuts down.
public final class MemoryPressureMonitor: Sendable {
    private final class Runner: Sendable {
        let stopped = Atomic<Bool>(false)
        /// The polling loop has returned (target gone, pool shut down).
        let ended = Atomic<Bool>(false)
        let joined = Atomic<Bool>(false)
        /// The polling thread's `pthread_self()`, so that a stop from the thread itself (the
        /// target released during a trim and releasing the monitor) does not join itself.
        let threadID = Atomic<UInt>(0)
        let trims = Atomic<Int>(0)
    }

    /// What polls: nothing (no signal, or no thread could start), a thread, or a task whose
    /// samples run on a pool.
    private enum Poller: Sendable {
        case none
        case thread(OSThread)
        case task(Task<Void, Never>)
    }

    private let runner = Runner()
    private let poller: Poller

    /// Whether it is polling: false when no signal exists, no thread could be started, or it
    /// stopped.
    public var isActive: Bool {
        if case .none = poller { return false }
        return !runner.stopped.load(ordering: .acquiring) && !runner.ended.load(ordering: .acquiring)
    }

    /// Whether it polls on a thread of its own (`strata-mempress`) rather than on a pool.
    package var ownsThread: Bool {
        if case .thread = poller { return true }
        return false
    }

    /// Starts polling on its own thread (`strata-mempress`) unless `sensor` finds no signal at
    /// all. Cost: one thread, asleep between samples.
    public init(
        target: some MemoryTrimmable, policy: MemoryPressurePolicy = MemoryPressurePolicy(),
        sensor: MemoryPressureSensor = MemoryPressureSensor()
    ) {
        guard Self.hasSignal(policy: policy, sensor: sensor) else {
            poller = .none
            return
        }
        let runner = self.runner
        weak let weakTarget = target
        let interval = policy.interval
        let nanoseconds = Int(interval.components.seconds) * 1_000_000_000 + Int(interval.components.attoseconds / 1_000_000_000)
        let thread = try? OSThread(name: "strata-mempress") {
            runner.threadID.store(UInt(pthread_self()), ordering: .releasing)
            defer { runner.ended.store(true, ordering: .releasing) }
            while !runner.stopped.load(ordering: .acquiring) {
                guard let target = weakTarget else { return }
                if Self.poll(target: target, policy: policy, reading: sensor.read()) {
                    runner.trims.add(1, ordering: .relaxed)
                }
                // Sleep in slices so stop() takes effect promptly.
                var left = nanoseconds
                while left > 0, !runner.stopped.load(ordering: .acquiring) {
                    let slice = Swift.min(left, 50_000_000)
                    var ts = timespec(tv_sec: 0, tv_nsec: slice)
                    nanosleep(&ts, nil)
                    left -= slice
                }
            }
        }
        poller = thread.map { .thread($0) } ?? .none
    }

    /// Polls without a thread of its own, unless `sensor` finds no signal at all: a task sleeps
    /// `policy.interval` between samples, and each sample (and trim) runs as one urgent job on
    /// `pool` (the engine's). Cost: one pool job and one task wake-up per interval. Polling ends
    /// when `pool` shuts down.
    public init(
        target: some MemoryTrimmable, policy: MemoryPressurePolicy = MemoryPressurePolicy(),
        sensor: MemoryPressureSensor = MemoryPressureSensor(), pool: BlockingPool<Void>
    ) {
        guard Self.hasSignal(policy: policy, sensor: sensor) else {
            poller = .none
            return
        }
        let runner = self.runner
        weak let weakTarget = target
        let interval = policy.interval
        poller = .task(
            Task.detached {
                defer { runner.ended.store(true, ordering: .releasing) }
                while !runner.stopped.load(ordering: .acquiring) {
                    // nil: the target is gone.
                    let sampled: Bool? = try? await pool.run(lane: .urgent) { _ -> Bool in
                        guard let target = weakTarget else { return false }
                        if !runner.stopped.load(ordering: .acquiring),
                            Self.poll(target: target, policy: policy, reading: sensor.read())
                        {
                            runner.trims.add(1, ordering: .relaxed)
                        }
                        return true
                    }
                    // The pool refused (shut down, or this task cancelled by stop) or the target is gone.
                    guard sampled == true else { return }
                    do {
                        try await Task.sleep(for: interval)
                    } catch {
                        return  // cancelled by stop()
                    }
                }
            })
    }

    /// Validates `policy` (a programming error when invalid) and takes a first sample: whether
    /// any signal exists.
    private static func hasSignal(policy: MemoryPressurePolicy, sensor: MemoryPressureSensor) -> Bool {
        do { try policy.validate() } catch { preconditionFailure("memory pressure policy: \(error); call validate() first") }
        let first = sensor.read()
        return first.cgroupCurrent != nil || first.someAvg10 != nil || first.fullAvg10 != nil
    }

    /// Applies one decision; returns whether it trimmed. Exposed for tests with injected readings.
    @discardableResult
    public static func poll(
        target: some MemoryTrimmable, policy: MemoryPressurePolicy,
        reading: MemoryPressureReading
    ) -> Bool {
        guard let cost = policy.trimTarget(for: reading, cacheCost: target.totalCost) else { return false }
        target.trim(toCost: cost)
        return true
    }

    /// How many times the monitor has trimmed its target.
    public var trimCount: Int { runner.trims.load(ordering: .relaxed) }

    /// Stops polling. On its own thread: waits for the thread to exit (within about 50 ms plus
    /// one sample). On a pool: cancels the task and returns at once; a sample already running
    /// on the pool finishes, and trims only if it had checked before this call.
    public func stop() {
        runner.stopped.store(true, ordering: .releasing)
        switch poller {
        case .none:
            break
        case .task(let task):
            task.cancel()
        case .thread(let thread):
            if runner.threadID.load(ordering: .acquiring) != UInt(pthread_self()),
                runner.joined.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged
            {
                thread.join()
            }
        }
    }

    deinit { stop() }
}
