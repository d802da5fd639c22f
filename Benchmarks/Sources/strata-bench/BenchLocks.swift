import ArgumentParser
import Dispatch
import Foundation
import NIOConcurrencyHelpers
import Strata
import Synchronization

/// `strata-bench locks`: acquire/release throughput of the candidate locks, the figures the
/// project's one lock type (`Strata.Lock`) was chosen by.
struct BenchLocksCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "locks",
        abstract: "Lock throughput: Synchronization.Mutex, NIOLock, Strata's futex Lock (release build).",
        discussion: """
            Each figure is millions of lock-protected operations per second, all threads \
            together: every thread loops acquire → critical section → release until a deadline \
            (`--millis`), best of `--rounds`. Contended: all threads share one lock. \
            Uncontended: each thread has its own lock (the cost of the lock itself, and how it \
            scales when nothing is shared). Short section: one counter increment. Long section: \
            a lookup of a random key in a 100 000-entry Dictionary<Int, Int> (a cache miss, like \
            a cache index probe). Locks: `mutex` = Synchronization.Mutex (a priority-inheritance \
            futex on Linux), `nio` = swift-nio's NIOLock (pthread_mutex_t), `strata` = \
            Strata.Lock (a futex with a short adaptive spin, CStrataLinux).
            """)

    @Option(parsing: .upToNextOption, help: "Thread counts (default: 1 2 4 8 16, up to the core count).")
    var threads: [Int] = []

    @Option(help: "Milliseconds per measurement.")
    var millis = 200

    @Option(help: "Rounds per measurement (the best is reported).")
    var rounds = 3

    @Flag(help: "Print one JSON object instead of a table.")
    var json = false

    func run() throws {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let counts = threads.isEmpty ? [1, 2, 4, 8, 16].filter { $0 == 1 || $0 <= cores } : threads
        let keys = 100_000
        var table = [Int: Int](minimumCapacity: keys)
        for k in 0..<keys { table[k] = k &* 7 }
        let shared = LockBenchState(table: table)
        var rows: [String] = []
        if !json {
            print("cores: \(cores); M ops/s, all threads together, best of \(rounds) × \(millis) ms")
            print(String(format: "%-10@ %-7@ %-11@", "section", "lock", "mode") + counts.map { String(format: " %7d thr", $0) }.joined())
        }
        for section in [LockSection.short, .long] {
            for kind in ["mutex", "nio", "strata"] {
                for contended in [true, false] {
                    var figures: [Double] = []
                    for n in counts {
                        let count = contended ? 1 : n
                        let figure =
                            switch kind {
                            case "mutex":
                                measure(locks: (0..<count).map { _ in MutexBenchLock(shared) }, threads: n, section: section, keys: keys)
                            case "nio":
                                measure(locks: (0..<count).map { _ in NIOBenchLock(shared) }, threads: n, section: section, keys: keys)
                            default:
                                measure(locks: (0..<count).map { _ in StrataBenchLock(shared) }, threads: n, section: section, keys: keys)
                            }
                        figures.append(figure)
                    }
                    let mode = contended ? "contended" : "own lock"
                    if json {
                        let values = zip(counts, figures).map { String(format: "\"%d\":%.3f", $0, $1) }.joined(separator: ",")
                        rows.append(
                            "{\"section\":\"\(section.rawValue)\",\"lock\":\"\(kind)\",\"contended\":\(contended),\"mops\":{\(values)}}")
                    } else {
                        print(
                            String(format: "%-10@ %-7@ %-11@", section.rawValue, kind, mode)
                                + figures.map { String(format: " %11.2f", $0) }.joined())
                        fflush(nil)
                    }
                }
            }
        }
        if json { print("{\"cores\":\(cores),\"threads\":\(counts),\"rows\":[\(rows.joined(separator: ","))]}") }
    }

    /// Runs `threads` threads (thread t on `locks[t % locks.count]`) until the deadline; returns
    /// the best round's millions of operations per second.
    func measure<L: BenchLock>(locks: [L], threads: Int, section: LockSection, keys: Int) -> Double {
        var best = 0.0
        for _ in 0..<rounds {
            let ops = Atomic<Int>(0)
            let ready = Atomic<Int>(0)
            let done = DispatchSemaphore(value: 0)
            let start = Atomic<UInt64>(0)
            let nanos = UInt64(millis) * 1_000_000
            for t in 0..<threads {
                let lock = locks[t % locks.count]
                let thread = Thread {
                    ready.add(1, ordering: .acquiringAndReleasing)
                    while ready.load(ordering: .acquiring) < threads {}
                    _ = start.compareExchange(expected: 0, desired: DispatchTime.now().uptimeNanoseconds, ordering: .acquiringAndReleasing)
                    let deadline = start.load(ordering: .acquiring) + nanos
                    var rng = SplitMix64(seed: UInt64(t + 1))
                    var count = 0
                    repeat {
                        for _ in 0..<256 { lock.run(section, key: Int(rng.next() % UInt64(keys))) }
                        count += 256
                    } while DispatchTime.now().uptimeNanoseconds < deadline
                    ops.add(count, ordering: .relaxed)
                    done.signal()
                }
                thread.stackSize = 1 << 20
                thread.start()
            }
            for _ in 0..<threads { done.wait() }
            let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start.load(ordering: .acquiring)) / 1e9
            best = max(best, Double(ops.load(ordering: .relaxed)) / elapsed / 1e6)
        }
        return best
    }
}

enum LockSection: String { case short, long }

/// What every lock protects: a counter and a read-mostly table.
struct LockBenchState: @unchecked Sendable {
    var counter = 0
    var table: [Int: Int]
}

/// One lock under test; `run` is the whole acquire → section → release.
protocol BenchLock: Sendable {
    func run(_ section: LockSection, key: Int)
}

extension LockBenchState {
    @inline(__always) mutating func section(_ section: LockSection, key: Int) {
        switch section {
        case .short: counter &+= 1
        case .long: counter &+= table[key] ?? 0
        }
    }
}

final class MutexBenchLock: BenchLock {
    let mutex: Mutex<LockBenchState>
    init(_ state: LockBenchState) { mutex = Mutex(state) }
    func run(_ section: LockSection, key: Int) { mutex.withLock { $0.section(section, key: key) } }
}

final class NIOBenchLock: BenchLock {
    let box: NIOLockedValueBox<LockBenchState>
    init(_ state: LockBenchState) { box = NIOLockedValueBox(state) }
    func run(_ section: LockSection, key: Int) { box.withLockedValue { $0.section(section, key: key) } }
}

final class StrataBenchLock: BenchLock {
    let lock: Strata.Lock<LockBenchState>
    init(_ state: LockBenchState) { lock = Strata.Lock(state) }
    func run(_ section: LockSection, key: Int) { lock.withLock { $0.section(section, key: key) } }
}
